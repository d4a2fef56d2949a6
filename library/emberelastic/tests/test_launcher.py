"""ember-run end to end: env vars, restarts, exhausted restarts, signals, two nodes."""
import json
import os
import shutil
import signal
import socket
import sys
import time
from pathlib import Path

import pytest


pytestmark = pytest.mark.feature("elastic.launcher")


def records(out: Path, pattern: str):
    return {p.name: json.loads(p.read_text()) for p in sorted(out.glob(pattern))}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by a parent that is gone) counts as dead.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_workers_get_the_rendezvous_environment(tmp_path, run):
    code, out, err = run.finish(run.launch("--standalone", "--nproc-per-node", "3", "--max-restarts", "2",
                                   mode="env", out_dir=tmp_path))
    assert code == 0, err
    envs = records(tmp_path, "env-0-*.json")
    assert len(envs) == 3
    ports = {e["MASTER_PORT"] for e in envs.values()}
    assert len(ports) == 1
    for local_rank in range(3):
        e = envs[f"env-0-{local_rank}.json"]
        assert e["RANK"] == e["LOCAL_RANK"] == str(local_rank)
        assert e["WORLD_SIZE"] == e["LOCAL_WORLD_SIZE"] == "3"
        assert e["GROUP_RANK"] == "0" and e["GROUP_WORLD_SIZE"] == "1"
        assert e["MASTER_ADDR"] == "127.0.0.1"
        assert e["EMBER_ELASTIC_RESTART_COUNT"] == e["TORCHELASTIC_RESTART_COUNT"] == "0"
        assert e["MAX_RESTARTS"] == "2"
        assert e["rank_sum"] == 0 + 1 + 2  # the workers really formed a group through MASTER_ADDR/PORT


def test_failed_worker_restarts_the_whole_group(tmp_path, run):
    code, out, err = run.finish(run.launch("--standalone", "--nproc-per-node", "2", "--max-restarts", "3",
                                   mode="fail_first", out_dir=tmp_path))
    assert code == 0, err
    assert set(records(tmp_path, "attempt-*.json")) == {"attempt-0-0.json", "attempt-0-1.json",
                                                       "attempt-1-0.json", "attempt-1-1.json"}
    done = records(tmp_path, "done-*.json")
    assert set(done) == {"done-1-0.json", "done-1-1.json"}  # nothing finished in attempt 0
    assert all(d["EMBER_ELASTIC_RESTART_COUNT"] == "1" and d["rank_sum"] == 1 for d in done.values())
    first = records(tmp_path, "attempt-0-0.json")["attempt-0-0.json"]["pid"]
    assert not alive(first)  # the healthy rank of attempt 0 was stopped, not left running
    assert "restarting the group" in err


def test_exhausted_restarts_exit_1(tmp_path, run):
    code, out, err = run.finish(run.launch("--standalone", "--nproc-per-node", "2", "--max-restarts", "2",
                                   mode="always_fail", out_dir=tmp_path))
    assert code == 1, err
    attempts = records(tmp_path, "attempt-*.json")
    assert {name.split("-")[1] for name in attempts} == {"0", "1", "2"}  # 1 run + 2 restarts
    assert "restarts are used up" in err


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_stops_all_workers_without_orphans(tmp_path, sig, code, run):
    proc = run.launch("--standalone", "--nproc-per-node", "3", mode="sleep", out_dir=tmp_path)
    deadline = time.monotonic() + 30
    while len(list(tmp_path.glob("pid-*.json"))) < 3:
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    pids = [r["pid"] for r in records(tmp_path, "pid-*.json").values()]
    assert all(alive(p) for p in pids)
    proc.send_signal(sig)
    rc, out, err = run.finish(proc, timeout=30)
    assert rc == code, err
    time.sleep(0.2)
    assert not [p for p in pids if alive(p)]


def test_usage_errors_exit_2(tmp_path, run):
    for args in (["--nnodes", "3:1"], ["--nnodes", "2"], ["--nproc-per-node", "0", "--standalone"],
                 ["--bogus-flag"]):
        rc, out, err = run.finish(run.launch(*args, mode="env", out_dir=tmp_path))
        assert rc == 2, (args, err)


def test_console_script_is_installed(run):
    script = shutil.which("ember-run", path=str(Path(sys.executable).parent))
    assert script is not None


