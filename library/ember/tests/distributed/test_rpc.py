"""RPC between three named workers: sync, async, remote references and remote errors."""
import pytest


pytestmark = pytest.mark.feature("distributed.rpc")


@pytest.fixture(scope="module")
def driver(procs):
    results = procs.run_group("rpc", 3, timeout=90)
    assert [r["rank"] for r in results] == [0, 1, 2]
    return results[0]


def test_rpc_sync_and_kwargs(driver):
    assert driver["sync"] == 5
    assert driver["kwargs"] == 60
    assert driver["where"] == "worker2"
    assert driver["array_mean"] == 4.5


def test_rpc_async_futures(driver):
    assert driver["async"] == [r * r for r in range(6)]


def test_remote_reference_lives_on_owner(driver):
    assert driver["rref_owner"] == "worker1"
    assert driver["rref_value"]["count"] == 5
    assert driver["rref_chain"] == 12  # worker2 fetched worker1's value through the RRef


def test_remote_errors_carry_the_remote_traceback(driver):
    err = driver["remote_error"]
    assert err is not None and "boom" in err
    assert "Remote traceback (on worker 'worker1')" in err
    assert "_inner_failure" in err and "fail_deeply" in err
    assert "rref boom" in driver["rref_error"] and "worker2" in driver["rref_error"]
    assert "does_not_exist" in driver["missing_fn"]


def test_rpc_timeout(driver):
    assert driver["timeout"] is not None and "0.5" in driver["timeout"]


# ---- hardening: who may connect, how much a message may weigh, nesting, RRef lifetimes -------

class _CreatesFile:
    """Unpickling this creates a file: the visible trace of a server that unpickled a stranger's bytes."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _evil_frame(path):
    import pickle
    import struct
    payload = pickle.dumps((1, "call", "os", "getpid", (_CreatesFile(path),), {}))
    return struct.pack("<Q", len(payload)) + payload


def _attack(address, trace):
    """Two strangers send a pickle: one straight away, one after answering the challenge without
    the secret. Returns, for each, "closed" if the server hung up on it, else what happened."""
    import socket
    outcomes = []
    for answer_challenge in (False, True):
        with socket.create_connection(address, timeout=10) as sock:
            try:
                if answer_challenge:
                    hello = sock.recv(12 + 32)
                    assert hello.startswith(b"ember-rpc/1\n"), hello
                    sock.sendall(b"ember-rpc/1\n" + b"\0" * 32 + b"\1" * 32)  # a nonce and a guessed HMAC
                sock.sendall(_evil_frame(trace))
                while sock.recv(4096):
                    pass
                outcomes.append("closed")
            except ConnectionResetError:
                outcomes.append("closed")
            except OSError as exc:
                outcomes.append(f"{type(exc).__name__}: {exc}")
    return outcomes


@pytest.fixture(scope="module")
def hardened(procs, tmp_path_factory):
    import pickle
    import subprocess
    import sys
    import time
    from pathlib import Path

    from ember.distributed import TCPStore

    here = Path(__file__).resolve().parent
    store = TCPStore("127.0.0.1", 0, 3, is_master=True, timeout=30)
    workers = [subprocess.Popen([sys.executable, str(here / "rpc_functions.py"), "hardening", str(r), "3",
                                 str(store.port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=str(here)) for r in range(3)]
    try:
        trace = tmp_path_factory.mktemp("rpc") / "unpickled-by-the-server"
        control = trace.with_name("control")
        pickle.loads(_evil_frame(control)[8:])
        assert control.exists(), "the payload must leave a trace when it is unpickled"
        store.wait(["rpc/worker/0", "rpc/worker/1", "rpc/worker/2"])
        deadline = time.monotonic() + 10
        while store.check(["rpc/secret"]) and time.monotonic() < deadline:
            time.sleep(0.02)
        secret_left_in_store = store.check(["rpc/secret"])
        _, host, port = store.get("rpc/worker/1").decode().split("\n")
        outcomes = _attack((host, int(port)), trace)
        store.set("test/attacked", "1")
        results = [procs.result_of(w, timeout=90) for w in workers]
        yield {"host": host, "secret_left_in_store": secret_left_in_store, "trace_exists": trace.exists(),
               "outcomes": outcomes,
               "results": results}
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
        store.close()


def test_rpc_listens_on_the_init_method_interface(hardened):
    assert hardened["host"] == "127.0.0.1"


def test_connection_without_the_secret_is_refused_before_unpickling(hardened):
    assert not hardened["trace_exists"], "the server unpickled bytes from a peer that never proved the secret"
    assert hardened["outcomes"] == ["closed", "closed"]
    assert hardened["results"][1]["refused_handshakes"] == 2
    # The store no longer holds the secret once every worker has read it.
    assert hardened["secret_left_in_store"] is False


def test_oversized_messages_are_refused(hardened):
    driver, limited = hardened["results"][0], hardened["results"][1]
    assert "worker 'worker1' refused our message" in driver["refused_by_receiver"]
    assert "exceeds the limit of 1048576 bytes" in driver["refused_by_receiver"]
    assert limited["refused_messages"] == 1
    assert driver["after_refusal"] == 3  # a fresh connection works after the refused one
    assert "exceeds the limit of 1048576 bytes" in driver["reply_too_large"]
    assert limited["refused_by_sender"].startswith("FrameTooLarge: ")
    assert "max_message_size" in limited["refused_by_sender"]


def test_nested_rpc_three_deep_outnumbering_the_pool_completes(hardened):
    driver = hardened["results"][0]
    assert driver["nested"] == [["worker1", "worker2", "worker1", "worker2"]] * 24
    assert driver["nested_seconds"] < 20


def test_rrefs_are_freed_when_their_holders_drop_them(hardened):
    driver = hardened["results"][0]
    assert driver["kept"] == [1, 2, 3]
    assert driver["chained"] == 104 and driver["round_trip"] == 1005
    assert driver["owned_while_held"] == 10
    assert driver["owned_after_drop"] == 3  # worker2 still holds three of them
    assert driver["kept_still_readable"] == 0 + 1 + 2
    assert driver["owned_after_all_dropped"] == 0
