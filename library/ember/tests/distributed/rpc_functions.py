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
