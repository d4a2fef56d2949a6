"""All collectives, 2-4 real processes over loopback, checked against NumPy."""
import pytest


pytestmark = pytest.mark.feature("distributed.collectives")


@pytest.mark.parametrize("world", [2, 3, 4])
def test_collectives_match_numpy(world, procs):
    results = procs.run_group("collectives", world, timeout=120)
    assert sorted(r["rank"] for r in results) == list(range(world))
    assert all(r["world"] == world and r["checks"] >= 98 for r in results)
