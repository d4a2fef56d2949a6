"""Failures never hang: dead, absent and late peers are named on every surviving rank."""
import signal
import subprocess
import socket
import struct
import threading
import time

import numpy as np
import pytest

import ember.distributed as dist


pytestmark = pytest.mark.feature("distributed.timeouts")


def test_worker_killed_mid_allreduce_is_detected_at_once(procs):
    world, victim = 3, 1
    port = procs.free_port()
    ranks = [procs.start_rank("victim", r, world, port, str(victim)) for r in range(world)]
    try:
        for p in ranks:  # all ranks are inside the allreduce loop
            assert p.stdout.readline().strip() == "READY"
        time.sleep(0.5)
        ranks[victim].send_signal(signal.SIGKILL)
        survivors = [procs.result_of(p, timeout=20) for r, p in enumerate(ranks) if r != victim]
    finally:
        for p in ranks:
            if p.poll() is None:
                p.kill()
    for res in survivors:
        assert res["is_distributed"], res
        assert res["op"] == "allreduce"
        # The group timeout is 30 s: detection must come from the closed connection.
        assert res["seconds_after_last_success"] < 10, res
        assert f"rank {victim}" in res["message"], res
        assert "aborted" in res["after_abort"]
    assert any(res["missing"] == [victim] for res in survivors), survivors


def test_peer_that_never_enters_the_collective_times_out_by_name(procs):
    port = procs.free_port()
    absent = procs.start_rank("absent", 2, 3, port, stdin=subprocess.PIPE)
    ranks = [procs.start_rank("absent", r, 3, port) for r in range(2)]
    try:
        results = [procs.result_of(p, timeout=30) for p in ranks]
    finally:
        procs.result_of(absent, timeout=30)  # closes its stdin: the verdicts are in, it may leave
        for p in (*ranks, absent):
            if p.poll() is None:
                p.kill()
    for res in results:
        assert res["is_timeout"] and res["is_distributed"], res
        assert res["op"] == "allreduce"
        assert res["missing"] == [2], res
        assert "[2]" in res["message"]
        assert 1.5 < res["elapsed"] < 8, res


def test_peer_that_never_starts_times_out_at_init(procs):
    port = procs.free_port()
    ranks = [procs.start_rank("init_only", r, 3, port) for r in range(2)]  # rank 2 never comes
    results = [procs.result_of(p, timeout=30) for p in ranks]
    for res in results:
        assert res["is_timeout"], res
        assert res["op"] == "init_process_group"
        assert res["missing"] == [2], res
        assert res["elapsed"] < 8


def _fnv1a(text: str) -> int:
    h = 2166136261
    for c in text.encode():
        h = ((h ^ c) * 16777619) & 0xFFFFFFFF
    return h


def _trickle(sock: socket.socket, data: bytes, stop: threading.Event) -> None:
    """Sends `data` one byte per 0.1 s: always moving, never finishing in time."""
    for i in range(len(data)):
        if stop.wait(0.1):
            return
        try:
            sock.sendall(data[i:i + 1])
        except OSError:  # the other side gave up and hung up: what the test wants
            return


def test_trickling_peer_cannot_keep_a_collective_alive(wire):
    """Rank 1 is a raw socket that speaks the frame protocol correctly but sends its allreduce
    data one byte per 0.1 s (6.4 s in all): rank 0's 1 s timeout must still fire at ~1 s."""
    from ember import _distributed as C

    server = C.StoreServer("127.0.0.1", 0)
    stop, result, sockets = threading.Event(), {}, []

    def rank0():
        pg = C.ProcessGroup(C.StoreClient("127.0.0.1", server.port, 10.0), 0, 2, 10.0, "pg")
        pg.timeout = 1.0
        start = time.monotonic()
        try:
            pg.allreduce(np.ones(10, dtype=np.float32), C.ReduceOp.SUM)
        except C.DistributedError as exc:
            result["error"] = exc
        result["elapsed"] = time.monotonic() - start

    worker = threading.Thread(target=rank0)
    worker.start()
    try:
        fake = C.StoreClient("127.0.0.1", server.port, 10.0)
        host, port = fake.get("pg/addr/0").decode().rsplit(":", 1)
        tag = _fnv1a("pg") ^ 2
        for kind in (0, 1):  # data, then control connection: u32 magic, tag, rank, kind (+ proof)
            sockets.append(socket.create_connection((host, int(port))))
            wire.group_hello(sockets[-1], tag, 1, kind)
        data, ctrl = sockets
        # Arrival notice for collective #1 with the same call: allreduce(10 x float32, SUM).
        ctrl.sendall(struct.pack("<IIQ", 0x43424D45, 1, 1) + struct.pack("<IIIIQ", 1, 0, 0, 0, 10))
        message = struct.pack("<IHBBQQ", 0x44424D45, 1, 0, 0, 1, 40) + np.ones(10, dtype=np.float32).tobytes()
        _trickle(data, message, stop)
    finally:
        stop.set()
        worker.join(30)
        for s in sockets:
            s.close()
        server.stop()
    error = result.get("error")
    assert isinstance(error, C.DistributedTimeoutError), result
    assert error.op == "allreduce" and error.missing_ranks == [1], str(error)
    assert "timed out after 1000 ms" in str(error)
    assert 0.9 < result["elapsed"] < 1.5, result


def test_trickling_store_server_cannot_keep_a_call_alive(wire):
    """A store server that answers one byte per 0.1 s: a client with a 1 s timeout gives up at
    ~1 s (it used to allow a fixed 5 s grace on top of any wait)."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve():
        conn, _ = listener.accept()
        with conn:
            wire.server_handshake(conn)
            conn.recv(4096)  # the request
            # A well-formed reply header announcing 100 bytes, trickled.
            _trickle(conn, wire.frame(0, b"x" * 100), stop)

    server = threading.Thread(target=serve)
    server.start()
    try:
        client = dist.TCPStore("127.0.0.1", listener.getsockname()[1], timeout=1.0)
        start = time.monotonic()
        with pytest.raises(dist.DistributedTimeoutError) as info:
            client.set("k", "v")
        elapsed = time.monotonic() - start
    finally:
        stop.set()
        server.join(30)
        listener.close()
    assert info.value.op == "store.set", str(info.value)
    assert 0.9 < elapsed < 1.5, elapsed
