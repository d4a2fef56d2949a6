"""The one wrapper through which shipyard calls external tools.

It logs the command, times it, redacts secrets and raises ToolError with the tail of its output on failure.
"""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from shipyard.errors import ToolError

log = logging.getLogger("shipyard.plumbing.command")

# Environment variables whose values must never appear in logs or error messages.
_SECRET_MARKERS = ("PASSWORD", "TOKEN", "SECRET", "API_KEY", "CREDENTIAL")


@dataclass(frozen=True)
class Completed:
    """What a finished command produced."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        """stdout, then stderr: what a failure message shows (compilers and ninja report on stdout)."""
        return f"{self.stdout.rstrip()}\n{self.stderr}".strip()


def _redact(text: str, env: Mapping[str, str] | None) -> str:
    if not env:
        return text
    for key, value in env.items():
        if value and len(value) >= 4 and any(m in key.upper() for m in _SECRET_MARKERS):
            text = text.replace(value, "***")
    return text


# The process environment is shared by every thread: a thread that sets a variable for a moment
# and removes it again (wheel/repair.source_date_epoch) holds this lock, and a child's environment
# is copied under it, so a copy never meets a variable removed between reading its name and its
# value (KeyError, seen when wheels of several Pythons were packed side by side).
ENVIRON_LOCK = threading.RLock()


def environ_snapshot() -> dict[str, str]:
    """A copy of the process environment, taken under ENVIRON_LOCK."""
    with ENVIRON_LOCK:
        return dict(os.environ)

def run(
    args: Sequence[object],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    extra_env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    check: bool = True,
    capture: bool = True,
    input_text: str | None = None,
    what: str | None = None,
) -> Completed:
    """Run a command; raise ToolError (with its output) when it fails and `check` is set.

    `extra_env` is merged over the current environment (or over `env` when given).
    `what` is a short human label used in the error message.
    """
    argv = [os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in args]
    full_env = environ_snapshot() if env is None else dict(env)
    if extra_env:
        full_env.update(extra_env)
    shown = _redact(shlex.join(argv), full_env)
    log.debug("run: %s (cwd=%s)", shown, cwd or ".")
    start = time.monotonic()
    try:
        proc = subprocess.run(
            argv,
            cwd=os.fspath(cwd) if cwd is not None else None,
            env=full_env,
            timeout=timeout,
            capture_output=capture,
            text=True,
            input=input_text,
            stdin=None if input_text is not None else subprocess.DEVNULL,
        )
    except FileNotFoundError as exc:
        raise ToolError(f"{what or argv[0]}: program not found: {argv[0]}", cmd=argv) from exc
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        raise ToolError(f"{what or argv[0]}: timed out after {timeout:.0f}s: {shown}", cmd=argv,
                        output=_redact(err, full_env)) from exc
    seconds = time.monotonic() - start
    stdout = _redact(proc.stdout or "", full_env)
    stderr = _redact(proc.stderr or "", full_env)
    log.debug("done in %.1fs (exit %d): %s", seconds, proc.returncode, shown)
    done = Completed(tuple(argv), proc.returncode, stdout, stderr, seconds)
    if check and proc.returncode != 0:
        raise ToolError(f"{what or Path(argv[0]).name} failed (exit {proc.returncode}): {shown}",
                        cmd=argv, returncode=proc.returncode, output=done.output)
    return done


def stream(args: Sequence[object], *, on_line: Callable[[str], None], cwd: str | os.PathLike[str] | None = None,
           env: Mapping[str, str] | None = None, what: str | None = None) -> Completed:
    """Run a long command, handing each line of its stdout and stderr (merged) to `on_line` as it
    comes; never raises for a non-zero exit (the caller reads the lines to say what failed).
    The output is not kept: `on_line` decides what to keep."""
    argv = [os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in args]
    full_env = environ_snapshot() if env is None else dict(env)
    shown = _redact(shlex.join(argv), full_env)
    log.debug("stream: %s (cwd=%s)", shown, cwd or ".")
    start = time.monotonic()
    try:
        proc = subprocess.Popen(argv, cwd=os.fspath(cwd) if cwd is not None else None, env=full_env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace")
    except FileNotFoundError as exc:
        raise ToolError(f"{what or argv[0]}: program not found: {argv[0]}", cmd=argv) from exc
    assert proc.stdout is not None
    with proc:
        for line in proc.stdout:
            on_line(_redact(line.rstrip("\n"), full_env))
    seconds = time.monotonic() - start
    log.debug("done in %.1fs (exit %d): %s", seconds, proc.returncode, shown)
    return Completed(tuple(argv), proc.returncode, "", "", seconds)
