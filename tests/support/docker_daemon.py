"""The Docker engine of a test run: the one running already, else one dockerd that the first test
needing an engine starts, shared by every xdist worker, and stopped by the process that runs the
session (xdist's controller) once every worker is done. An engine this run did not start is
never stopped.

The run's folder (a temp folder the controller makes and hands to each worker) holds the lock
that lets one worker start dockerd, dockerd's log, and the record of the process started.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from shipyard.host import docker_base
from shipyard.plumbing.file_lock import exclusive

RECORD = "dockerd.json"  # {"pid": …, "started": …}: the dockerd this run started
# Where the dockerd this run starts keeps its images, containers and volumes, when set (`nox -s
# tests` puts it on the run's tmpfs); unset, dockerd's own default (/var/lib/docker).
DATA_ROOT_VAR = "SHIPYARD_TEST_DOCKER_ROOT"
_STARTED: list[subprocess.Popen[bytes]] = []  # held, so that Popen does not warn that it still runs


def _start_time(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot), None when it is gone or a zombie:
    with the pid it tells our dockerd from a later process that got the same pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after the command name, which may hold spaces
    return None if fields[0] == "Z" else int(fields[19])


def ensure_engine(folder: Path) -> None:
    """Return once an engine answers: the running one, else a dockerd started here, once per run
    (under the run's lock, so that two workers never start two)."""
    if docker_base.ensure_docker_engine():
        return
    if shutil.which("dockerd") is None or shutil.which("docker") is None:
        pytest.fail(f"no Docker engine and no docker.io to start one: run ci/bootstrap.sh ({docker_base.ENGINE_FIX})")
    with exclusive(folder / "dockerd.lock"):
        if docker_base.ensure_docker_engine():
            return  # another worker started it
        log = folder / "dockerd.log"
        data_root = os.environ.get(DATA_ROOT_VAR)
        command = ["dockerd", *(["--data-root", data_root] if data_root else [])]
        with log.open("a") as sink:
            # A daemon outlives the worker that starts it, so it cannot go through command.run.
            daemon = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True)
        _STARTED.append(daemon)
        (folder / RECORD).write_text(json.dumps({"pid": daemon.pid, "started": _start_time(daemon.pid)}))
        deadline = time.monotonic() + 90
        while not docker_base.ensure_docker_engine():
            if daemon.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"dockerd did not come up:\n{log.read_text()[-3000:]}")
            time.sleep(1)


def stop_started_engine(folder: Path) -> None:
    """Stop the dockerd this run started, if it did; called once every test is done."""
    record = folder / RECORD
    if not record.is_file():
        return
    started = json.loads(record.read_text())
    pid = started["pid"]
    if _start_time(pid) != started["started"]:
        return  # it is gone already (and the pid may be another process's now)
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return  # our child (a run without xdist), reaped
        except ChildProcessError:
            pass  # a worker's child, adopted by init when the worker ended
        if _start_time(pid) is None:
            return
        time.sleep(0.5)
    os.kill(pid, signal.SIGKILL)
