"""`shipyard` in a child process, as a user or a CI step runs it: the one way the tests start it.
A test that needs only an exit status and what was printed calls `shipyard.cli.main` in its own
process; a child is for what only a whole process shows (its environment, its log, a timeout, a
kill, a secret that must not reach any of its output)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def shipyard_command(*args: str | Path) -> list[str]:
    """The command line of `shipyard ARGS` run by this interpreter (`python -m shipyard.cli`), for
    a test that starts and steers the process itself."""
    return [sys.executable, "-m", "shipyard.cli", *map(str, args)]


def without_shipyard_settings(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without a SHIPYARD_* variable (a developer's or CI's own settings
    and credentials), then `extra`: what the child sees is what the test gave it."""
    return {k: v for k, v in os.environ.items() if not k.startswith("SHIPYARD_")} | dict(extra or {})


def run_shipyard(*args: str | Path, env: Mapping[str, str] | None = None, cwd: Path | None = None,
                 timeout: float = 300, check: bool = False) -> subprocess.CompletedProcess[str]:
    """`shipyard ARGS` in a child process, its output captured as text, its stdin empty (a command
    that waited for input would hang the suite; `timeout` fails the test instead). `env` is the
    child's whole environment (default: this process's). `check`: the test fails with the
    command's output unless it exits 0."""
    done = subprocess.run(shipyard_command(*args), env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    if check and done.returncode != 0:
        raise AssertionError(f"`shipyard {' '.join(map(str, args))}` exited {done.returncode}:\n"
                             f"{done.stdout}{done.stderr}")
    return done
