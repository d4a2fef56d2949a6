"""Uneven inputs across three ranks (5, 3 and 1 batches) inside join()."""
import pytest


pytestmark = pytest.mark.feature("distributed.join")

BATCHES = [5, 3, 1]


def expected(divide_by_initial_world_size):
    rows = []
    for step in range(max(BATCHES)):
        active = [r for r in range(3) if step < BATCHES[r]]
        total = sum(10.0 * r + step for r in active)
        rows.append([total / (3 if divide_by_initial_world_size else len(active))] * 4)
        rows.append([max(active) + 1])
    return rows


@pytest.mark.parametrize("divide_initial", [False, True])
def test_uneven_inputs_average_over_the_right_ranks(divide_initial, procs):
    results = procs.run_group("join", 3, "1" if divide_initial else "0", timeout=60)
    want = expected(divide_initial)
    for rank, res in enumerate(results):
        assert res["rank"] == rank
        # Each rank sees results only for its own batches: two allreduces per batch.
        assert res["results"] == [pytest.approx(row) for row in want[: 2 * BATCHES[rank]]]
        # ...and shadowed the others' allreduces after it ran out of data.
        assert res["shadowed"] == 2 * (max(BATCHES) - BATCHES[rank])
