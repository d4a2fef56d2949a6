"""The PyPI flavour: a wheel of the default variant under the plain version (PyPI refuses local
versions such as 1.7.0+cpu), with METADATA, the .dist-info folder and RECORD rewritten
(wheel/repack.py: the same bytes on every run, every other entry copied as it was)."""

from __future__ import annotations

from pathlib import Path

from packaging.utils import parse_wheel_filename
from packaging.version import Version

from shipyard.wheel.repack import repack


def plain_name(wheel_name: str) -> str:
    """The wheel's file name without the local version label (the same name if it has none)."""
    name, version, _, _ = parse_wheel_filename(wheel_name)
    if not version.local:
        return wheel_name
    local = f"{version.public}+{version.local}"
    stem = wheel_name[: -len(".whl")]
    head, tail = stem.split(f"-{local}-", 1) if f"-{local}-" in stem else stem.split(f"-{version}-", 1)
    return f"{head}-{version.public}-{tail}.whl"


def plain_version_wheel(wheel: Path, out_dir: Path) -> Path:
    """`wheel` rewritten under its plain version into `out_dir` (reused when already there with
    the bytes this function makes; `<name>.source.json` beside it is the memo that says so)."""
    target = out_dir / plain_name(wheel.name)
    if target.name == wheel.name:
        return wheel
    _, version, _, _ = parse_wheel_filename(wheel.name)
    return repack(wheel, target, version=Version(str(version)).public)
