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
