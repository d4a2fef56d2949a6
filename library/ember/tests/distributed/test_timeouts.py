"""Failures never hang: dead, absent and late peers are named on every surviving rank."""
import signal
import time

import pytest


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
    results = procs.run_group("absent", 3, timeout=30)
    for res in results[:2]:
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
