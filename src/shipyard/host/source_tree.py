"""What a source tree is: its git commit, its commit time and a content hash of its files."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from shipyard.errors import ToolError
from shipyard.plumbing import command

# Build outputs that may sit inside a component folder and must not change its hash.
_IGNORED_DIRS = {".git", "build", "dist", "_skbuild", "__pycache__", ".pytest_cache", ".nox",
                 ".shipyard", ".mypy_cache", ".ruff_cache", ".hypothesis"}


# 1980-01-01: the earliest zip timestamp, the date of what no commit dates.
_NO_DATE = 315532800


@dataclass(frozen=True)
class GitInfo:
    sha: str  # "unknown" outside a git checkout
    dirty: bool
    commit_time: int  # seconds since the epoch; SOURCE_DATE_EPOCH for reproducible builds


def git_info(root: Path) -> GitInfo:
    """The checkout's HEAD commit; SOURCE_DATE_EPOCH (if set) wins over the commit time."""
    try:
        sha = command.run(["git", "-C", root, "rev-parse", "HEAD"], timeout=30).stdout.strip()
        when = int(command.run(["git", "-C", root, "log", "-1", "--format=%ct"], timeout=30).stdout.strip())
        status = command.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                             timeout=60).stdout
    except (ToolError, ValueError):
        sha, when, status = "unknown", _NO_DATE, ""
    if os.environ.get("SOURCE_DATE_EPOCH"):
        when = int(os.environ["SOURCE_DATE_EPOCH"])
    return GitInfo(sha=sha, dirty=bool(status.strip()), commit_time=when)


def source_date(root: Path, paths: list[Path]) -> int:
    """The time of the newest commit that touched any of `paths` (files or folders under the
    checkout `root`): a date that only a change of those sources moves, so a package stamped with
    it keeps its bytes across commits that leave them alone. SOURCE_DATE_EPOCH (if set) wins; in
    a shallow clone the oldest commit it holds seems to add every file, so the date is at most
    that commit's; outside a git checkout, or for sources never committed, it is 1980-01-01 (the
    earliest zip timestamp, as git_info's)."""
    if os.environ.get("SOURCE_DATE_EPOCH"):
        return int(os.environ["SOURCE_DATE_EPOCH"])
    try:
        when = command.run(["git", "-C", root, "log", "-1", "--format=%ct", "--", *[str(p) for p in paths]],
                           timeout=60).stdout.strip()
        return int(when) if when else _NO_DATE
    except (ToolError, ValueError):
        return _NO_DATE


def list_files(path: Path) -> list[Path]:
    """Every source file under `path` (git's view when available: tracked + untracked, not ignored)."""
    try:
        out = command.run(["git", "-C", path, "ls-files", "-z", "--cached", "--others",
                           "--exclude-standard", "--", "."], timeout=60).stdout
        names = sorted({n for n in out.split("\0") if n})
        files = [path / n for n in names if (path / n).is_file()]
        if files or not any(path.iterdir()):
            return files
    except ToolError:
        pass
    found = []
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if d not in _IGNORED_DIRS and not d.endswith(".egg-info"))
        found += [Path(dirpath) / f for f in sorted(filenames)]
    return found


def hash_tree(path: Path) -> str:
    """sha256 over every file's relative path, executable bit and bytes."""
    digest = hashlib.sha256()
    for file in list_files(path):
        rel = file.relative_to(path).as_posix()
        if any(part in _IGNORED_DIRS for part in rel.split("/")):
            continue
        digest.update(rel.encode() + b"\0")
        digest.update(b"x" if os.access(file, os.X_OK) else b"-")
        digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()
