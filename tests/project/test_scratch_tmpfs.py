"""`nox -s tests` puts the suite's scratch on a tmpfs (ci/scratch_tmpfs.py). A killed run cannot
unmount its own, and its pages stay in memory until someone does: on 2026-12-05 CI's run started
beside a killed run's 11 GB tmpfs, filled its own and lost both pytest workers to the kernel's OOM
killer. These tests kill a run that mounted its scratch and check what the next run does."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("scratch_tmpfs", ROOT / "ci" / "scratch_tmpfs.py")
assert _spec and _spec.loader
scratch_tmpfs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scratch_tmpfs)

needs_mount = pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0,
                                 reason="mounting a tmpfs needs root on Linux (CI's machines are)")

MEMINFO_24_GIB_12_AVAILABLE = textwrap.dedent("""\
    MemTotal:       24683792 kB
    MemFree:          812344 kB
    MemAvailable:   12582912 kB
    Shmem:          11534336 kB
""")


def _mounted_here(folder: Path) -> bool:
    return folder in scratch_tmpfs.scratch_mounts(Path("/proc/self/mounts").read_text())


def _run_that_mounts_and_waits(tmp_path: Path) -> tuple[subprocess.Popen[str], Path]:
    """A run that mounted its scratch under `tmp_path` and is still in its tests."""
    script = textwrap.dedent(f"""\
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("scratch_tmpfs", {str(ROOT / "ci" / "scratch_tmpfs.py")!r})
        module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
        module.MIN_AVAILABLE_GIB = 0  # the suite running this test holds its own scratch
        with module.scratch_env(print, print) as env:
            print("TMPDIR=" + env["TMPDIR"], flush=True)
            sys.stdin.read()  # its tests, until the test closes this pipe
        """)
    env = {k: v for k, v in os.environ.items() if k != "SHIPYARD_TEST_SCRATCH"} | {"TMPDIR": str(tmp_path)}
    run = subprocess.Popen([sys.executable, "-c", script], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           text=True)
    assert run.stdout is not None
    for line in run.stdout:
        if line.startswith("TMPDIR="):
            return run, Path(line.removeprefix("TMPDIR=").strip()).parent
    raise AssertionError(f"the run ended before it mounted its scratch (exit {run.wait()})")


@pytest.fixture
def cleanup_mounts(tmp_path: Path):
    yield
    for folder in scratch_tmpfs.scratch_mounts(Path("/proc/self/mounts").read_text()):
        if folder.is_relative_to(tmp_path):
            scratch_tmpfs.unmount(folder)


def test_memory_in_use_by_another_tmpfs_keeps_the_scratch_on_disk() -> None:
    # 24 GiB in the machine, 12 of them available: the decision reads what is available
    available = scratch_tmpfs.available_memory_gib(MEMINFO_24_GIB_12_AVAILABLE)
    assert available == 12.0
    reason = scratch_tmpfs.refusal({}, available)
    if os.geteuid() == 0 and sys.platform.startswith("linux"):
        assert reason == "12.0 GiB of memory available, the tmpfs needs 20"
    assert scratch_tmpfs.refusal({}, 23.0) in ("", "not root", "not Linux")
    assert scratch_tmpfs.refusal({"SHIPYARD_TEST_SCRATCH": "disk"}, 23.0) == "SHIPYARD_TEST_SCRATCH=disk"


def test_a_meminfo_without_memavailable_is_an_error_that_says_so() -> None:
    with pytest.raises(ValueError, match="no MemAvailable line"):
        scratch_tmpfs.available_memory_gib("MemTotal: 1024 kB\n")


def test_scratch_mounts_reads_only_the_suites_scratch_folders() -> None:
    mounts = textwrap.dedent("""\
        shipyard-tests /tmp/shipyard-tests-scratch-ab12 tmpfs rw,relatime,size=18512844k,mode=755 0 0
        shipyard-tests /tmp/shipyard-tests-scratch-ab12/docker tmpfs rw,relatime,size=18512844k,mode=755 0 0
        shipyard-tests /tmp/with\\040space/shipyard-tests-scratch-cd34 tmpfs rw 0 0
        tmpfs /dev/shm tmpfs rw,relatime 0 0
        tmpfs /tmp/shipyard-tests-scratch-notours tmpfs rw 0 0
    """)
    assert scratch_tmpfs.scratch_mounts(mounts) == [Path("/tmp/shipyard-tests-scratch-ab12"),
                                                    Path("/tmp/with space/shipyard-tests-scratch-cd34")]


@needs_mount
@pytest.mark.usefixtures("cleanup_mounts")
def test_the_next_run_reclaims_a_killed_runs_tmpfs_and_leaves_a_live_ones(tmp_path: Path) -> None:
    (tmp_path / "killed").mkdir()
    (tmp_path / "live").mkdir()
    killed, killed_scratch = _run_that_mounts_and_waits(tmp_path / "killed")
    live, live_scratch = _run_that_mounts_and_waits(tmp_path / "live")
    try:
        (killed_scratch / "tmp" / "build-output").write_bytes(os.urandom(4 << 20))
        killed.send_signal(signal.SIGKILL)  # as CI's timeout or a session's end: no finally runs
        killed.wait()
        assert _mounted_here(killed_scratch), "a run killed with SIGKILL cannot unmount its own scratch"

        said: list[str] = []
        scratch_tmpfs.reclaim_abandoned(said.append, said.append)

        assert not _mounted_here(killed_scratch) and not killed_scratch.exists()
        assert f"reclaimed 4 MB: the tests' tmpfs at {killed_scratch}, left mounted by a run that was killed" in said
        assert _mounted_here(live_scratch), "a run still going keeps its scratch"
        assert not any(str(live_scratch) in line for line in said)
    finally:
        assert live.stdin is not None
        live.stdin.close()  # its tests are over: it leaves the with block and unmounts
        try:
            ended = live.wait(timeout=30)
        except subprocess.TimeoutExpired:
            live.kill()
            raise
    assert ended == 0
    assert not _mounted_here(live_scratch) and not live_scratch.exists(), "a run that ends unmounts its scratch"


@needs_mount
@pytest.mark.usefixtures("cleanup_mounts")
def test_a_scratch_with_no_owner_lock_is_reclaimed_only_once_it_is_old(tmp_path: Path) -> None:
    folder = tmp_path / (scratch_tmpfs.FOLDER_PREFIX + "between-mount-and-lock")
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", scratch_tmpfs.MOUNT_SOURCE, str(folder)], check=True)

    scratch_tmpfs.reclaim_abandoned(print, print)
    assert _mounted_here(folder), "a run may be between its mount and its lock"

    old = time.time() - scratch_tmpfs.UNLOCKED_GRACE_S - 5
    os.utime(folder, (old, old))
    scratch_tmpfs.reclaim_abandoned(print, print)
    assert not _mounted_here(folder)
