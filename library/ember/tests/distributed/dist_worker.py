"""One rank of a distributed test scenario, run as its own process by the tests.

usage: dist_worker.py SCENARIO RANK WORLD PORT [ARGS...]
Prints one line "RESULT <json>" that the test inspects.
"""
import json
import os
import sys
import time

import numpy as np

import ember.distributed as dist
from ember.distributed import rpc


def report(**fields):
    print("RESULT " + json.dumps(fields), flush=True)


def error_fields(exc: BaseException) -> dict:
    return {"error": type(exc).__name__, "message": str(exc), "op": getattr(exc, "op", None),
            "missing": getattr(exc, "missing_ranks", None),
            "is_timeout": isinstance(exc, TimeoutError),
            "is_distributed": isinstance(exc, dist.DistributedError)}


def init(rank, world, port, timeout=20.0):
    dist.init_process_group("tcp", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timeout)


def rank_data(rank, n, dtype):
    rng = np.random.default_rng(1000 + rank)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(n).astype(dtype)
    return rng.integers(-1000, 1000, n).astype(dtype)


def scenario_collectives(rank, world, port):
    init(rank, world, port)
    checks = 0
    ops = {dist.ReduceOp.SUM: lambda s: s.sum(0), dist.ReduceOp.MAX: lambda s: s.max(0),
           dist.ReduceOp.MIN: lambda s: s.min(0), dist.ReduceOp.AVG: None}
    for dtype in (np.float32, np.float64, np.int32, np.int64):
        for n in (1, 1000, 300_001):  # direct exchange, and the ring for the large one
            everyone = np.stack([rank_data(r, n, dtype) for r in range(world)])
            for op, ref in ops.items():
                a = rank_data(rank, n, dtype)
                dist.all_reduce(a, op)
                if op == dist.ReduceOp.AVG:
                    want = everyone.astype(np.float64).sum(0) / world if a.dtype.kind == "f" else np.fix(everyone.sum(0) / world)
                else:
                    want = ref(everyone)
                if a.dtype.kind == "f":
                    tol = 1e-4 if a.dtype == np.float32 else 1e-10
                    np.testing.assert_allclose(a, want, rtol=tol, atol=tol)
                else:
                    np.testing.assert_array_equal(a, want)
                checks += 1
            gathered = dist.allgather(rank_data(rank, n, dtype))
            np.testing.assert_array_equal(gathered, everyone)
            out = [np.empty(n, dtype) for _ in range(world)]
            dist.all_gather(out, rank_data(rank, n, dtype))
            np.testing.assert_array_equal(np.stack(out), everyone)
            for root in range(world):
                b = rank_data(rank, n, dtype)
                dist.broadcast(b, root)
                np.testing.assert_array_equal(b, everyone[root])
            chunks = [rank_data(rank * 31 + j, n, dtype) for j in range(world)]
            out = np.empty(n, dtype)
            dist.reduce_scatter(out, chunks, dist.ReduceOp.SUM)
            want = sum(rank_data(r * 31 + rank, n, dtype).astype(np.float64 if np.dtype(dtype).kind == "f" else dtype)
                       for r in range(world))
            if out.dtype.kind == "f":
                np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
            else:
                np.testing.assert_array_equal(out, want)
            checks += 4
    # 2-D arrays keep their shape; point-to-point around a ring.
    m = np.full((3, 4), rank, dtype=np.float64)
    dist.all_reduce(m)
    assert m.shape == (3, 4) and np.all(m == sum(range(world)))
    token = np.array([rank * 10], dtype=np.int64)
    incoming = np.empty(1, dtype=np.int64)
    if rank % 2 == 0:
        dist.send(token, (rank + 1) % world)
        dist.recv(incoming, (rank - 1) % world)
    else:
        dist.recv(incoming, (rank - 1) % world)
        dist.send(token, (rank + 1) % world)
    assert incoming[0] == ((rank - 1) % world) * 10
    dist.barrier()
    report(rank=rank, world=dist.get_world_size(), checks=checks + 2)
    dist.destroy_process_group()


def scenario_victim(rank, world, port, victim):
    """Everyone streams large allreduces until the test SIGKILLs rank `victim`."""
    init(rank, world, port, timeout=30.0)
    a = np.ones(4_000_000, dtype=np.float32)
    last_ok = time.monotonic()
    print("READY", flush=True)
    try:
        while True:
            dist.all_reduce(a)
            a[:] = 1
            last_ok = time.monotonic()
    except dist.DistributedError as exc:
        fields = error_fields(exc)
        fields["seconds_after_last_success"] = time.monotonic() - last_ok
        try:
            dist.barrier()
        except dist.DistributedError as again:
            fields["after_abort"] = str(again)
        report(**fields)


