"""`shipyard` in a child process, as a user or a CI step runs it: the one way the tests start it.
A test that needs only an exit status and what was printed calls `shipyard.cli.main` in its own
process; a child is for what only a whole process shows (its environment, its log, a timeout, a
kill, a secret that must not reach any of its output)."""

from __future__ import annotations

import json
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


# The zygote: shipyard's CLI imported once; per line of JSON on stdin (a list of runs), one forked
# child per run, all forked at the same instant; their exit statuses as one line of JSON.
_ZYGOTE = """
import json, os, sys, traceback
from shipyard.cli import main
import shipyard.publish.run  # the publishing modules are imported by the command itself: here, once

for line in sys.stdin:
    pids = []
    for run in json.loads(line):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                out = os.open(run["output"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(out, 1)
                os.dup2(out, 2)
                os.environ.clear()
                os.environ.update(run["env"])
                code = main(run["argv"])
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 2
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        pids.append(pid)
    print(json.dumps([os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]), flush=True)
"""


class ShipyardForks:
    """Whole `shipyard` processes started together, many times over, cheaply: one Python process
    imports the CLI once and forks a child per command (its own pid, environment, output, exit
    status and locks, as `python -m shipyard.cli` has), the children of one call at the same
    instant. For tests that start the same command hundreds of times (two publishers racing, round
    after round), where the interpreter's start and imports (half a second of CPU) would be most
    of the cost."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.count = 0
        self.process = subprocess.Popen([sys.executable, "-c", _ZYGOTE], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)

    def together(self, *runs: tuple[list[str | Path], Mapping[str, str]]) -> list[tuple[int, str]]:
        """Each (arguments, whole environment) as `shipyard ARGUMENTS`, all started at once; each
        one's exit status and output (stdout and stderr as they interleaved)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        outputs = []
        batch = []
        for argv, env in runs:
            self.count += 1
            outputs.append(self.folder / f"run-{self.count}.out")
            batch.append({"argv": [str(a) for a in argv], "env": dict(env), "output": str(outputs[-1])})
        self.process.stdin.write(json.dumps(batch) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, "the forking shipyard process ended"
        return [(code, out.read_text()) for code, out in zip(json.loads(line), outputs, strict=True)]

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)
