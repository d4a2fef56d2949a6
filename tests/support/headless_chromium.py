"""Debian's `chromium` (installed by ci/bootstrap.sh), headless, as the browser tests drive it:
`--dump-dom` for what a page shows after its scripts ran, `--screenshot` for its pixels."""

from __future__ import annotations

import shutil
from pathlib import Path

from shipyard.plumbing import command

WIDTH, HEIGHT = 1600, 1400


def chromium(profile: Path, *args: str, width: int = WIDTH, height: int = HEIGHT) -> command.Completed:
    """Headless Chromium as this machine runs it: no sandbox (root), no GPU, no network chatter,
    a fresh profile."""
    binary = shutil.which("chromium")
    assert binary, "chromium is not installed: ci/bootstrap.sh installs Debian's chromium package"
    profile.mkdir(exist_ok=True)
    return command.run([binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={profile}", "--hide-scrollbars", "--force-device-scale-factor=1",
                        f"--window-size={width},{height}", *args], timeout=120, what="chromium")