def scenario_absent(rank, world, port):
    """The last rank joins the group but never enters the allreduce. The rendezvous waits as long
    as workers take to start (seconds on a loaded machine: a 2 s rendezvous let the absent rank,
    started first, give up before the others arrived); the allreduce gets 2 s."""
    init(rank, world, port, timeout=30.0)
    dist.set_timeout(2.0)
    if rank == world - 1:
        # In the group, never in the collective, and alive (a closed connection would be
        # detected at once, not timed out) until the test has the others' verdicts and closes stdin.
        sys.stdin.read()
        report(rank=rank, skipped=True)
        return
    start = time.monotonic()
    try:
        dist.all_reduce(np.ones(10, dtype=np.float64))
        report(error=None)
    except dist.DistributedError as exc:
        report(elapsed=time.monotonic() - start, **error_fields(exc))


def scenario_slow_link(rank, world, port):
    """Rank 0 runs behind slow_link.c and gives its allreduce 1 s; rank 1 hosts the store (so
    the first connection rank 0 accepts is rank 1's data connection) and sends its data at
    once. Rank 0 reports how its allreduce ended and when."""
    store = dist.TCPStore("127.0.0.1", port, world, is_master=(rank == 1), timeout=20)
    dist.init_process_group("tcp", store=store, rank=rank, world_size=world, timeout=20)
    if rank == 0:
        dist.set_timeout(1.0)
    data = np.ones(256, dtype=np.float32)
    start = time.monotonic()
    try:
        dist.all_reduce(data)
        report(error=None, elapsed=time.monotonic() - start, first=float(data[0]))
    except dist.DistributedError as exc:
        report(elapsed=time.monotonic() - start, **error_fields(exc))


def scenario_init_only(rank, world, port):
    """The ranks that come give the rendezvous 2 s for one that never does. Each waits for the
    test's go, which comes once all of them are running: a rank that starts late on a loaded
    machine must not count as missing."""
    print("READY", flush=True)
    sys.stdin.readline()
    start = time.monotonic()
    try:
        init(rank, world, port, timeout=2.0)
        report(error=None)
    except dist.DistributedError as exc:
        report(elapsed=time.monotonic() - start, **error_fields(exc))


def scenario_join(rank, world, port, divide_initial):
    """Uneven inputs: rank r has 5 - 2r batches; gradients are averaged inside join()."""
    init(rank, world, port)
    batches = [5, 3, 1][rank]
    results = []
    with dist.join(divide_by_initial_world_size=divide_initial == "1") as joined:
        for step in range(batches):
            grad = np.full(4, 10.0 * rank + step, dtype=np.float64)
            dist.all_reduce(grad, dist.ReduceOp.AVG)
            results.append(grad.tolist())
            total = np.array([rank + 1], dtype=np.int64)
            dist.all_reduce(total, dist.ReduceOp.MAX)
            results.append(total.tolist())
    report(rank=rank, results=results, shadowed=joined.shadowed)
    dist.destroy_process_group()


def scenario_rpc(rank, world, port):
    import operator
    import rpc_functions

    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world, init_method=f"tcp://127.0.0.1:{port}", timeout=20)
    out = {"rank": rank}
    if rank == 0:
        out["sync"] = rpc.rpc_sync("worker1", operator.add, args=(2, 3))
        out["kwargs"] = rpc.rpc_sync("worker1", rpc_functions.scaled_sum, args=([1, 2, 3],), kwargs={"scale": 10})
        out["where"] = rpc.rpc_sync(f"worker{world - 1}", rpc_functions.whoami)
        futures = [rpc.rpc_async(f"worker{r % world}", rpc_functions.slow_square, args=(r,)) for r in range(6)]
        out["async"] = [f.wait() for f in futures]
        arr = rpc.rpc_sync("worker1", rpc_functions.array_mean, args=(np.arange(10.0),))
        out["array_mean"] = float(arr)
        rref = rpc.remote("worker1", rpc_functions.make_counter, args=(5,))
        out["rref_owner"] = rref.owner().name
        out["rref_value"] = rref.to_here()
        out["rref_chain"] = rpc.rpc_sync("worker2", rpc_functions.fetch_and_add, args=(rref, 7))
        try:
            rpc.rpc_sync("worker1", rpc_functions.fail_deeply, args=("boom",))
            out["remote_error"] = None
        except ValueError as exc:
            out["remote_error"] = str(exc)
        try:
            rpc.remote("worker2", rpc_functions.fail_deeply, args=("rref boom",)).to_here()
            out["rref_error"] = None
        except ValueError as exc:
            out["rref_error"] = str(exc)
        try:
            rpc.rpc_sync("worker1", "rpc_functions.does_not_exist")
        except AttributeError as exc:
            out["missing_fn"] = str(exc)
        try:
            rpc.rpc_sync("worker1", rpc_functions.slow_square, args=(3,), kwargs={"delay": 3.0}, timeout=0.5)
            out["timeout"] = None
        except dist.DistributedTimeoutError as exc:
            out["timeout"] = str(exc)
    rpc.shutdown()
    report(**out)


