"""Failures never hang: dead, absent and late peers are named on every surviving rank."""
import shutil
import signal
import subprocess
import socket
import sys
import threading
import time
from pathlib import Path

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
    ranks = [procs.start_rank("init_only", r, 3, port, stdin=subprocess.PIPE) for r in range(2)]  # rank 2 never comes
    for p in ranks:  # both started (however long that took): both go at once
        assert p.stdout.readline().strip() == "READY"
    for p in ranks:
        p.stdin.write("go\n")
        p.stdin.flush()
    results = [procs.result_of(p, timeout=30) for p in ranks]
    for res in results:
        assert res["is_timeout"], res
        assert res["op"] == "init_process_group"
        assert res["missing"] == [2], res
        assert res["elapsed"] < 8


def _trickle(sock: socket.socket, data: bytes, stop: threading.Event) -> None:
    """Sends `data` one byte per 0.1 s: always moving, never finishing in time."""
    for i in range(len(data)):
        if stop.wait(0.1):
            return
        try:
            sock.sendall(data[i:i + 1])
        except OSError:  # the other side gave up and hung up: what the test wants
            return


SLOW_LINK = Path(__file__).resolve().parent / "slow_link.c"


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("gcc") is None,
                    reason="needs Linux (LD_PRELOAD) and gcc on PATH to build slow_link.c")
def test_a_link_that_never_stops_moving_cannot_keep_a_collective_alive(procs, tmp_path):
    """Rank 1 sends its allreduce data (1 KiB) at once; rank 0 receives it through
    slow_link.c, one byte per 10 ms and never idle for a whole poll, as a receiver slower than
    its sender sees the network. Rank 0's 1 s timeout must still fire at ~1 s with rank 1
    named, although bytes keep moving. (While the deadline was only checked when nothing had
    moved, rank 0 ran on to the last byte, 10 s and more, and returned as if on time. A peer
    that pauses between bytes cannot show that: the first idle poll past the deadline fired.)"""
    shim = tmp_path / "slow_link.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(shim), str(SLOW_LINK), "-ldl"], check=True)
    port = procs.free_port()
    slow = procs.start_rank("slow_link", 0, 2, port, env={"LD_PRELOAD": str(shim), "SLOW_LINK_DELAY_MS": "10"})
    peer = procs.start_rank("slow_link", 1, 2, port)
    try:
        res = procs.result_of(slow, timeout=60)
    finally:
        for p in (slow, peer):
            if p.poll() is None:
                p.kill()
            p.communicate()
    assert res.get("is_timeout") and res["is_distributed"], res
    assert res["op"] == "allreduce" and res["missing"] == [1], res
    assert "timed out after 1000 ms" in res["message"], res
    assert 0.9 < res["elapsed"] < 2.0, res


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
