"""The rendezvous store: every operation, timeouts, and survival of garbage clients."""
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

import ember.distributed as dist

pytestmark = pytest.mark.feature("distributed.collectives")


@pytest.fixture
def store():
    master = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=5)
    yield master
    master.close()


def test_set_get_add_compare_set(store):
    other = dist.TCPStore("127.0.0.1", store.port, timeout=5)
    store.set("k", b"v\x00w")
    assert other.get("k") == b"v\x00w"
    assert store.add("n", 3) == 3 and other.add("n", -5) == -2
    assert store.get("n") == b"-2"
    assert store.compare_set("c", "", "first") == b"first"
    assert other.compare_set("c", "nope", "second") == b"first"
    assert other.compare_set("c", "first", "second") == b"second"
    assert store.check(["k", "c"]) and not store.check(["k", "absent"])
    assert store.num_keys() == 3
    assert store.delete_key("k") and not store.delete_key("k")


def test_get_blocks_until_another_client_sets(store):
    other = dist.TCPStore("127.0.0.1", store.port, timeout=5)
    threading.Timer(0.3, lambda: other.set("late", "here")).start()
    start = time.monotonic()
    assert store.get("late") == b"here"
    assert 0.2 < time.monotonic() - start < 3


def test_wait_timeout_names_missing_keys(store):
    store.set("present", "1")
    start = time.monotonic()
    with pytest.raises(dist.DistributedTimeoutError) as info:
        store.wait(["present", "absent-key"], timeout=0.4)
    assert "absent-key" in str(info.value) and "present" not in str(info.value).split("[")[-1]
    assert isinstance(info.value, TimeoutError) and isinstance(info.value, dist.DistributedError)
    assert time.monotonic() - start < 3


def test_server_survives_garbage_and_disconnects(store):
    client = dist.TCPStore("127.0.0.1", store.port, timeout=5)
    client.set("before", "1")
    attacks = [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # wrong magic
        b"\xff" * 10_000,  # noise
        struct.pack("<IHHI", 0x53424D45, 1, 1, 0xFFFFFFF0),  # valid magic, absurd length
        struct.pack("<IHHI", 0x53424D45, 99, 1, 4) + b"abcd",  # unknown version
        struct.pack("<IHHI", 0x53424D45, 1, 77, 0),  # unknown op
        struct.pack("<IHHI", 0x53424D45, 1, 1, 8) + b"\xff\xff\xff\x7f" + b"xxxx",  # field overruns payload
    ]
    for payload in attacks:
        with socket.create_connection(("127.0.0.1", store.port)) as s:
            s.sendall(payload)
            s.settimeout(3)
            try:
                assert s.recv(100) == b""  # the server hangs up on us
            except ConnectionResetError:
                pass
    # A client that vanishes halfway through a valid frame.
    with socket.create_connection(("127.0.0.1", store.port)) as s:
        s.sendall(struct.pack("<IHHI", 0x53424D45, 1, 1, 100) + b"\x05\x00")
    assert store.rejected_connections >= len(attacks)
    client.set("after", "2")
    assert client.get("before") == b"1" and store.get("after") == b"2"


def test_clients_in_other_processes(store):
    code = ("import sys, ember.distributed as d; s = d.TCPStore('127.0.0.1', int(sys.argv[1]), timeout=5); "
            "[s.add('hits', 1) for _ in range(20)]; s.set('done-' + sys.argv[2], 'y')")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(store.port), str(i)]) for i in range(3)]
    store.wait([f"done-{i}" for i in range(3)], timeout=30)
    assert [p.wait(30) for p in procs] == [0, 0, 0]
    assert store.get("hits") == b"60"


def test_second_master_on_same_port_fails(store):
    with pytest.raises(dist.DistributedError, match="bind"):
        dist.TCPStore("127.0.0.1", store.port, is_master=True, timeout=1)
