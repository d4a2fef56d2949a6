"""One auditwheel process for every wheel of a build, instead of one per wheel.

`AuditwheelWorkers` (the build's side) keeps a few such processes, each serving one request at a
time; `python -m shipyard.wheel.auditwheel_worker` (the process) reads a request per line on
stdin, `{"argv", "env", "cwd"}`, runs `auditwheel <argv>` in itself under exactly that
environment and working folder, and answers a line `{"code", "output"}`. The repair is
auditwheel's own, unchanged; what each further wheel no longer pays is what does not depend on
it: auditwheel's start-up and imports (about half of a repair of ember's wheel), the search of
the library folders for the libraries every Python's wheel links (libc, libstdc++), and the
undefined symbols of the bundled native core, the same bytes in every Python's wheel (remembered
by the file's sha256). A worker lives as long as one build, so nothing it remembers outlasts the
libraries it read.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from shipyard.errors import ToolError
from shipyard.plumbing import command

_SHIPYARD_PARENT = str(Path(__file__).resolve().parents[2])  # the folder that holds the shipyard package


class AuditwheelWorkers:
    """The auditwheel processes of one build (a context manager: they end with it), at most
    `limit` of them (one per core: a repair is a short burst of one core's work, and each
    further process would pay auditwheel's start-up again), `ahead` of them started on entering.
    `run` takes an idle one, starts another while under the limit, or waits for one to be free."""

    def __init__(self, limit: int = 1, ahead: int = 1) -> None:
        self._limit = max(1, limit)
        self._ahead = max(0, min(ahead, self._limit))
        self._idle: list[subprocess.Popen[str]] = []
        self._all: list[subprocess.Popen[str]] = []
        self._count = 0  # started or starting, not yet ended
        self._lock = threading.Condition()

    def __enter__(self) -> AuditwheelWorkers:
        # `ahead` workers (the most that will repair at once) import auditwheel while the build
        # compiles, off the repairs' path: a core's last files leave a core idle for that.
        for _ in range(self._ahead):
            self._count += 1
            self._idle.append(self._start())
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """End every worker: each is idle once the build's repairs returned, and an idle worker
        holds nothing to finish (a killed one loses no work)."""
        with self._lock:
            workers, self._all, self._idle, self._count = self._all, [], [], 0
        for proc in workers:
            _end(proc, kill=True)

    def _start(self) -> subprocess.Popen[str]:
        env = command.environ_snapshot()
        # The worker imports this module: find it where this process found it.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_SHIPYARD_PARENT, env.get("PYTHONPATH", "")) if p)
        proc = subprocess.Popen([sys.executable, "-m", "shipyard.wheel.auditwheel_worker"], env=env, text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        with self._lock:
            self._all.append(proc)
        return proc

    def _forget(self, proc: subprocess.Popen[str] | None) -> None:
        """A worker that ended (or never started) frees its place."""
        with self._lock:
            self._count -= 1
            if proc in self._all:
                self._all.remove(proc)
            self._lock.notify()

    def run(self, argv: Sequence[object], *, extra_env: Mapping[str, str], timeout: float, what: str) -> str:
        """`auditwheel <argv>` with this process's environment and `extra_env` over it (as
        command.run gives a tool); its output, or ToolError with it when auditwheel fails."""
        args = [os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in argv]
        request = json.dumps({"argv": args, "env": {**command.environ_snapshot(), **extra_env}, "cwd": os.getcwd()})
        with self._lock:
            self._lock.wait_for(lambda: bool(self._idle) or self._count < self._limit)
            proc = self._idle.pop() if self._idle else None
            if proc is None:
                self._count += 1
        if proc is None:
            try:
                proc = self._start()
            except OSError:
                self._forget(None)
                raise
        shown = "auditwheel " + " ".join(args)
        command.log.debug("run (auditwheel worker %d): %s", proc.pid, shown)
        start = time.monotonic()
        ready: list[Any] = []
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(request + "\n")
            proc.stdin.flush()
            ready, _, _ = select.select([proc.stdout], [], [], timeout)
            line = proc.stdout.readline() if ready else ""
        except OSError:
            line = ""
        if not line:
            _end(proc, kill=True)  # ended already, or stuck
            self._forget(proc)
            why = "its process ended" if ready else f"timed out after {timeout:.0f}s"
            raise ToolError(f"{what}: {why}: {shown}", cmd=args)
        with self._lock:
            self._idle.append(proc)
            self._lock.notify()
        reply = json.loads(line)
        command.log.debug("done in %.1fs (exit %d): %s", time.monotonic() - start, reply["code"], shown)
        if reply["code"] != 0:
            raise ToolError(f"{what} failed (exit {reply['code']}): {shown}", cmd=args, returncode=reply["code"],
                            output=reply["output"])
        return str(reply["output"])


def _end(proc: subprocess.Popen[str], *, kill: bool = False) -> None:
    if kill:
        proc.kill()
    with contextlib.suppress(OSError):
        if proc.stdin is not None:
            proc.stdin.close()  # the worker ends at the end of its input
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


# --- the worker process ----------------------------------------------------------------------

def _remember_across_wheels() -> None:
    """Memos for two of auditwheel's lookups whose answers do not depend on the wheel: where a
    library of a given name and platform is found in the given folders (the library folders do
    not change during a build), and a file's undefined symbols (by the file's sha256)."""
    import hashlib

    from auditwheel import elfutils, lddtree

    find_lib = lddtree.find_lib
    found: dict[tuple[Any, ...], Any] = {}

    def find_lib_once(*args: Any) -> Any:  # noqa: ANN401  # (platform, soname, folders, root)
        key = tuple(tuple(a) if isinstance(a, list) else a for a in args)
        try:
            return found[key]
        except KeyError:
            found[key] = result = find_lib(*args)
            return result
        except TypeError:  # an argument that cannot be a key: no memo
            return find_lib(*args)

    undefined_symbols = getattr(elfutils, "get_undefined_symbols", None)
    undefined: dict[str, frozenset[str]] = {}

    def undefined_symbols_once(path: Path) -> set[str]:
        assert undefined_symbols is not None
        key = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        if key not in undefined:
            undefined[key] = frozenset(undefined_symbols(path))
        return set(undefined[key])

    lddtree.find_lib = find_lib_once
    if undefined_symbols is not None:  # (auditwheel's own names: an older one may lack it)
        elfutils.get_undefined_symbols = undefined_symbols_once


def _serve(requests: IO[str], replies: IO[str]) -> None:
    try:
        from auditwheel import lddtree
        from auditwheel.main import main

        _remember_across_wheels()
    except ImportError:
        # Every request fails with the reason, as `python -m auditwheel` would have.
        reason = traceback.format_exc()
        for _ in requests:
            replies.write(json.dumps({"code": 1, "output": reason}) + "\n")
            replies.flush()
        return
    for line in requests:
        request = json.loads(line)
        os.environ.clear()
        os.environ.update(request["env"])
        with contextlib.suppress(AttributeError):
            lddtree.load_ld_paths.cache_clear()  # it read LD_LIBRARY_PATH, which each request sets
        sys.argv = ["auditwheel", *request["argv"]]
        # Everything auditwheel and the tools it runs (patchelf) print goes to one file per request.
        with tempfile.TemporaryFile("w+") as out:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(out.fileno(), 1)
            os.dup2(out.fileno(), 2)
            try:
                os.chdir(request["cwd"])
                code = main() or 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if isinstance(exc.code, str):
                    print(exc.code, file=sys.stderr)
            except Exception:  # noqa: BLE001  # reported as a failed repair, with its traceback
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            out.seek(0)
            output = out.read()
        replies.write(json.dumps({"code": code, "output": output}) + "\n")
        replies.flush()


if __name__ == "__main__":
    # Replies go on a copy of stdout; stdout and stderr themselves are each request's output file.
    _replies = os.fdopen(os.dup(1), "w")
    _serve(sys.stdin, _replies)
