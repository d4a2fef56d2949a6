"""Markers, the --feature selector, and helpers that run ember-run as a real process."""
import os
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
WORKER = HERE / "elastic_worker.py"


def pytest_addoption(parser):
    try:
        parser.addoption("--feature", action="append", default=[], metavar="ID",
                         help="only run tests marked @pytest.mark.feature(ID)")
    except ValueError:
        pass


def pytest_configure(config):
    config.addinivalue_line("markers", "feature(id): the feature id (feature_status.yaml) a test proves")
    config.addinivalue_line("markers", "gpu: needs a CUDA device; skipped without one")


def pytest_collection_modifyitems(config, items):
    wanted = set(config.getoption("--feature", default=[]) or [])
    if not wanted:
        return
    keep, drop = [], []
    for item in items:
        ids = {m.args[0] for m in item.iter_markers("feature") if m.args}
        (keep if ids & wanted else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def free_port() -> int:
    """A port nothing listens on now, for addresses handed to several processes. Under shipyard,
    which tests cells side by side, it comes from the cell's own range (SHIPYARD_PORT_RANGE=lo-hi,
    below the kernel's ephemeral ports), so no other cell can pick it; else the kernel picks one."""
    span = os.environ.get("SHIPYARD_PORT_RANGE")
    if not span:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    low, high = (int(part) for part in span.split("-"))
    for port in random.sample(range(low, high + 1), high - low + 1):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in SHIPYARD_PORT_RANGE={span}")


def launch(*launcher_args: str, mode: str, out_dir: Path, **popen) -> subprocess.Popen:
    """Starts `python -m emberelastic.run <launcher_args> elastic_worker.py <mode> <out_dir>`."""
    cmd = [sys.executable, "-m", "emberelastic.run", "--monitor-interval", "0.1", "--grace-period", "2",
           *launcher_args, str(WORKER), mode, str(out_dir)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"), **popen)


def finish(proc: subprocess.Popen, timeout: float = 60):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"launcher hung\nstdout:\n{out}\nstderr:\n{err}")
    return proc.returncode, out, err


@pytest.fixture
def run():
    """Launcher helpers (a fixture, since tests run with --import-mode=importlib)."""
    return SimpleNamespace(free_port=free_port, launch=launch, finish=finish, worker=WORKER)
