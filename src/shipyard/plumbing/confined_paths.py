"""Relative paths read from a file shipyard is given, kept inside the folder they are relative to.

A manifest's `path` and `provenance`, an image record's SBOM, a variant record's `path`: each is joined
onto a folder (dist/, a fragment) and then read, signed, copied or published. A path that climbs out
(`../x`), is absolute, or reaches a symlink that leads out would make a command read or write a file
it was never given (sign /etc/hostname and call it verified). `relative_path_problem` is the check on
the text (what a record model accepts); `confined` adds the check on the disk (where it really leads).
docs/identifiers-and-paths.md states the rules for users.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path, PureWindowsPath

from shipyard.plumbing.input_files import input_error

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def relative_path_problem(value: str) -> str | None:
    """Why `value` is not a normalised relative path (forward slashes, no '.' or '..' parts, no
    control characters), or None when it is one."""
    if not value:
        return "is empty; give a path relative to the folder"
    if _CONTROL.search(value) or "\\" in value:
        return "holds a control character or a backslash; write a relative path with '/'"
    if value.startswith("/") or PureWindowsPath(value).drive:
        return "is an absolute path; give a path relative to the folder"
    if posixpath.normpath(value) != value or value == "." or ".." in value.split("/"):
        return "is not a normalised relative path inside the folder (no '.', '..' or empty parts)"
    return None


def check_relative_path(value: str) -> str:
    """`value` when relative_path_problem finds nothing; ValueError otherwise (a pydantic validator)."""
    problem = relative_path_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def resolves_inside(path: Path, root: Path) -> bool:
    """Whether `path`, every symlink on the way followed, lies inside `root` (itself resolved)."""
    try:
        return path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL byte: no place inside either
        return False


def confined(root: Path, relative: str, *, file: Path | str, key: str, fix: str) -> Path:
    """`root / relative`, once `relative` is a normalised relative path and the place it really
    leads to (every symlink on the way resolved) lies inside `root`; else InputError (one line,
    exit 2) naming `file` (where the path was read), `key` and the value. The path may not exist
    yet (an envelope to write): its existing part is what is resolved."""
    problem = relative_path_problem(relative)
    if problem is None and not resolves_inside(root / relative, root):
        problem = f"leads outside {root} through a symlink"
    if problem is not None:
        raise input_error(file, key, problem, fix, value=relative)
    return root / relative
