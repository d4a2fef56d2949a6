"""Markers and the --feature selector for ember.distributed's tests, plus process helpers.

The `feature`/`gpu` markers and `--feature` may already be registered by a conftest
higher up (ember's tests folder); registering them again here is harmless.
"""
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

import pytest
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
WORKER = HERE / "dist_worker.py"


def pytest_addoption(parser):
    try:
        parser.addoption("--feature", action="append", default=[], metavar="ID",
                         help="only run tests marked @pytest.mark.feature(ID)")
    except ValueError:
        pass  # already added by ember's top-level tests conftest


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


def start_rank(scenario: str, rank: int, world: int, port: int, *extra: str, stdin=None,
               env: Optional[dict] = None) -> subprocess.Popen:
    """Starts one rank of a dist_worker.py scenario as a real process (`stdin=subprocess.PIPE`
    for a rank that waits for the test to close it; `env` adds variables to this one's)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
    return subprocess.Popen([sys.executable, str(WORKER), scenario, str(rank), str(world), str(port), *extra],
                            stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=str(HERE))


def result_of(proc: subprocess.Popen, timeout: float = 60) -> dict:
    """Waits for a worker and returns the JSON it printed on its RESULT line."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"worker hung past {timeout} s\nstdout:\n{out}\nstderr:\n{err}")
    for line in out.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise AssertionError(f"worker exited {proc.returncode} without a result\nstdout:\n{out}\nstderr:\n{err}")


def run_group(scenario: str, world: int, *extra: str, timeout: float = 60) -> list:
    port = free_port()
    procs = [start_rank(scenario, r, world, port, *extra) for r in range(world)]
    try:
        return [result_of(p, timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


@pytest.fixture(scope="session")
def procs():
    """Process helpers (a fixture, since tests run with --import-mode=importlib)."""
    return SimpleNamespace(free_port=free_port, start_rank=start_rank, result_of=result_of, run_group=run_group)


# --- the wire protocols' handshakes, for tests that play a peer by hand ----------------------
# Both follow library/ember/core/distributed/src/store_wire.h and group_wire.h (version 2).

STORE_MAGIC, STORE_VERSION = 0x53424D45, 2
STATUS_OK, STATUS_ERROR, STATUS_CHALLENGE, OP_AUTH = 0, 2, 3, 10


def _hmac(token: bytes, message: bytes) -> bytes:
    import hashlib
    import hmac
    return hmac.new(token, message, hashlib.sha256).digest()


def store_frame(code: int, payload: bytes = b"") -> bytes:
    import struct
    return struct.pack("<IHHI", STORE_MAGIC, STORE_VERSION, code, len(payload)) + payload


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"peer closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def recv_frame(sock: socket.socket):
    """One store frame: (code, payload)."""
    import struct
    magic, version, code, length = struct.unpack("<IHHI", recv_exactly(sock, 12))
    assert (magic, version) == (STORE_MAGIC, STORE_VERSION), (hex(magic), version)
    assert length <= 4096, length
    return code, recv_exactly(sock, length)


def store_client_handshake(sock: socket.socket, token: bytes = b""):
    """Plays a store client's side of the handshake; returns the server's (status, payload)."""
    code, server_nonce = recv_frame(sock)
    assert code == STATUS_CHALLENGE and len(server_nonce) == 32
    client_nonce = os.urandom(32)
    sock.sendall(store_frame(OP_AUTH, client_nonce + _hmac(token, b"ember-store-v2 client" + server_nonce + client_nonce)))
    return recv_frame(sock)


def store_server_handshake(sock: socket.socket, token: bytes = b"") -> None:
    """Plays a store server's side of the handshake with an honest client."""
    server_nonce = os.urandom(32)
    sock.sendall(store_frame(STATUS_CHALLENGE, server_nonce))
    code, payload = recv_frame(sock)
    assert code == OP_AUTH and len(payload) == 64
    client_nonce = payload[:32]
    sock.sendall(store_frame(STATUS_OK, _hmac(token, b"ember-store-v2 server" + server_nonce + client_nonce)))


def group_hello(sock: socket.socket, tag: int, rank: int, kind: int, token: bytes = b"") -> None:
    """A process-group connection's opening: read the acceptor's nonce, send hello + proof."""
    import struct
    nonce = recv_exactly(sock, 32)
    hello = struct.pack("<IIII", 0x50424D45, tag, rank, kind)
    sock.sendall(hello + _hmac(token, b"ember-pg-v2 hello" + nonce + hello))


@pytest.fixture(scope="session")
def wire():
    """Handshake helpers for tests that play a store or group peer over a raw socket."""
    return SimpleNamespace(frame=store_frame, recv_frame=recv_frame, recv_exactly=recv_exactly,
                           client_handshake=store_client_handshake, server_handshake=store_server_handshake,
                           group_hello=group_hello, OK=STATUS_OK, ERROR=STATUS_ERROR,
                           CHALLENGE=STATUS_CHALLENGE, OP_AUTH=OP_AUTH)


# --- wine, for the Windows prototype's tests -------------------------------------------------

WINE = shutil.which("wine64") or ("/usr/lib/wine/wine64" if os.path.exists("/usr/lib/wine/wine64") else None)
_wine_prefix = {}  # "dir", "env", "boot": the prefix being initialised since collection ended


def _boot_wine_prefix() -> None:
    prefix = Path(tempfile.mkdtemp(prefix="wineprefix-"))
    env = dict(os.environ, WINEPREFIX=str(prefix), WINEDEBUG="-all", WINEDLLOVERRIDES="mscoree,mshtml=")
    boot = subprocess.Popen([WINE, "cmd", "/c", "exit"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _wine_prefix.update(dir=prefix, env=env, boot=boot)


def pytest_collection_finish(session):
    """A fresh wine prefix takes ~10 s of wineboot. When Windows tests were collected, start it
    now, in the background, so that it overlaps the tests that run before them."""
    if WINE is not None and any(item.path.name == "test_windows.py" for item in session.items):
        _boot_wine_prefix()


@pytest.fixture(scope="session")
def wine():
    """The wine binary and an environment with an initialised prefix of this session's own;
    its wineserver is stopped at the end, so no wine process outlives the tests."""
    if WINE is None:
        pytest.skip("wine64 is not installed")
    if not _wine_prefix:
        _boot_wine_prefix()
    _wine_prefix["boot"].wait(timeout=180)
    yield SimpleNamespace(path=WINE, env=_wine_prefix["env"])
    wineserver = Path(WINE).with_name("wineserver")
    if wineserver.exists():
        subprocess.run([str(wineserver), "-k"], env=_wine_prefix["env"], capture_output=True)
    shutil.rmtree(_wine_prefix["dir"], ignore_errors=True)
