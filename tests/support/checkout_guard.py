"""What the suite wrote into the checkout: git's view of it (modified, untracked and ignored
files) at the start and at the end of the run, less what processes outside the suite were
writing meanwhile.

A test keeps its state under pytest's temporary folders: one that wrote into the checkout
(dist/, .shipyard/) would overwrite a developer's files and make results depend on which test
ran first. But the checkout is also where a developer runs the suite from, and what they write
there is not the suite's: `nox -s tests > run.log` makes run.log grow for the whole run. So a
changed file that a process outside the suite (nox, a shell, `tee`) holds open for writing at
the end, or that is the suite's own output (its stdout, stderr), is not counted. Everything
else that changed is: the guard stays as strict for the suite's own processes, whichever wrote.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections import defaultdict
from pathlib import Path

# What pytest, nox and the linters make themselves.
MADE_BY_TOOLS = ("__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache")

State = dict[str, tuple[str, int, int]]


def checkout_state(repo: Path) -> State | None:
    """Every path git reports in the checkout (modified, untracked, ignored) with its status and
    its mtime and size; None outside a git checkout (an unpacked sdist), where there is nothing to guard."""
    try:
        done = subprocess.run(["git", "status", "--porcelain", "-z", "--ignored", "--untracked-files=all", "--",
                               ".", ":(exclude).nox", ":(exclude).venv"],
                              cwd=repo, capture_output=True, check=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    state = {}
    for entry in done.stdout.decode(errors="surrogateescape").split("\0"):
        if len(entry) < 4 or entry[2] != " ":
            continue  # the empty tail, or a rename's source path (-z puts it in an entry of its own)
        path = entry[3:]
        if any(part in MADE_BY_TOOLS for part in Path(path).parts):
            continue
        try:
            info = (repo / path).lstat()
            state[path] = (entry[:2], info.st_mtime_ns, info.st_size)
        except OSError:
            state[path] = (entry[:2], 0, -1)  # deleted (a tracked file a test removed)
    return state


def written_by_suite(repo: Path, before: State, after: State, suite_pid: int | None = None) -> list[str]:
    """The paths that changed between `before` and `after`, less those written by processes
    outside the suite: the process `suite_pid` (this one by default) and its descendants."""
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    if not changed:
        return []
    outside = outside_writes(suite_pid if suite_pid is not None else os.getpid())
    return [p for p in changed if _identity(repo / p) not in outside]


def outside_writes(suite_pid: int) -> set[tuple[int, int]]:
    """The (device, inode) of every regular file that a process outside the suite holds open for
    writing, and of the suite's own stdout and stderr: what the suite's tests did not write. Empty
    where there is no /proc to read."""
    suite = _descendants(suite_pid)
    found = set()
    for pid in _pids():
        for fd in (1, 2) if pid == suite_pid else ():
            found |= _regular(Path(f"/proc/{pid}/fd/{fd}"))
        if pid in suite:
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue  # gone, or another user's
        for fd_name in fds:
            if _open_for_writing(pid, fd_name):
                found |= _regular(Path(f"/proc/{pid}/fd/{fd_name}"))
    return found


def _pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = defaultdict(list)
    for pid in _pids():
        try:
            # The parent is the 2nd field after the command's name, which may hold spaces and parentheses.
            parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children[parent].append(pid)
    found, todo = {root}, [root]
    while todo:
        for child in children[todo.pop()]:
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _open_for_writing(pid: int, fd: str) -> bool:
    try:
        info = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
    except OSError:
        return False
    flags = next((int(line.split()[1], 8) for line in info.splitlines() if line.startswith("flags:")), 0)
    return flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR)


def _regular(link: Path) -> set[tuple[int, int]]:
    try:
        info = link.stat()
    except OSError:
        return set()
    return {(info.st_dev, info.st_ino)} if stat.S_ISREG(info.st_mode) else set()


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = path.lstat()
    except OSError:
        return None
    return info.st_dev, info.st_ino
