"""The default process group and the collective operations on NumPy arrays."""
from __future__ import annotations

import atexit
import datetime
import os
import threading
from dataclasses import dataclass
from typing import List, Optional, Sequence
from urllib.parse import urlparse

import numpy as np

from ember import _distributed as _C
from ember.distributed.store import TCPStore, Timeout, seconds

ReduceOp = _C.ReduceOp

DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)
_SUPPORTED_BACKENDS = ("tcp", "gloo")


@dataclass
class _GroupState:
    pg: "_C.ProcessGroup"
    store: TCPStore
    rank: int
    world_size: int
    join: Optional[object] = None


_lock = threading.Lock()
_default: Optional[_GroupState] = None
_groups_created = 0


def _parse_init_method(init_method: str, rank: int, world_size: int):
    url = urlparse(init_method)
    if url.scheme == "env":
        try:
            host = os.environ["MASTER_ADDR"]
            port = int(os.environ["MASTER_PORT"])
        except KeyError as missing:
            raise ValueError(f"env:// rendezvous needs the {missing.args[0]} environment variable") from None
        if rank < 0:
            rank = int(os.environ.get("RANK", -1))
        if world_size < 0:
            world_size = int(os.environ.get("WORLD_SIZE", -1))
    elif url.scheme == "tcp":
        if not url.hostname or url.port is None:
            raise ValueError(f"tcp:// init_method needs host and port, got {init_method!r}")
        host, port = url.hostname, url.port
    else:
        raise ValueError(f"unsupported init_method {init_method!r} (use tcp://host:port or env://)")
    if rank < 0 or world_size < 1:
        raise ValueError("rank and world_size must be given (or set RANK and WORLD_SIZE for env://)")
    return host, port, rank, world_size


def _agent_hosts_store() -> bool:
    """Under ember-run the launcher already serves the group's store on MASTER_PORT (as
    torchelastic's TORCHELASTIC_USE_AGENT_STORE): rank 0 connects instead of binding it."""
    return os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"


def init_process_group(backend: str = "tcp", init_method: Optional[str] = None,
                       timeout: Timeout = DEFAULT_TIMEOUT, world_size: int = -1, rank: int = -1,
                       store: Optional[TCPStore] = None) -> None:
    """Joins the default process group; rank 0 hosts the rendezvous store.

    Raises DistributedTimeoutError naming the ranks that did not arrive within ``timeout``.
    """
    global _default, _groups_created
    if backend not in _SUPPORTED_BACKENDS:
        raise ValueError(f"unsupported backend {backend!r}; ember runs collectives over TCP ({_SUPPORTED_BACKENDS})")
    with _lock:
        if _default is not None:
            raise RuntimeError("the default process group is already initialized")
        if store is None:
            host, port, rank, world_size = _parse_init_method(init_method or "env://", rank, world_size)
            store = TCPStore(host, port, world_size, is_master=(rank == 0 and not _agent_hosts_store()),
                             timeout=timeout)
        elif rank < 0 or world_size < 1:
            raise ValueError("rank and world_size must be given with an explicit store")
        prefix = f"pg/{_groups_created}"
        _groups_created += 1
        try:
            pg = _C.ProcessGroup(store.client, rank, world_size, seconds(timeout), prefix)
        except BaseException:
            store.close()
            raise
        _default = _GroupState(pg=pg, store=store, rank=rank, world_size=world_size)


def is_initialized() -> bool:
    return _default is not None


def _group() -> _GroupState:
    if _default is None:
        raise RuntimeError("the default process group is not initialized; call init_process_group() first")
    return _default


def default_store() -> TCPStore:
    """The store the default group rendezvoused through (shared by RPC)."""
    return _group().store


def get_rank() -> int:
    return _group().rank


def get_world_size() -> int:
    return _group().world_size


def destroy_process_group() -> None:
    """Leaves the group (peers are told this is deliberate) and stops the store if hosted here."""
    global _default
    with _lock:
        state, _default = _default, None
    if state is None:
        return
    state.pg.shutdown()
    state.store.close()


atexit.register(destroy_process_group)


def _as_array(tensor) -> np.ndarray:
    if not isinstance(tensor, np.ndarray):
        raise TypeError(f"expected a numpy.ndarray, got {type(tensor).__name__}")
    return tensor


def all_reduce(tensor: np.ndarray, op: ReduceOp = ReduceOp.SUM) -> None:
    """Reduces ``tensor`` in place across all ranks (SUM, MAX, MIN or AVG).

    Integer AVG truncates toward zero. Inside ``join()`` ranks that ran out of data shadow it.
    """
    state = _group()
    tensor = _as_array(tensor)
    if state.join is not None:
        state.join.all_reduce(state.pg, tensor, op)
    else:
        state.pg.allreduce(tensor, op)


def broadcast(tensor: np.ndarray, src: int) -> None:
    """Copies rank ``src``'s ``tensor`` into ``tensor`` on every rank."""
    _group().pg.broadcast(_as_array(tensor), int(src))


def allgather(tensor: np.ndarray) -> np.ndarray:
    """Returns an array of shape (world_size, *tensor.shape) holding every rank's tensor."""
    state = _group()
    tensor = np.ascontiguousarray(_as_array(tensor))
    out = np.empty((state.world_size,) + tensor.shape, dtype=tensor.dtype)
    state.pg.allgather(tensor, out)
    return out


def all_gather(tensor_list: List[np.ndarray], tensor: np.ndarray) -> None:
    """Fills ``tensor_list[r]`` with rank r's ``tensor`` (torch.distributed signature)."""
    gathered = allgather(tensor)
    if len(tensor_list) != len(gathered):
        raise ValueError(f"tensor_list must have world_size={len(gathered)} entries")
    for dst, src in zip(tensor_list, gathered):
        dst[...] = src


def reduce_scatter(output: np.ndarray, input_list: Sequence[np.ndarray], op: ReduceOp = ReduceOp.SUM) -> None:
    """Reduces ``input_list[r]`` over all ranks into ``output`` on rank r."""
    state = _group()
    output = _as_array(output)
    if len(input_list) != state.world_size:
        raise ValueError(f"input_list must have world_size={state.world_size} entries")
    stacked = np.ascontiguousarray(np.stack([np.asarray(x, dtype=output.dtype) for x in input_list]))
    state.pg.reduce_scatter(stacked, output, op)


def barrier() -> None:
    """Returns once every rank has entered the barrier."""
    _group().pg.barrier()


def send(tensor: np.ndarray, dst: int) -> None:
    _group().pg.send(np.ascontiguousarray(_as_array(tensor)), int(dst))


def recv(tensor: np.ndarray, src: int) -> int:
    """Receives into ``tensor`` from rank ``src``; returns ``src``."""
    _group().pg.recv(_as_array(tensor), int(src))
    return int(src)


def set_timeout(timeout: Timeout) -> None:
    """Changes the default group's per-operation timeout."""
    _group().pg.timeout = seconds(timeout)


allreduce = all_reduce
