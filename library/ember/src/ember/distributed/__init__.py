"""ember.distributed: a TCP rendezvous store, collectives on NumPy arrays, uneven-input
``join()``, collective timeouts that name the missing ranks, and RPC between workers.

Modelled on torch.distributed in PyTorch 1.7; runs over plain TCP on Linux and Windows.
"""
from ember.distributed.collectives import (
    DEFAULT_TIMEOUT,
    ReduceOp,
    all_gather,
    all_reduce,
    allgather,
    allreduce,
    barrier,
    broadcast,
    destroy_process_group,
    get_rank,
    get_world_size,
    init_process_group,
    is_initialized,
    recv,
    reduce_scatter,
    send,
    set_timeout,
)
from ember.distributed.errors import DistributedError, DistributedTimeoutError
from ember.distributed.join import Join, join
from ember.distributed.store import TCPStore
from ember.distributed import rpc


def is_available() -> bool:
    """True: the TCP backend is always built."""
    return True


__all__ = [
    "DEFAULT_TIMEOUT", "DistributedError", "DistributedTimeoutError", "Join", "ReduceOp", "TCPStore",
    "all_gather", "all_reduce", "allgather", "allreduce", "barrier", "broadcast",
    "destroy_process_group", "get_rank", "get_world_size", "init_process_group", "is_available",
    "is_initialized", "join", "recv", "reduce_scatter", "rpc", "send", "set_timeout",
]
