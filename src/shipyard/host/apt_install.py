"""The Debian packages of a Linux CI lane (resources/ci_lane_packages.toml), installed when missing:
`shipyard ci bootstrap <lane>` in a job container, where shipyard is installed from an index and
no checkout of its sources exists."""

from __future__ import annotations

import functools
import time
import tomllib
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from shipyard.errors import UsageError, nearest
from shipyard.plumbing import command
from shipyard.plumbing.progress import Progress

APT_LISTS = Path("/var/lib/apt/lists")
# Package lists fetched within the hour (a job's container step has just done so) are used as they
# are; an install that fails on them updates them and tries once more.
FRESH_LISTS_SECONDS = 3600


@functools.cache
def lane_packages() -> dict[str, tuple[str, ...]]:
    """{lane: its apt packages}, as the package data lists them (read once: every container lane's
    install step and `ci bootstrap`'s help ask)."""
    text = resources.files("shipyard.resources").joinpath("ci_lane_packages.toml").read_text(encoding="utf-8")
    return {lane: tuple(packages) for lane, packages in tomllib.loads(text)["lanes"].items()}


def packages_of(lane: str) -> tuple[str, ...]:
    """The apt packages of `lane`; a lane with no set is a usage error naming the ones there are."""
    sets = lane_packages()
    if lane not in sets:
        hint = nearest(lane, sets)
        raise UsageError(f"ci bootstrap: lane: no apt package set for it; "
                         f"{f'did you mean {hint}? ' if hint else ''}name one of {', '.join(sorted(sets))} "
                         f"(shipyard/resources/ci_lane_packages.toml) (got {lane})")
    return sets[lane]


def missing_packages(packages: Sequence[str]) -> list[str]:
    """Those of `packages` dpkg does not list as installed."""
    missing = []
    for package in packages:
        done = command.run(["dpkg-query", "-W", "-f=${Status}", package], check=False, what="dpkg-query")
        if done.returncode != 0 or "install ok installed" not in done.output:
            missing.append(package)
    return missing


def install_lane_packages(lane: str, say: Progress) -> list[str]:
    """Install what `lane` needs and this machine lacks (as root, non-interactively); returns what
    was installed, nothing when all were there."""
    missing = missing_packages(packages_of(lane))
    if not missing:
        say(f"{lane}: every apt package is installed")
        return []
    say(f"{lane}: installing {' '.join(missing)}")
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing]
    update = ["apt-get", "update", "-qq"]
    if _lists_are_fresh():
        if command.run(install, extra_env=env, check=False, what="apt-get install").returncode == 0:
            return missing
    command.run(update, extra_env=env, what="apt-get update")
    command.run(install, extra_env=env, what="apt-get install")
    return missing


def _lists_are_fresh() -> bool:
    newest = max((p.stat().st_mtime for p in APT_LISTS.glob("*_Packages*")), default=0.0)
    return time.time() - newest < FRESH_LISTS_SECONDS
