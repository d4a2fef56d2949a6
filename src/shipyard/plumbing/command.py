"""The one wrapper through which shipyard calls external tools.

It logs the command, times it, redacts secrets and raises ToolError with the tail of its output on failure.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from shipyard.errors import ToolError
from shipyard.redaction import hide_values, redact

log = logging.getLogger("shipyard.plumbing.command")

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


# The process environment is shared by every thread: a thread that sets a variable for a moment
# and removes it again (wheel/repair.source_date_epoch) holds this lock, and a child's environment
# is copied under it, so a copy never meets a variable removed between reading its name and its
# value (KeyError, seen when wheels of several Pythons were packed side by side).
ENVIRON_LOCK = threading.RLock()


def environ_snapshot() -> dict[str, str]:
    """A copy of the process environment, taken under ENVIRON_LOCK."""
    with ENVIRON_LOCK:
        return dict(os.environ)


@contextmanager
def patched_environ(values: Mapping[str, str | None], *, hold: bool = False) -> Iterator[None]:
    """Set (or, for None, remove) `values` in the process environment for the block, and put back
    what was there after it: the one way shipyard changes os.environ. Each change and the restore
    happen under ENVIRON_LOCK, so a copy (environ_snapshot) never meets half of one. `hold`: keep
    the lock for the whole block, for a setting no other thread may see or change meanwhile (a
    wheel pack's SOURCE_DATE_EPOCH); else other threads run on and their children see `values`."""
    lock = ENVIRON_LOCK
    lock.acquire()
    try:
        saved = {k: os.environ.get(k) for k in values}
        _apply(values)
        if not hold:
            lock.release()
        try:
            yield
        finally:
            if not hold:
                lock.acquire()
            _apply(saved)
    finally:
        lock.release()


def _apply(values: Mapping[str, str | None]) -> None:
    for key, value in values.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value

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
    shown = redact(shlex.join(argv), full_env)
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
        raise _timed_out(exc, argv, shown, full_env, timeout, what) from exc
    return _completed(argv, shown, full_env, proc.returncode, proc.stdout, proc.stderr, start, check, what)


def _timed_out(exc: subprocess.TimeoutExpired, argv: list[str], shown: str, full_env: Mapping[str, str],
               timeout: float | None, what: str | None) -> ToolError:
    """The error for a command that ran out of time, with what it had written to stderr."""
    err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
    return ToolError(f"{what or argv[0]}: timed out after {timeout or 0:.0f}s: {shown}", cmd=argv,
                     output=redact(err, full_env))


def _completed(argv: list[str], shown: str, full_env: Mapping[str, str], returncode: int, stdout: str | None,
               stderr: str | None, start: float, check: bool, what: str | None) -> Completed:
    """What a command that ended left, redacted; ToolError with its output when it failed and `check` is set."""
    seconds = time.monotonic() - start
    log.debug("done in %.1fs (exit %d): %s", seconds, returncode, shown)
    # What the command wrote is data to its caller (JSON, listings): only secret values go; what
    # is shown of it (the error's output) passes the whole scrubber.
    done = Completed(tuple(argv), returncode, hide_values(stdout or "", full_env), hide_values(stderr or "", full_env),
                     seconds)
    if check and returncode != 0:
        raise ToolError(f"{what or Path(argv[0]).name} failed (exit {returncode}): {shown}",
                        cmd=argv, returncode=returncode, output=redact(done.output, full_env))
    return done


# What a Python started ahead runs: it leaves the folder it was started in off sys.path (a
# script's own folder takes that place; PYTHONSAFEPATH keeps both off), imports what it was
# given (an import that fails is left for the script to meet), then waits for one request line
# {"argv", "env"} and runs `argv[1]` as __main__ with `argv[1:]` as sys.argv, as
# `python <script> ...` would.
_PRESTARTED = """import importlib, json, os, runpy, sys
safe_path = getattr(sys.flags, "safe_path", False)
if not safe_path:
    del sys.path[0]
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception:
        pass
request = json.loads(sys.stdin.readline() or "null")
if request is None:
    sys.exit(0)
os.environ.clear()
os.environ.update(request["env"])
sys.argv = request["argv"][1:]
if not safe_path:
    sys.path.insert(0, os.path.dirname(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
"""


class PrestartedPython:
    """`python` started before its command is known, importing `imports` meanwhile, to run one
    `python <script> ...` later without paying the interpreter's start-up and those imports on
    that command's path. It runs the command only when it was started as a plain start would
    have been, in the command's working folder and environment (`env`, this process's
    environment under it); otherwise, or when `close`d first, it ends unused.

    Where the system has an idle scheduling class (Linux), the process waits in it: its start-up
    takes only time no other process wants, and it gets the usual class back before it runs
    the command (or the command runs in a process of its own when that is refused)."""

    def __init__(self, python: str | os.PathLike[str], *, imports: Sequence[str], cwd: str | os.PathLike[str],
                 env: Mapping[str, str]) -> None:
        self.python = os.fspath(python)
        self.cwd = os.fspath(cwd)
        self.env = {**environ_snapshot(), **env}
        self._used = False
        self._proc: subprocess.Popen[str] | None = subprocess.Popen(
            [self.python, "-c", _PRESTARTED, *imports], cwd=self.cwd, env=self.env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._idle = _set_policy(self._proc.pid, "SCHED_IDLE")

    @property
    def used(self) -> bool:
        """Whether it ran its command."""
        return self._used

    def fits(self, argv: Sequence[str], cwd: str | os.PathLike[str] | None, env: Mapping[str, str]) -> bool:
        """Whether `argv` (in `cwd`, with this process's environment and `env` over it) is a
        script this Python can run as it was started."""
        return (self._proc is not None and not self._used and len(argv) >= 2 and argv[0] == self.python
                and cwd is not None and os.fspath(cwd) == self.cwd and {**environ_snapshot(), **env} == self.env)

    def run(self, argv: Sequence[str], *, late_env: Mapping[str, str], timeout: float | None = None,
            what: str | None = None) -> Completed:
        """Run `argv` (which `fits`) in the started process, with `late_env` added to its
        environment: variables its script reads once running, never the interpreter at start."""
        assert self._proc is not None and not self._used, "a prestarted Python runs one command"
        self._used = True
        argv = list(argv)
        full_env = {**self.env, **late_env}
        if self._idle and not _set_policy(self._proc.pid, "SCHED_OTHER"):
            self.close()  # never a command (and the tools it starts) in the idle class
            return run(argv, cwd=self.cwd, env=full_env, timeout=timeout, what=what)
        shown = redact(shlex.join(argv), full_env)
        log.debug("run (prestarted %d): %s (cwd=%s)", self._proc.pid, shown, self.cwd)
        start = time.monotonic()
        request = json.dumps({"argv": argv, "env": full_env}) + "\n"
        try:
            stdout, stderr = self._proc.communicate(request, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            self.close()
            raise _timed_out(exc, argv, shown, full_env, timeout, what) from exc
        code = self._proc.returncode
        self._proc = None
        return _completed(argv, shown, full_env, code, stdout, stderr, start, True, what)

    def close(self) -> None:
        """End the process if it is still waiting (or still running, after a timeout)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            proc.communicate()


def stream(args: Sequence[object], *, on_line: Callable[[str], None], cwd: str | os.PathLike[str] | None = None,
           env: Mapping[str, str] | None = None, what: str | None = None) -> Completed:
    """Run a long command, handing each line of its stdout and stderr (merged) to `on_line` as it
    comes; never raises for a non-zero exit (the caller reads the lines to say what failed).
    The output is not kept: `on_line` decides what to keep."""
    argv = [os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in args]
    full_env = environ_snapshot() if env is None else dict(env)
    shown = redact(shlex.join(argv), full_env)
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
            on_line(redact(line.rstrip("\n"), full_env))
    seconds = time.monotonic() - start
    log.debug("done in %.1fs (exit %d): %s", seconds, proc.returncode, shown)
    return Completed(tuple(argv), proc.returncode, "", "", seconds)


def _set_policy(pid: int, policy: str) -> bool:
    """Put process `pid` in scheduling class `policy` (os.SCHED_IDLE, os.SCHED_OTHER); False
    where the system has no such class or refuses."""
    value = getattr(os, policy, None)
    setter = getattr(os, "sched_setscheduler", None)
    if value is None or setter is None:
        return False
    try:
        setter(pid, value, os.sched_param(0))
    except OSError:
        return False
    return True
