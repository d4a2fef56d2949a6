"""Who may talk to a store and to a rank: only peers that prove the job's token, and a
store listens beyond loopback only when told where (and then only with a token)."""
import socket
import struct
import threading
import time

import numpy as np
import pytest

import ember.distributed as dist
from ember import _distributed as C

pytestmark = pytest.mark.feature("distributed.collectives")

TOKEN = b"job-secret-0123456789"


@pytest.fixture
def guarded_store(monkeypatch):
    monkeypatch.delenv("EMBER_RDZV_TOKEN", raising=False)
    master = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=5, token=TOKEN)
    master.set("secret-key", "only for the job")
    yield master
    master.close()


def host_address() -> str:
    """An address of this machine other than loopback (the one it would route out through)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET: nothing is sent, the kernel only picks a route
            address = s.getsockname()[0]
        except OSError:
            address = ""
    if not address or address.startswith("127.") or address == "0.0.0.0":
        pytest.skip("this machine has no non-loopback IPv4 address to listen on")
    return address


def test_a_peer_with_the_wrong_token_is_refused_promptly(guarded_store):
    start = time.monotonic()
    with pytest.raises(dist.DistributedError) as info:
        dist.TCPStore("127.0.0.1", guarded_store.port, timeout=30, token=b"not-the-job-secret")
    assert time.monotonic() - start < 5  # refused at once, not after the 30 s timeout
    message = str(info.value)
    assert "refused this process" in message and "authentication failed" in message, message
    assert "EMBER_RDZV_TOKEN" in message and "--rdzv-token-file" in message, message
    assert TOKEN.decode() not in message and "not-the-job-secret" not in message
    assert guarded_store.rejected_connections == 1
    assert guarded_store.get("secret-key") == b"only for the job"  # the store serves on


def test_a_peer_without_a_token_is_refused(guarded_store):
    with pytest.raises(dist.DistributedError, match="refused this process"):
        dist.TCPStore("127.0.0.1", guarded_store.port, timeout=5)  # no token=, no EMBER_RDZV_TOKEN


def test_the_token_comes_from_the_environment(guarded_store, monkeypatch):
    monkeypatch.setenv("EMBER_RDZV_TOKEN", TOKEN.decode())
    assert dist.TCPStore("127.0.0.1", guarded_store.port, timeout=5).get("secret-key") == b"only for the job"


def test_nothing_is_read_or_served_before_the_handshake(guarded_store, wire):
    # A well-formed get, sent without the handshake: a hang-up after the challenge, no value.
    request = wire.frame(2, struct.pack("<I", 10) + b"secret-key" + struct.pack("<q", 0))
    with socket.create_connection(("127.0.0.1", guarded_store.port), timeout=5) as s:
        s.sendall(request)
        got = b""
        try:
            while chunk := s.recv(4096):
                got += chunk
        except ConnectionResetError:
            pass
    assert len(got) == 12 + 32 and b"only for the job" not in got
    # A header announcing 64 MiB before the handshake is dropped after its 12 bytes: the
    # server reads no further than one handshake frame.
    with socket.create_connection(("127.0.0.1", guarded_store.port), timeout=5) as s:
        wire.recv_frame(s)
        s.sendall(struct.pack("<IHHI", 0x53424D45, 2, wire.OP_AUTH, 64 << 20))
        s.settimeout(5)
        try:
            assert s.recv(100) == b""
        except ConnectionResetError:
            pass
    # A wrong proof gets one error frame, then the connection closes.
    with socket.create_connection(("127.0.0.1", guarded_store.port), timeout=5) as s:
        status, payload = wire.client_handshake(s, b"guess")
        assert status == wire.ERROR and b"authentication failed" in payload
        assert s.recv(100) == b""
    # The right proof gets the server's own proof back, then service.
    with socket.create_connection(("127.0.0.1", guarded_store.port), timeout=5) as s:
        status, proof = wire.client_handshake(s, TOKEN)
        assert status == wire.OK and len(proof) == 32
        s.sendall(request)
        status, payload = wire.recv_frame(s)
        assert status == wire.OK and payload == struct.pack("<I", 16) + b"only for the job"
    assert guarded_store.rejected_connections == 3


def test_a_client_checks_the_server_holds_the_token_too(wire):
    """A listener that fakes the challenge but cannot prove the token is not a store to talk to."""
    listener = socket.create_server(("127.0.0.1", 0))

    def impostor():
        conn, _ = listener.accept()
        with conn:
            conn.sendall(wire.frame(wire.CHALLENGE, b"n" * 32))
            wire.recv_frame(conn)
            conn.sendall(wire.frame(wire.OK, b"p" * 32))
            conn.recv(100)

    thread = threading.Thread(target=impostor, daemon=True)
    thread.start()
    try:
        with pytest.raises(dist.DistributedError, match="did not prove it holds the job's token"):
            dist.TCPStore("127.0.0.1", listener.getsockname()[1], timeout=5, token=TOKEN)
    finally:
        thread.join(10)
        listener.close()


def test_listening_beyond_loopback_needs_an_explicit_bind_and_a_token(monkeypatch):
    monkeypatch.delenv("EMBER_RDZV_TOKEN", raising=False)
    monkeypatch.delenv("EMBER_RDZV_BIND", raising=False)
    with pytest.raises(ValueError) as info:
        dist.TCPStore("192.0.2.1", 0, is_master=True, timeout=1, token=TOKEN)
    assert "bind=ADDRESS" in str(info.value) and "--rdzv-bind" in str(info.value)
    with pytest.raises(ValueError, match="bind=ADDRESS"):
        dist.TCPStore("0.0.0.0", 0, is_master=True, timeout=1, token=TOKEN)
    # Stated, but without a token: refused by the store itself.
    with pytest.raises(ValueError, match="beyond loopback.*needs a token"):
        dist.TCPStore("192.0.2.1", 0, is_master=True, timeout=1, bind="0.0.0.0")
    with pytest.raises(ValueError, match="needs a token"):
        C.StoreServer("0.0.0.0", 0)


def test_a_loopback_store_is_not_reachable_from_the_network(monkeypatch):
    monkeypatch.delenv("EMBER_RDZV_BIND", raising=False)
    address = host_address()
    store = dist.TCPStore("localhost", 0, is_master=True, timeout=5)
    try:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((address, store.port), timeout=5).close()
    finally:
        store.close()


def test_two_ranks_with_the_same_token_form_a_group_beyond_loopback(monkeypatch):
    monkeypatch.delenv("EMBER_RDZV_TOKEN", raising=False)
    address = host_address()
    master = dist.TCPStore(address, 0, is_master=True, timeout=10, bind=address, token=TOKEN)
    results, errors = {}, []

    def rank(r):
        try:
            group = C.ProcessGroup(C.StoreClient(address, master.port, 10.0, TOKEN), r, 2, 10.0, "pg")
            data = np.full(4, r + 1, dtype=np.float32)
            group.allreduce(data, C.ReduceOp.SUM)
            results[r] = data.tolist()
            group.shutdown()
        except Exception as exc:  # reported below with the rank
            errors.append((r, exc))

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    master.close()
    assert not errors and results == {0: [3.0] * 4, 1: [3.0] * 4}, errors


def test_a_rank_connection_without_the_token_is_ignored(wire):
    """A stranger who reaches a rank's listener (its address is in the store) but cannot prove
    the token is dropped after one bounded read; the real peer still joins."""
    server = C.StoreServer("127.0.0.1", 0, TOKEN)
    result = {}

    def rank0():
        group = C.ProcessGroup(C.StoreClient("127.0.0.1", server.port, 10.0, TOKEN), 0, 2, 10.0, "pg")
        data = np.ones(3, dtype=np.float32)
        group.allreduce(data, C.ReduceOp.SUM)
        result["data"] = data.tolist()
        group.shutdown()

    worker = threading.Thread(target=rank0)
    worker.start()
    try:
        peek = C.StoreClient("127.0.0.1", server.port, 10.0, TOKEN)
        host, port = peek.get("pg/addr/0").decode().rsplit(":", 1)
        assert host == "127.0.0.1"  # the rank listens where it said, not on every interface
        tag = _fnv1a("pg") ^ 2
        for forged in (b"", b"guess"):
            with socket.create_connection((host, int(port)), timeout=5) as s:
                wire.group_hello(s, tag, 1, 0, forged)
                s.settimeout(5)
                try:
                    assert s.recv(100) == b""  # dropped
                except ConnectionResetError:
                    pass
        group = C.ProcessGroup(C.StoreClient("127.0.0.1", server.port, 10.0, TOKEN), 1, 2, 10.0, "pg")
        data = np.ones(3, dtype=np.float32)
        group.allreduce(data, C.ReduceOp.SUM)
        group.shutdown()
    finally:
        worker.join(30)
        server.stop()
    assert result["data"] == [2.0] * 3 and data.tolist() == [2.0] * 3


def _fnv1a(text: str) -> int:
    h = 2166136261
    for byte in text.encode():
        h = ((h ^ byte) * 16777619) & 0xFFFFFFFF
    return h

