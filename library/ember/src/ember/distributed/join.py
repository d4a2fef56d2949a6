"""Uneven inputs: ``join()`` lets ranks that ran out of data shadow the others' allreduces.

Inside the context, each ``all_reduce`` is preceded by a small header allreduce that
counts the ranks still active and tells joined ranks the shape, dtype and op to shadow.
A rank leaving the context contributes the op's identity element (zeros for SUM/AVG)
until every rank has left, as DDP's ``join()`` does in PyTorch 1.7.
"""
from __future__ import annotations

import numpy as np

from ember import _distributed as _C
from ember.distributed import collectives

_DTYPES = [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32), np.dtype(np.int64)]
_OPS = [_C.ReduceOp.SUM, _C.ReduceOp.MAX, _C.ReduceOp.MIN, _C.ReduceOp.AVG]
# header: [active ranks, dtype code, element count, op code]; active ranks send
# identical metadata, so the SUM divided by the active count recovers it.
_HEADER = 4


def _identity(dtype: np.dtype, op) -> object:
    if op in (_C.ReduceOp.SUM, _C.ReduceOp.AVG):
        return 0
    info = np.finfo(dtype) if dtype.kind == "f" else np.iinfo(dtype)
    if dtype.kind == "f":
        return -np.inf if op == _C.ReduceOp.MAX else np.inf
    return info.min if op == _C.ReduceOp.MAX else info.max


class Join:
    """Context manager for uneven inputs; see the module docstring.

    ``divide_by_initial_world_size`` (default True, as in PyTorch): AVG divides by the
    world size; when False it divides by the number of ranks still active.
    """

    def __init__(self, enable: bool = True, divide_by_initial_world_size: bool = True):
        self.enable = enable
        self.divide_by_initial_world_size = divide_by_initial_world_size
        self.shadowed = 0  # allreduces this rank shadowed after it joined

    def __enter__(self) -> "Join":
        if self.enable:
            state = collectives._group()
            if state.join is not None:
                raise RuntimeError("join() contexts cannot be nested")
            state.join = self
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if not self.enable:
            return False
        state = collectives._group()
        state.join = None
        if exc_type is not None:
            return False  # a failing rank must not keep the others waiting on it
        while True:
            header = np.zeros(_HEADER, dtype=np.int64)
            state.pg.allreduce(header, _C.ReduceOp.SUM)
            active = int(header[0])
            if active == 0:
                return False
            dtype = _DTYPES[int(header[1]) // active]
            count = int(header[2]) // active
            op = _OPS[int(header[3]) // active]
            wire_op = _C.ReduceOp.SUM if op == _C.ReduceOp.AVG else op
            shadow = np.full(count, _identity(dtype, op), dtype=dtype)
            state.pg.allreduce(shadow, wire_op)
            self.shadowed += 1

    def all_reduce(self, pg, tensor: np.ndarray, op) -> None:
        """The active side of a joined allreduce (called by ember.distributed.all_reduce)."""
        dtype = np.dtype(tensor.dtype)
        if dtype not in _DTYPES:
            raise TypeError(f"unsupported dtype {dtype}")
        header = np.array([1, _DTYPES.index(dtype), tensor.size, _OPS.index(op)], dtype=np.int64)
        pg.allreduce(header, _C.ReduceOp.SUM)
        active = int(header[0])
        if op != _C.ReduceOp.AVG:
            pg.allreduce(tensor, op)
            return
        pg.allreduce(tensor, _C.ReduceOp.SUM)
        divisor = pg.world_size if self.divide_by_initial_world_size else active
        if dtype.kind == "f":
            tensor /= divisor
        else:  # integer AVG truncates toward zero, like the non-joined path
            np.copyto(tensor, np.sign(tensor) * (np.abs(tensor) // divisor))


def join(enable: bool = True, divide_by_initial_world_size: bool = True) -> Join:
    """``with join(): ...`` around a training loop whose ranks may see different batch counts."""
    return Join(enable, divide_by_initial_world_size)
