"""The suite's checkout guard (support/checkout_guard.py) counts what the suite's own processes
wrote into the checkout, not what a developer's commands write there while it runs: `nox -s tests
> run.log` in the checkout's root must not fail a green run, a test writing into it still must."""

from __future__ import annotations

import subprocess
from pathlib import Path

from support.checkout_guard import checkout_state, written_by_suite


def test_the_guard_counts_the_suites_writes_and_not_a_log_written_from_outside(tmp_path: Path) -> None:
    repo = tmp_path / "checkout"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", repo], check=True)
    (repo / "README.md").write_text("a checkout\n")
    before = checkout_state(repo)
    assert before is not None
    started = []
    try:
        # The suite's controller, whose stdout is a log in the checkout (`pytest > own.log`).
        with (repo / "own.log").open("w") as log:
            started.append(suite := subprocess.Popen(["sh", "-c", "echo collected; exec sleep 60"], stdout=log,
                                                    cwd=tmp_path))
        # A process outside the suite writing into the checkout as the run goes: nox's `> run.log`.
        with (repo / "run.log").open("a") as log:
            started.append(subprocess.Popen(["sh", "-c", "echo 'nox -s tests'; exec sleep 60"], stdout=log,
                                            cwd=tmp_path))
        # What a test of the suite wrote: a wheel in dist/, a change to a file of the checkout.
        (repo / "dist").mkdir()
        (repo / "dist" / "pkg-1.0-py3-none-any.whl").write_bytes(b"PK")
        (repo / "README.md").write_text("a checkout, changed by a test\n")
        for _ in range(100):  # both shells have written their line
            if (repo / "own.log").stat().st_size and (repo / "run.log").stat().st_size:
                break
            subprocess.run(["sleep", "0.05"], check=True)
        after = checkout_state(repo)
        assert after is not None
        assert {"own.log", "run.log"} <= after.keys() - before.keys()  # both changed under the checkout
        assert written_by_suite(repo, before, after, suite.pid) == ["README.md", "dist/pkg-1.0-py3-none-any.whl"]
    finally:
        for process in started:
            process.kill()
            process.wait()
