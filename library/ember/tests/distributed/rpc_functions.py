"""Functions the RPC tests call remotely (importable by every worker by qualified name)."""
import os
import time


def scaled_sum(values, scale=1):
    return sum(values) * scale


def whoami():
    from ember.distributed import rpc
    return rpc.get_worker_info().name


def slow_square(x, delay=0.05):
    time.sleep(delay)
    return x * x


def array_mean(arr):
    return arr.mean()


def make_counter(start):
    return {"count": start, "pid": os.getpid()}


def fetch_and_add(rref, amount):
    return rref.to_here()["count"] + amount


def _inner_failure(message):
    raise ValueError(message)


def fail_deeply(message):
    _inner_failure(message)


# ---- the hardening scenario: nested calls, oversized messages, RRef lifetimes ---------------
_kept = []


def nested(hops, delay=0.2):
    """Calls nested(hops[1:]) on worker hops[0]; the innermost call sleeps. Returns the path."""
    from ember.distributed import rpc
    here = rpc.get_worker_info().name
    if not hops:
        time.sleep(delay)  # every concurrent chain is inside the pools at once
        return [here]
    return [here] + rpc.rpc_sync(hops[0], nested, args=(hops[1:], delay), timeout=20)


def zeros(n):
    import numpy as np
    return np.zeros(n)


def keep(rref):
    _kept.append(rref)
    return len(_kept)


def sum_kept():
    return sum(r.to_here()["count"] for r in _kept)


def drop_kept():
    import gc
    _kept.clear()
    gc.collect()


def owned_rrefs():
    from ember.distributed import rpc
    return rpc.debug_info().owned_rrefs


def _wait_owned(worker, want, limit=10.0):
    """Polls worker's owned-RRef count until it is `want` (releases travel asynchronously)."""
    from ember.distributed import rpc
    deadline = time.monotonic() + limit
    while True:
        got = rpc.rpc_sync(worker, owned_rrefs)
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def _error_text(call):
    try:
        call()
    except Exception as exc:  # the test asserts the type through the text
        return f"{type(exc).__name__}: {exc}"
    return None


def hardening(rank, world, port):
    import gc
    import json

    import numpy as np
    from ember.distributed import TCPStore, rpc

    store = TCPStore("127.0.0.1", port, world, is_master=False, timeout=30)
    limit = 1 << 20 if rank == 1 else 1 << 30
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world, store=store, timeout=30, max_message_size=limit)
    out = {"rank": rank}
    big = np.zeros(300_000)  # 2.4 MB pickled: over worker1's 1 MiB limit, under everyone else's
    if rank == 0:
        out["refused_by_receiver"] = _error_text(lambda: rpc.rpc_sync("worker1", array_mean, args=(big,)))
        out["after_refusal"] = rpc.rpc_sync("worker1", scaled_sum, args=([1, 2],))
        out["reply_too_large"] = _error_text(lambda: rpc.rpc_sync("worker1", zeros, args=(300_000,)))

        start = time.monotonic()
        chains = [rpc.rpc_async("worker1", nested, args=(["worker2", "worker1", "worker2"],), timeout=30)
                  for _ in range(3 * 8)]
        out["nested"] = [f.wait() for f in chains]
        out["nested_seconds"] = time.monotonic() - start

        rrefs = [rpc.remote("worker1", make_counter, args=(i,)) for i in range(10)]
        out["kept"] = [rpc.rpc_sync("worker2", keep, args=(r,)) for r in rrefs[:3]]
        out["chained"] = rpc.rpc_sync("worker2", fetch_and_add, args=(rrefs[4], 100))
        out["round_trip"] = rpc.rpc_sync("worker1", fetch_and_add, args=(rrefs[5], 1000))
        out["owned_while_held"] = _wait_owned("worker1", 10)
        del rrefs
        gc.collect()
        out["owned_after_drop"] = _wait_owned("worker1", 3)
        out["kept_still_readable"] = rpc.rpc_sync("worker2", sum_kept)
        rpc.rpc_sync("worker2", drop_kept)
        out["owned_after_all_dropped"] = _wait_owned("worker1", 0)
        store.set("test/driver-done", "1")
    if rank == 1:
        out["refused_by_sender"] = _error_text(lambda: rpc.rpc_sync("worker0", array_mean, args=(big,)))
        store.wait(["test/attacked", "test/driver-done"])
        info = rpc.debug_info()
        out["refused_handshakes"], out["refused_messages"] = info.refused_handshakes, info.refused_messages
    rpc.shutdown()
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    import sys

    import rpc_functions  # the module by its importable name, as the other workers resolve it

    getattr(rpc_functions, sys.argv[1])(*map(int, sys.argv[2:]))
