"""The test suite's scratch on a tmpfs (`nox -s tests`): the tests' temporary folders and the data
of the dockerd the suite starts, in memory for the run and unmounted afterwards. The disk of the
machines CI runs on is ext4 without a journal, whose inode allocator skips every inode freed in
the last five minutes, one buffer lookup each: a suite that makes and drops millions of files
spent a third of the fixture pipeline's CPU in the kernel that way (docs/limits.md). Standard
library only: the noxfile imports it before any venv exists.

A tmpfs holds its memory until it is unmounted, and a run that is killed (a CI timeout, a session
that ends) cannot unmount its own. So every run first reclaims the scratch of runs that are gone,
and goes in memory only when the machine has the memory *available*: on 2026-12-05 a run on a
24 GiB machine started beside a killed run's 11 GB tmpfs, filled its own to 11 GB and the kernel
killed both pytest workers.

Which runs are gone: each run holds an exclusive flock on OWNER_LOCK inside its tmpfs while it
lasts. The kernel drops the lock when the process dies, however it dies, so a lock that can be
taken belongs to no one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

FOLDER_PREFIX = "shipyard-tests-scratch-"
MOUNT_SOURCE = "shipyard-tests"  # the tmpfs's name in /proc/mounts
OWNER_LOCK = ".owner.lock"
# A whole run held up to 11.6 GB in its tmpfs at once (2026-12-03), beside its compilers, servers
# and containers: in memory only when this much is available when the run starts.
MIN_AVAILABLE_GIB = 20
# A scratch mount with no lock file yet is a run between its mount and its lock for a moment; one
# this old is a run killed in between.
UNLOCKED_GRACE_S = 60


def available_memory_gib(meminfo: str) -> float:
    """MemAvailable of a /proc/meminfo text, in GiB: what can be used without swapping (free
    memory and the page cache the kernel can drop; not another tmpfs's pages)."""
    for line in meminfo.splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 2**20
    raise ValueError("/proc/meminfo has no MemAvailable line (Linux 3.14 or newer has it)")


def refusal(env: dict[str, str], available_gib: float) -> str:
    """Why the scratch stays on disk, or "" when it goes on a tmpfs."""
    if env.get("SHIPYARD_TEST_SCRATCH") == "disk":
        return "SHIPYARD_TEST_SCRATCH=disk"
    if not sys.platform.startswith("linux"):
        return "not Linux"
    if os.geteuid() != 0:
        return "not root"
    if available_gib < MIN_AVAILABLE_GIB:
        return f"{available_gib:.1f} GiB of memory available, the tmpfs needs {MIN_AVAILABLE_GIB}"
    return ""


def scratch_mounts(mounts: str) -> list[Path]:
    """The suite's scratch folders mounted now, from a /proc/self/mounts text (only the folders
    themselves: dockerd's bind mount of its data root inside one is gone with it)."""
    found = []
    for line in mounts.splitlines():
        source, target, fstype = line.split()[:3]
        target = target.replace("\\040", " ")  # /proc/mounts escapes spaces
        if source == MOUNT_SOURCE and fstype == "tmpfs" and Path(target).name.startswith(FOLDER_PREFIX):
            found.append(Path(target))
    return found


def is_abandoned(folder: Path, now: float) -> bool:
    """True when no living run owns the scratch mounted at `folder`."""
    lock = folder / OWNER_LOCK
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        return now - folder.stat().st_mtime > UNLOCKED_GRACE_S
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing drops a lock this test took
    return True


def unmount(folder: Path) -> bool:
    """Unmount the scratch at `folder` and remove the folder; -l: a container's process that
    outlived its run must not keep the mount busy."""
    if subprocess.run(["umount", "-R", "-l", str(folder)], check=False).returncode != 0:
        return False
    folder.rmdir()
    return True


def reclaim_abandoned(log: Callable[[str], None], warn: Callable[[str], None]) -> None:
    """Unmount the scratch of every run that is gone, saying what it held."""
    for folder in scratch_mounts(Path("/proc/self/mounts").read_text()):
        if not is_abandoned(folder, time.time()):
            continue
        held_mb = shutil.disk_usage(folder).used / 1e6
        if unmount(folder):
            log(f"reclaimed {held_mb:,.0f} MB: the tests' tmpfs at {folder}, left mounted by a run that was killed")
        else:
            warn(f"could not unmount a killed run's tmpfs at {folder} ({held_mb:,.0f} MB held): "
                 f"`umount -R -l {folder}`")


@contextlib.contextmanager
def scratch_env(log: Callable[[str], None], warn: Callable[[str], None]) -> Iterator[dict[str, str]]:
    """The environment that puts the suite's scratch on a tmpfs mounted for the run: TMPDIR (the
    tests' temporary folders) and SHIPYARD_TEST_DOCKER_ROOT (read by tests/support/docker_daemon.py:
    images, containers, the act jobs' workspaces). {} when it stays on disk; unmounted afterwards,
    whatever the tests' result."""
    reason = refusal(dict(os.environ), float("inf"))
    if not reason:
        reclaim_abandoned(log, warn)
        reason = refusal(dict(os.environ), available_memory_gib(Path("/proc/meminfo").read_text()))
    folder = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX)) if not reason else None
    if folder is not None and subprocess.run(["mount", "-t", "tmpfs", "-o", "size=75%,mode=0755", MOUNT_SOURCE,
                                              str(folder)]).returncode != 0:
        folder.rmdir()
        folder, reason = None, "mount refused"
    if folder is None:
        log(f"the tests' scratch on disk ({reason})")
        yield {}
        return
    # Held until this process ends: the file stays open (not inherited by the tests: Python opens
    # files close-on-exec), so even a run killed with SIGKILL leaves its lock free to take.
    owner = os.open(folder / OWNER_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(owner, fcntl.LOCK_EX)
    log(f"the tests' scratch (temporary folders, dockerd's data) on a tmpfs at {folder}")
    (folder / "tmp").mkdir()
    (folder / "tmp").chmod(0o1777)  # as /tmp: the containers' users write there too
    try:
        yield {"TMPDIR": str(folder / "tmp"), "SHIPYARD_TEST_DOCKER_ROOT": str(folder / "docker")}
    finally:
        os.close(owner)
        if not unmount(folder):
            warn(f"could not unmount the tests' tmpfs at {folder}: `umount -R -l {folder}`")