def scenario_mismatch(rank, world, port, case):
    """Rank 0 and the others make different calls for the same collective."""
    init(rank, world, port, timeout=10.0)
    first = rank == 0
    calls = {
        # The reported case: 10 floats on rank 0, 20 on rank 1.
        "size": lambda: dist.all_reduce(np.ones(10 if first else 20, dtype=np.float32)),
        # Same byte count, different element type.
        "dtype": lambda: dist.all_reduce(np.ones(10, dtype=np.float32 if first else np.int32)),
        "op": lambda: dist.all_reduce(np.ones(10, dtype=np.float32),
                                      dist.ReduceOp.SUM if first else dist.ReduceOp.MAX),
        # A broadcast root receives nothing, yet must notice too.
        "collective": lambda: (dist.all_reduce(np.ones(10, dtype=np.float32)) if first
                               else dist.broadcast(np.ones(10, dtype=np.float32), 1)),
    }
    start = time.monotonic()
    try:
        calls[case]()
        fields = {"error": None}
    except dist.DistributedError as exc:
        fields = error_fields(exc)
    fields["elapsed"] = time.monotonic() - start
    try:  # the call the report says returned 101 instead of 300
        again = np.full(10, 100.0 + 100.0 * rank, dtype=np.float32)
        dist.all_reduce(again)
        fields["after"] = again.tolist()
    except dist.DistributedError as exc:
        fields["after_error"] = str(exc)
    report(rank=rank, **fields)


def _distributed_library():
    """The loaded libember_distributed (auditwheel may have renamed it), found through the process's maps."""
    import ctypes
    import ember._distributed  # noqa: F401  (loads the library)

    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "libember_distributed" in line}
    if len(paths) != 1:
        raise RuntimeError(f"expected one loaded libember_distributed, found {sorted(paths)}")
    return ctypes.CDLL(paths.pop())


