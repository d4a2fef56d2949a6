"""ember-run's rendezvous beyond loopback: an explicit bind, and a job token every node proves."""
import json
import socket
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.feature("elastic.launcher")

TOKEN = "f3c1a9-job-token-for-tests"


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


@pytest.fixture
def no_token_env(monkeypatch):
    monkeypatch.delenv("EMBER_RDZV_TOKEN", raising=False)


def token_file(tmp_path: Path, name: str, token: str) -> Path:
    path = tmp_path / name
    path.write_text(token + "\n")
    path.chmod(0o600)
    return path


def test_a_non_loopback_endpoint_needs_an_explicit_bind(tmp_path, run, no_token_env):
    rc, out, err = run.finish(run.launch("--nnodes", "2", "--rdzv-endpoint", "192.0.2.1:29400",
                                         mode="env", out_dir=tmp_path), timeout=30)
    assert rc == 2, err
    assert "ember-run: error: --rdzv-endpoint 192.0.2.1:29400 is not a loopback address" in err
    assert "--rdzv-bind ADDRESS" in err and "0.0.0.0" in err


def test_a_non_loopback_endpoint_needs_a_token_not_on_the_command_line(tmp_path, run, no_token_env):
    rc, out, err = run.finish(run.launch("--nnodes", "2", "--rdzv-endpoint", "192.0.2.1:29400",
                                         "--rdzv-bind", "0.0.0.0", mode="env", out_dir=tmp_path), timeout=30)
    assert rc == 2, err
    assert "--rdzv-bind 0.0.0.0) authenticates every peer" in err
    assert "--rdzv-token-file FILE or $EMBER_RDZV_TOKEN" in err
    empty = token_file(tmp_path, "empty", "")
    rc, out, err = run.finish(run.launch("--nnodes", "2", "--rdzv-endpoint", "192.0.2.1:29400",
                                         "--rdzv-bind", "0.0.0.0", "--rdzv-token-file", str(empty),
                                         mode="env", out_dir=tmp_path), timeout=30)
    assert rc == 2 and f"--rdzv-token-file {empty} is empty" in err, err


def wait_listening(port: int, proc, timeout: float = 30) -> None:
    """Until something accepts connections on 127.0.0.1:port (bounded; fails if proc exits)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        assert proc.poll() is None, proc.communicate()
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listened on 127.0.0.1:{port} within {timeout} s")


def _joined_job(tmp_path, run, first, second, timeout=90):
    port = run.free_port()
    common = ("--nnodes", "2", "--nproc-per-node", "1", "--rdzv-id", "auth", "--rdzv-timeout", "20")
    nodes = [run.launch(*common, *first(port), mode="env", out_dir=tmp_path)]
    wait_listening(port, nodes[0])  # the first node hosts the store
    nodes.append(run.launch(*common, *second(port), mode="env", out_dir=tmp_path))
    return nodes


def test_a_node_with_the_wrong_token_is_refused(tmp_path, run, no_token_env):
    right, wrong = token_file(tmp_path, "right", TOKEN), token_file(tmp_path, "wrong", "some-other-token")
    host, peer = _joined_job(tmp_path, run,
                             lambda port: ("--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-token-file", str(right)),
                             lambda port: ("--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-token-file", str(wrong)))
    try:
        start = time.monotonic()
        rc, out, err = run.finish(peer, timeout=30)
        assert time.monotonic() - start < 15, "a refused node must fail at once, not at its timeouts"
        assert rc == 1, err
        assert "refused this process: authentication failed" in err, err
        assert "--rdzv-token-file" in err and TOKEN not in err and "some-other-token" not in err
    finally:
        host.kill()
        run.finish(host, timeout=30)
    assert not list(tmp_path.glob("env-*.json"))  # no worker of either node ever started


def test_a_node_without_a_token_is_refused(tmp_path, run, no_token_env):
    host, peer = _joined_job(tmp_path, run,
                             lambda port: ("--rdzv-endpoint", f"127.0.0.1:{port}",
                                           "--rdzv-token-file", str(token_file(tmp_path, "t", TOKEN))),
                             lambda port: ("--rdzv-endpoint", f"127.0.0.1:{port}"))
    try:
        rc, out, err = run.finish(peer, timeout=30)
        assert rc == 1 and "refused this process" in err, err
    finally:
        host.kill()
        run.finish(host, timeout=30)


def test_two_nodes_with_the_same_token_form_a_job_beyond_loopback(tmp_path, run, no_token_env, monkeypatch):
    """Both nodes run the same command: the endpoint's address, --rdzv-bind naming it (the node
    that owns it hosts the store), the token in a file on one node and in the environment on
    the other. The token shows in no output and in no process's argv."""
    address = host_address()
    secret = token_file(tmp_path, "token", TOKEN)
    port = run.free_port()
    common = ("--nnodes", "2", "--nproc-per-node", "2", "--rdzv-id", "beyond", "--rdzv-timeout", "60",
              "--rdzv-endpoint", f"{address}:{port}", "--rdzv-bind", address)
    nodes = [run.launch(*common, "--rdzv-token-file", str(secret), mode="env", out_dir=tmp_path)]
    monkeypatch.setenv("EMBER_RDZV_TOKEN", TOKEN)
    nodes.append(run.launch(*common, mode="env", out_dir=tmp_path))
    results = [run.finish(n, timeout=90) for n in nodes]
    assert [r[0] for r in results] == [0, 0], [r[2] for r in results]
    envs = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("env-0-*.json"))]
    assert sorted(int(e["RANK"]) for e in envs) == [0, 1, 2, 3]
    assert {e["rank_sum"] for e in envs} == {6}  # one group of four, formed over the token
    assert {e["MASTER_ADDR"] for e in envs} == {address}
    for rc, out, err in results:
        assert TOKEN not in out and TOKEN not in err
    # argv of every process: the launcher's own were built by the test; the workers' are
    # recorded by elastic_worker.py.
    assert {e["has_token"] for e in envs} == {True}
    assert all(TOKEN not in " ".join(e["argv"]) for e in envs)


def test_standalone_jobs_need_no_token(tmp_path, run, no_token_env):
    """Single-node users see no change: --standalone makes a token and hands it to the workers
    through their environment."""
    rc, out, err = run.finish(run.launch("--standalone", "--nproc-per-node", "2", mode="env", out_dir=tmp_path),
                              timeout=60)
    assert rc == 0, err
    envs = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("env-0-*.json"))]
    assert sorted(int(e["RANK"]) for e in envs) == [0, 1] and {e["rank_sum"] for e in envs} == {1}
    assert {e["has_token"] for e in envs} == {True}