def test_two_nodes_rendezvous_on_loopback(tmp_path, run):
    port = run.free_port()
    nodes = [run.launch("--nnodes", "2", "--nproc-per-node", "2", "--rdzv-endpoint", f"127.0.0.1:{port}",
                    "--rdzv-id", "two-nodes", mode="env", out_dir=tmp_path) for _ in range(2)]
    results = [run.finish(n, timeout=90) for n in nodes]
    assert [r[0] for r in results] == [0, 0], [r[2] for r in results]
    envs = records(tmp_path, "env-0-*.json")
    assert sorted(int(e["RANK"]) for e in envs.values()) == [0, 1, 2, 3]
    assert {e["WORLD_SIZE"] for e in envs.values()} == {"4"}
    assert sorted(e["GROUP_RANK"] for e in envs.values()) == ["0", "0", "1", "1"]
    assert {e["GROUP_WORLD_SIZE"] for e in envs.values()} == {"2"}
    assert {e["rank_sum"] for e in envs.values()} == {6}  # one group of four across both nodes


def test_node_joining_triggers_a_new_round(tmp_path, run):
    port = run.free_port()
    common = ["--nnodes", "1:2", "--nproc-per-node", "1", "--rdzv-endpoint", f"127.0.0.1:{port}",
              "--rdzv-id", "grow", "--last-call", "0.2"]
    first = run.launch(*common, mode="sleep_until_two", out_dir=tmp_path)
    deadline = time.monotonic() + 30
    while not list(tmp_path.glob("round-1nodes-*.json")):
        assert time.monotonic() < deadline and first.poll() is None, first.communicate()
        time.sleep(0.05)
    second = run.launch(*common, mode="sleep_until_two", out_dir=tmp_path)
    results = [run.finish(first, timeout=60), run.finish(second, timeout=60)]
    assert [r[0] for r in results] == [0, 0], [r[2] for r in results]
    finals = records(tmp_path, "round-2nodes-*.json")
    assert sorted(int(f["RANK"]) for f in finals.values()) == [0, 1]
    assert {f["EMBER_ELASTIC_RESTART_COUNT"] for f in finals.values()} == {"0"}  # joins are not failures
    assert "group changed" in results[0][2]


def test_master_port_is_held_for_the_workers(tmp_path, run):
    """The port handed to the workers as MASTER_PORT is bound, by the agent, from the moment
    it is published: no other process can take it before the workers use it. (A port that
    was found free and released again could be taken in that window, and the round hung.)"""
    port = run.free_port()
    nodes = [run.launch("--nnodes", "2", "--nproc-per-node", "1", "--rdzv-endpoint", f"127.0.0.1:{port}",
                        "--rdzv-id", "held", "--rdzv-timeout", "30", mode="probe_master_port", out_dir=tmp_path)
             for _ in range(2)]
    results = [run.finish(n, timeout=60) for n in nodes]
    assert [r[0] for r in results] == [0, 0], [r[2] for r in results]
    probes = records(tmp_path, "probe-*.json")
    assert len(probes) == 2
    assert {p["bind"] for p in probes.values()} == {"in use"}, probes
    assert {p["rank_sum"] for p in probes.values()} == {1}  # and the workers still formed their group


def test_master_port_taken_by_another_process_cannot_break_the_round(tmp_path, run):
    """Another process tries to take MASTER_PORT after the rendezvous published it and before
    any worker touched it: the round must still form one group of four, at the first attempt.
    The agent used to publish a port it had found free and released, which rank 0 bound later;
    whatever took the port in between (another job, a peer's connect that met itself) failed
    the round. The workers wait in that window until the test has tried, so the race is
    decided every time, not by the scheduler."""
    port = run.free_port()
    nodes = [run.launch("--nnodes", "2", "--nproc-per-node", "2", "--rdzv-endpoint", f"127.0.0.1:{port}",
                        "--rdzv-id", "intruder", "--rdzv-timeout", "30", "--max-restarts", "0",
                        mode="hold_before_init", out_dir=tmp_path)
             for _ in range(2)]
    intruder = socket.socket()
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("ready-*.json"))) < 4:
            assert time.monotonic() < deadline and all(n.poll() is None for n in nodes), \
                [run.finish(n, timeout=10)[2][-2000:] for n in nodes]
            time.sleep(0.05)
        ready = records(tmp_path, "ready-*.json")
        masters = {(r["MASTER_ADDR"], int(r["MASTER_PORT"])) for r in ready.values()}
        assert len(masters) == 1, ready
        try:
            intruder.bind(masters.pop())
            intruder.listen()
            taken = "the intruder holds it"
        except OSError:
            taken = "in use"
        (tmp_path / "go").write_text("")
        results = [run.finish(n, timeout=60) for n in nodes]
    finally:
        intruder.close()
        for n in nodes:
            if n.poll() is None:
                n.kill()
                n.communicate()
    assert [r[0] for r in results] == [0, 0], (taken, [r[2][-2000:] for r in results])
    assert taken == "in use"
    envs = records(tmp_path, "env-*.json")
    assert sorted(envs) == [f"env-0-{rank}.json" for rank in range(4)], envs  # no restart was needed
    assert {e["rank_sum"] for e in envs.values()} == {0 + 1 + 2 + 3}