def scenario_c_api_args(rank, world, port):
    """Edge values (NULL, zero, negative, huge) through the C interface: a status, never a crash."""
    import ctypes as C

    lib = _distributed_library()
    lib.ember_dist_error_message.restype = C.c_char_p
    p, i64, sz = C.c_void_p, C.c_int64, C.c_size_t
    sigs = {
        "ember_dist_server_create": [C.c_char_p, C.c_uint16, p],
        "ember_dist_client_create": [C.c_char_p, C.c_uint16, i64, p],
        "ember_dist_client_set": [p, C.c_char_p, sz, C.c_char_p, sz],
        "ember_dist_client_get": [p, C.c_char_p, sz, i64, p, p],
        "ember_dist_client_add": [p, C.c_char_p, sz, i64, p],
        "ember_dist_client_wait": [p, p, p, sz, i64],
        "ember_dist_client_check": [p, p, p, sz, p],
        "ember_dist_client_delete_key": [p, C.c_char_p, sz, p],
        "ember_dist_group_create": [p, C.c_int, C.c_int, i64, C.c_char_p, p],
        "ember_dist_group_allreduce": [p, p, sz, C.c_int, C.c_int],
        "ember_dist_group_broadcast": [p, p, sz, C.c_int],
        "ember_dist_group_allgather": [p, p, p, sz],
        "ember_dist_group_reduce_scatter": [p, p, p, sz, C.c_int, C.c_int],
        "ember_dist_group_send": [p, p, sz, C.c_int],
    }
    for name, args in sigs.items():
        getattr(lib, name).argtypes = args
        getattr(lib, name).restype = C.c_int
    outcomes = []

    def call(label, name, *args):
        status = getattr(lib, name)(*args)
        outcomes.append([label, status, lib.ember_dist_error_message().decode() if status else ""])
        return status

    server, client, group = p(), p(), p()
    big, out64, flag = 2**63 - 1, C.c_int64(), C.c_int()
    value, value_len = C.c_char_p(), C.c_size_t()
    call("server NULL host", "ember_dist_server_create", None, port, C.byref(server))
    call("server NULL out", "ember_dist_server_create", b"127.0.0.1", port, None)
    call("server", "ember_dist_server_create", b"127.0.0.1", port, C.byref(server))
    for label, timeout in [("negative", -1), ("INT64_MIN", -2**63), ("INT64_MAX", big), ("over a year", 366 * 86400000)]:
        call(f"client timeout {label}", "ember_dist_client_create", b"127.0.0.1", port, timeout, C.byref(client))
    call("client NULL host", "ember_dist_client_create", None, port, 1000, C.byref(client))
    call("client", "ember_dist_client_create", b"127.0.0.1", port, 5000, C.byref(client))
    call("set NULL key, length 5", "ember_dist_client_set", client, None, 5, b"v", 1)
    call("set NULL value, length 3", "ember_dist_client_set", client, b"k", 1, None, 3)
    call("set empty key and value", "ember_dist_client_set", client, b"", 0, None, 0)
    call("set key over 4096 bytes", "ember_dist_client_set", client, b"k" * 5000, 5000, b"v", 1)
    call("get NULL out", "ember_dist_client_get", client, b"", 0, 0, None, None)
    call("get timeout INT64_MAX", "ember_dist_client_get", client, b"", 0, big, C.byref(value), C.byref(value_len))
    call("get timeout 0 absent", "ember_dist_client_get", client, b"absent", 6, 0, C.byref(value), C.byref(value_len))
    call("add INT64_MAX", "ember_dist_client_add", client, b"n", 1, big, C.byref(out64))
    call("add 1 past INT64_MAX", "ember_dist_client_add", client, b"n", 1, 1, C.byref(out64))
    call("add NULL result", "ember_dist_client_add", client, b"n", 1, 0, None)
    call("wait NULL keys, count 3", "ember_dist_client_wait", client, None, None, 3, 0)
    call("wait no keys", "ember_dist_client_wait", client, None, None, 0, 0)
    call("check NULL present", "ember_dist_client_check", client, None, None, 0, None)
    call("delete NULL key, length 2", "ember_dist_client_delete_key", client, None, 2, C.byref(flag))
    for label, r, w in [("rank -1", -1, 1), ("rank = world", 1, 1), ("world 0", 0, 0), ("world INT_MAX", 0, 2**31 - 1)]:
        call(f"group {label}", "ember_dist_group_create", client, r, w, 1000, b"pg", C.byref(group))
    call("group timeout -1", "ember_dist_group_create", client, 0, 1, -1, b"pg", C.byref(group))
    call("group NULL prefix", "ember_dist_group_create", client, 0, 1, 1000, None, C.byref(group))
    call("group", "ember_dist_group_create", client, 0, 1, 1000, b"pg", C.byref(group))
    buf = (C.c_double * 4)()
    call("allreduce dtype 99", "ember_dist_group_allreduce", group, buf, 4, 99, 0)
    call("allreduce op -1", "ember_dist_group_allreduce", group, buf, 4, 1, -1)
    call("allreduce count overflows", "ember_dist_group_allreduce", group, buf, 2**63, 1, 0)
    call("allreduce empty", "ember_dist_group_allreduce", group, None, 0, 1, 0)
    call("reduce_scatter count overflows", "ember_dist_group_reduce_scatter", group, buf, buf, 2**62, 1, 0)
    call("broadcast root 5", "ember_dist_group_broadcast", group, buf, 32, 5)
    call("broadcast root -1", "ember_dist_group_broadcast", group, buf, 32, -1)
    call("send to self", "ember_dist_group_send", group, buf, 32, 0)
    report(outcomes=outcomes)


SCENARIOS = {"collectives": scenario_collectives, "victim": scenario_victim, "absent": scenario_absent,
             "init_only": scenario_init_only, "slow_link": scenario_slow_link, "join": scenario_join,
             "rpc": scenario_rpc, "mismatch": scenario_mismatch, "c_api_args": scenario_c_api_args}

if __name__ == "__main__":
    name, rank, world, port, *extra = sys.argv[1:]
    SCENARIOS[name](int(rank), int(world), int(port), *extra)
