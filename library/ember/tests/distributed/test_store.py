"""The rendezvous store: every operation, timeouts, and survival of garbage clients."""
import os
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
    challenge = struct.pack("<IHHI", 0x53424D45, 2, 3, 32)  # every connection is first challenged
    for payload in attacks:
        with socket.create_connection(("127.0.0.1", store.port)) as s:
            s.sendall(payload)
            s.settimeout(3)
            got = b""
            try:
                while chunk := s.recv(100):  # the server hangs up on us after its challenge
                    got += chunk
            except ConnectionResetError:
                pass
            assert got[:12] == challenge and len(got) == 12 + 32
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


BAD_TIMEOUTS = [float("nan"), float("inf"), float("-inf"), -1, -1e-9, 1e300, 366 * 86400]


@pytest.mark.parametrize("bad", BAD_TIMEOUTS, ids=repr)
def test_bad_timeouts_are_refused_everywhere_by_value(store, bad):
    """NaN, infinite, negative and over-long timeouts: a ValueError that shows the value (NaN
    used to be reported as "must be >= 0"), from every call that takes a timeout."""
    from ember import _distributed as C

    calls = {
        "TCPStore": lambda: dist.TCPStore("127.0.0.1", store.port, timeout=bad),
        "get": lambda: store.get("k", timeout=bad),
        "wait": lambda: store.wait(["k"], timeout=bad),
        "timeout setter": lambda: setattr(store.client, "timeout", bad),
        "ProcessGroup": lambda: C.ProcessGroup(store.client, 0, 1, bad),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError) as info:
            call()
        assert "timeout must be a finite number of seconds between 0 and 31536000" in str(info.value), name
        assert f"got {float(bad)!r}" in str(info.value), name
    assert store.timeout == 5  # the setter left the old value


def test_zero_timeout_is_valid_and_times_out_at_once(store):
    start = time.monotonic()
    with pytest.raises(dist.DistributedTimeoutError, match="absent"):
        store.get("absent", timeout=0)
    assert time.monotonic() - start < 2


@pytest.mark.parametrize("port, error", [(-1, ValueError), (65536, ValueError), (2**40, OverflowError)])
def test_out_of_range_ports_are_refused(port, error):
    with pytest.raises(error):
        dist.TCPStore("127.0.0.1", port, timeout=1)
    with pytest.raises(error):
        dist.TCPStore("127.0.0.1", port, is_master=True, timeout=1)


def test_add_refuses_to_overflow_int64(store):
    top, bottom = 2**63 - 1, -(2**63)
    assert store.add("n", top) == top
    with pytest.raises(dist.DistributedError, match=r"adding 1 to 'n' \(9223372036854775807\) overflows"):
        store.add("n", 1)  # used to wrap to -9223372036854775808
    assert store.get("n") == b"9223372036854775807"  # unchanged
    assert store.add("m", bottom) == bottom
    with pytest.raises(dist.DistributedError, match="overflows a 64-bit integer"):
        store.add("m", -1)
    with pytest.raises(OverflowError):
        store.add("m", 2**63)
    store.set("min", str(bottom))  # parse_int reads the full int64 range...
    assert store.add("min", 0) == bottom
    for text in ("9223372036854775808", "99999999999999999999", "-9223372036854775809", "-", "1e3"):
        store.set("bad", text)  # ...and nothing outside it
        with pytest.raises(dist.DistributedError, match="'bad' is not a 64-bit integer"):
            store.add("bad", 1)
    assert store.rejected_connections == 0


def test_oversized_keys_are_refused_before_they_reach_the_server(store):
    store.set("", "empty keys are fine")
    assert store.get("") == b"empty keys are fine"
    for call in (lambda: store.set("k" * 5000, "v"), lambda: store.get("k" * 5000), lambda: store.add("k" * 5000, 1),
                 lambda: store.delete_key("k" * 5000), lambda: store.check(["k" * 5000])):
        with pytest.raises(ValueError, match="key is 5000 bytes long; the store's limit is 4096"):
            call()
    with pytest.raises(ValueError, match="5000 keys in one request; the store's limit is 4096"):
        store.wait(["k"] * 5000, timeout=1)
    assert store.rejected_connections == 0  # refused here, not by a dropped connection
    assert store.get("") == b"empty keys are fine"


EXPECTED_C_STATUSES = {
    # 0 OK, 1 ERROR, 2 TIMEOUT, 3 INVALID (see ember/distributed/c_api.h)
    "server NULL host": 3, "server NULL out": 3, "server": 0,
    "client timeout negative": 3, "client timeout INT64_MIN": 3, "client timeout INT64_MAX": 3,
    "client timeout over a year": 3, "client NULL host": 3, "client": 0,
    "set NULL key, length 5": 3, "set NULL value, length 3": 3, "set empty key and value": 0,
    "set key over 4096 bytes": 3, "get NULL out": 3, "get timeout INT64_MAX": 3, "get timeout 0 absent": 2,
    "add INT64_MAX": 0, "add 1 past INT64_MAX": 1, "add NULL result": 3,
    "wait NULL keys, count 3": 3, "wait no keys": 0, "check NULL present": 3, "delete NULL key, length 2": 3,
    "group rank -1": 1, "group rank = world": 1, "group world 0": 1, "group world INT_MAX": 1,
    "group timeout -1": 3, "group NULL prefix": 3, "group": 0,
    "allreduce dtype 99": 3, "allreduce op -1": 3, "allreduce count overflows": 3, "allreduce empty": 0,
    "reduce_scatter count overflows": 3, "broadcast root 5": 1, "broadcast root -1": 1, "send to self": 1,
}


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="finds the loaded C library through /proc")
def test_c_api_edge_arguments_give_a_status_never_a_crash(procs):
    """NULL, zero, negative and huge arguments through ember/distributed/c_api.h, in a child
    process so that a crash shows up as this test failing."""
    res = procs.result_of(procs.start_rank("c_api_args", 0, 1, procs.free_port()), timeout=60)
    got = {label: status for label, status, _ in res["outcomes"]}
    assert got == EXPECTED_C_STATUSES
    for label, status, message in res["outcomes"]:
        assert (status == 0) == (message == ""), (label, message)
    messages = {label: message for label, _, message in res["outcomes"]}
    assert "timeout must be between 0 and 31536000000 ms" in messages["client timeout INT64_MAX"]
    assert "overflows a 64-bit integer" in messages["add 1 past INT64_MAX"]
    assert "world size 2147483647 exceeds the supported maximum" in messages["group world INT_MAX"]
    assert "unsupported dtype code 99" in messages["allreduce dtype 99"]
