"""All collectives, 2-4 real processes over loopback, checked against NumPy."""
import pytest


pytestmark = pytest.mark.feature("distributed.collectives")


@pytest.mark.parametrize("world", [2, 3, 4])
def test_collectives_match_numpy(world, procs):
    results = procs.run_group("collectives", world, timeout=120)
    assert sorted(r["rank"] for r in results) == list(range(world))
    assert all(r["world"] == world and r["checks"] >= 98 for r in results)


@pytest.mark.parametrize("case, wanted", [
    ("size", ["allreduce(10 x float32, SUM)", "allreduce(20 x float32, SUM)"]),
    ("dtype", ["allreduce(10 x float32, SUM)", "allreduce(10 x int32, SUM)"]),
    ("op", ["allreduce(10 x float32, SUM)", "allreduce(10 x float32, MAX)"]),
    ("collective", ["allreduce(10 x float32, SUM)", "broadcast(40 bytes, root=1)"]),
])
def test_mismatched_calls_raise_on_every_rank_and_abort_the_group(case, wanted, procs):
    """2 ranks make different calls for one collective: both raise at once, naming the op and
    both ranks' calls, and the next call on each rank says the group was aborted (it used to
    return silently corrupted sums: 101 instead of 300)."""
    results = procs.run_group("mismatch", 2, case, timeout=60)
    for rank, res in enumerate(results):
        assert res["rank"] == rank
        assert res["is_distributed"] and not res["is_timeout"], res
        assert res["op"] == ("broadcast" if case == "collective" and rank == 1 else "allreduce"), res
        message = res["message"]
        assert f"rank 0 called {wanted[0]}" in message and f"rank 1 called {wanted[1]}" in message, message
        assert "does not match across ranks" in message, message
        assert res["elapsed"] < 5, res  # detected, not timed out (the group timeout is 10 s)
        assert "after" not in res, res  # never a silently wrong answer
        assert "aborted" in res["after_error"] and "destroy it and create a new one" in res["after_error"], res
