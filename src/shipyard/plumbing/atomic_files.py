"""Files that appear whole: written beside their place under a name of their own, then renamed
over it, so that a reader (or a second run writing the same file) sees the old file or the new
one, never half of either. And folders that survive a crash: `sync_tree` before a rename makes
them visible, `sync_folder` after it, so that a power cut cannot leave a switched name pointing at
files the disk never got."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from shipyard.plumbing.hashing import sha256_of


def write_atomic(path: Path, text: str | bytes) -> None:
    """Write `text` (UTF-8 when a str) so that a reader sees the old file or the new one, never half (0644)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(text.encode() if isinstance(text, str) else text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def copy_atomic(source: Path, target: Path) -> Path:
    """Copy `source` to `target` (0644, its times kept) so that `target` appears whole; return `target`.
    The staging name is one of its own: two runs may copy the same file into one folder at once."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    os.close(fd)
    try:
        shutil.copy2(source, tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def replace_if_changed(staged: Path, target: Path, mode: int = 0o644) -> bool:
    """Rename `staged` (written beside `target`) over `target` with `mode`, unless `target` already
    holds the same bytes: then `staged` is removed and `target`, its times included, is left alone.
    Whether it replaced `target`."""
    if target.is_file() and sha256_of(target) == sha256_of(staged):
        staged.unlink()
        return False
    os.chmod(staged, mode)
    os.replace(staged, target)
    return True


def sync_folder(folder: Path) -> None:
    """fsync `folder` itself: the names created, renamed or removed in it reach the disk."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_tree(root: Path) -> None:
    """fsync every file and folder under `root`, and `root`, deepest first: everything in it is on
    the disk before a rename makes it visible. Symlinks are not followed."""
    for folder, _, files in os.walk(root, topdown=False):
        here = Path(folder)
        for name in files:
            path = here / name
            if path.is_symlink():
                continue
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        sync_folder(here)
