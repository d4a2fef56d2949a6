"""ember's array ops: NumPy arrays in, NumPy arrays out, computed by libember.

Kernels run in float32 or float64; other real inputs are converted to float64. Ops with a
``device`` argument run on the GPU with ``device="cuda"`` (see ember.cuda).
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import numpy as np

from . import _C
from . import cuda as _cuda
from .profiler import record_op

__all__ = [
    "add", "sub", "mul", "div", "relu", "exp", "log", "tanh", "sigmoid",
    "sum", "mean", "max", "matmul", "softmax", "conv1d", "conv2d", "index_add",
]

Axis = Union[None, int, Sequence[int]]
_AxisError = getattr(np, "exceptions", np).AxisError  # numpy 2 moved it


def _float_array(x) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype == np.float32 or a.dtype == np.float64:
        return a
    if np.issubdtype(a.dtype, np.complexfloating):
        raise TypeError(f"ember kernels take real arrays, got {a.dtype}")
    return a.astype(np.float64)


def _result_dtype(a, b) -> np.dtype:
    dt = np.result_type(a, b)
    if dt == np.float32 or dt == np.float64:
        return dt
    if np.issubdtype(dt, np.complexfloating):
        raise TypeError(f"ember kernels take real arrays, got {dt}")
    return np.dtype(np.float64)


def _on_cuda(device: str) -> bool:
    if device == "cpu":
        return False
    if device == "cuda" or (isinstance(device, str) and device.startswith("cuda:")):
        _cuda.require_device()
        return True
    raise ValueError(f"unknown device {device!r}: use 'cpu' or 'cuda'")


def _binary(name: str, a, b, device: str) -> np.ndarray:
    dtype = _result_dtype(a, b)
    a = np.asarray(a, dtype=dtype)
    b = np.asarray(b, dtype=dtype)
    shape = np.broadcast_shapes(a.shape, b.shape)
    out = np.empty(shape, dtype=dtype)
    if _on_cuda(device):
        _C.cuda_binary(name, np.ascontiguousarray(np.broadcast_to(a, shape)),
                       np.ascontiguousarray(np.broadcast_to(b, shape)), out)
        return out
    if a.shape == shape and b.shape == shape and a.flags.c_contiguous and b.flags.c_contiguous:
        _C.binary(name, a, b, out)
    else:
        _C.binary(name, np.broadcast_to(a, shape), np.broadcast_to(b, shape), out)
    return out


def _unary(name: str, x, device: str) -> np.ndarray:
    x = np.ascontiguousarray(_float_array(x))
    out = np.empty_like(x)
    (_C.cuda_unary if _on_cuda(device) else _C.unary)(name, x, out)
    return out


@record_op("add")
def add(a, b, device: str = "cpu") -> np.ndarray:
    """a + b with NumPy broadcasting."""
    return _binary("add", a, b, device)


@record_op("sub")
def sub(a, b, device: str = "cpu") -> np.ndarray:
    """a - b with NumPy broadcasting."""
    return _binary("sub", a, b, device)


@record_op("mul")
def mul(a, b, device: str = "cpu") -> np.ndarray:
    """a * b with NumPy broadcasting."""
    return _binary("mul", a, b, device)


@record_op("div")
def div(a, b, device: str = "cpu") -> np.ndarray:
    """a / b with NumPy broadcasting."""
    return _binary("div", a, b, device)


@record_op("relu")
def relu(x, device: str = "cpu") -> np.ndarray:
    """max(x, 0) elementwise (NaN stays NaN)."""
    return _unary("relu", x, device)


@record_op("exp")
def exp(x, device: str = "cpu") -> np.ndarray:
    return _unary("exp", x, device)


@record_op("log")
def log(x, device: str = "cpu") -> np.ndarray:
    return _unary("log", x, device)


@record_op("tanh")
def tanh(x, device: str = "cpu") -> np.ndarray:
    return _unary("tanh", x, device)


@record_op("sigmoid")
def sigmoid(x, device: str = "cpu") -> np.ndarray:
    """1 / (1 + exp(-x)), without overflow for large |x|."""
    return _unary("sigmoid", x, device)


def _normalize_axes(axis: Axis, ndim: int) -> Tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if np.isscalar(axis) else tuple(axis)
    out = []
    for ax in axes:
        ax = int(ax)
        if not -ndim <= ax < ndim:
            raise _AxisError(ax, ndim)
        out.append(ax % ndim)
    if len(set(out)) != len(out):
        raise ValueError("duplicate value in 'axis'")
    return tuple(sorted(out))


def _reduce(name: str, x, axis: Axis, keepdims: bool, device: str) -> np.ndarray:
    x = _float_array(x)
    axes = _normalize_axes(axis, x.ndim)
    on_cuda = _on_cuda(device)
    kept_shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
    out_shape = kept_shape if keepdims else tuple(s for d, s in enumerate(x.shape) if d not in axes)
    length = int(np.prod([x.shape[d] for d in axes], dtype=np.int64))
    if name == "max" and length == 0:
        raise ValueError("zero-size array to reduction operation max which has no identity")
    if len(axes) == x.ndim and not on_cuda:
        value = _C.reduce_all(name, np.ascontiguousarray(x))
        return np.asarray(value, dtype=x.dtype).reshape(out_shape)
    if len(axes) == 1:
        ax = axes[0]
        outer = int(np.prod(x.shape[:ax], dtype=np.int64))
        inner = int(np.prod(x.shape[ax + 1:], dtype=np.int64))
        work = np.ascontiguousarray(x)
    else:
        # Several axes: bring them together at the end, then reduce one fused axis.
        rest = [d for d in range(x.ndim) if d not in axes]
        work = np.ascontiguousarray(np.transpose(x, rest + list(axes)))
        outer = int(np.prod([x.shape[d] for d in rest], dtype=np.int64))
        inner = 1
    out = np.empty(out_shape, dtype=x.dtype)
    (_C.cuda_reduce_axis if on_cuda else _C.reduce_axis)(name, work, out, outer, length, inner)
    return out


@record_op("sum")
def sum(x, axis: Axis = None, keepdims: bool = False, device: str = "cpu") -> np.ndarray:
    """Sum over `axis` (an int, a tuple, or None for all elements).

    The whole-array sum is multithreaded; its combine order is fixed only when
    ember.set_deterministic(True) is on.
    """
    return _reduce("sum", x, axis, keepdims, device)


@record_op("mean")
def mean(x, axis: Axis = None, keepdims: bool = False, device: str = "cpu") -> np.ndarray:
    """Arithmetic mean over `axis`."""
    x = _float_array(x)
    axes = _normalize_axes(axis, x.ndim)
    count = int(np.prod([x.shape[d] for d in axes], dtype=np.int64))
    total = _reduce("sum", x, axis, keepdims, device)
    return (total / x.dtype.type(count) if count else total * np.nan).astype(x.dtype, copy=False)


@record_op("max")
def max(x, axis: Axis = None, keepdims: bool = False, device: str = "cpu") -> np.ndarray:
    """Maximum over `axis`; NaN propagates as in numpy.max."""
    return _reduce("max", x, axis, keepdims, device)


def _matmul2d(a: np.ndarray, b: np.ndarray, on_cuda: bool) -> np.ndarray:
    out = np.empty((a.shape[0], b.shape[1]), dtype=a.dtype)
    (_C.cuda_matmul if on_cuda else _C.matmul)(np.ascontiguousarray(a), np.ascontiguousarray(b), out)
    return out


@record_op("matmul")
def matmul(a, b, device: str = "cpu") -> np.ndarray:
    """Matrix product with numpy.matmul's rules (1-D operands, broadcast batch dims)."""
    dtype = _result_dtype(a, b)
    a = np.asarray(a, dtype=dtype)
    b = np.asarray(b, dtype=dtype)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: input operand does not have enough dimensions")
    on_cuda = _on_cuda(device)
    a2 = a[np.newaxis, :] if a.ndim == 1 else a
    b2 = b[:, np.newaxis] if b.ndim == 1 else b
    if a2.shape[-1] != b2.shape[-2]:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} are not aligned")
    if a2.ndim == 2 and b2.ndim == 2:
        out = _matmul2d(a2, b2, on_cuda)
    else:
        batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
        ab = np.broadcast_to(a2, batch + a2.shape[-2:])
        bb = np.broadcast_to(b2, batch + b2.shape[-2:])
        out = np.empty(batch + (a2.shape[-2], b2.shape[-1]), dtype=dtype)
        for idx in np.ndindex(*batch):
            out[idx] = _matmul2d(ab[idx], bb[idx], on_cuda)
    if a.ndim == 1:
        out = out[..., 0, :]
    if b.ndim == 1:
        out = out[..., 0]
    return out


@record_op("softmax")
def softmax(x, axis: int = -1) -> np.ndarray:
    """exp(x) / sum(exp(x)) along `axis`, computed stably."""
    x = _float_array(x)
    moved = np.ascontiguousarray(np.moveaxis(x, axis, -1))
    rows = moved.reshape(-1, moved.shape[-1]) if moved.ndim else moved.reshape(1, 1)
    out = np.empty_like(rows)
    _C.softmax(rows, out)
    return np.moveaxis(out.reshape(moved.shape), -1, axis)


def _conv_operands(x, weight, bias, spatial: int):
    dtype = _result_dtype(x, weight)
    x = np.ascontiguousarray(x, dtype=dtype)
    weight = np.ascontiguousarray(weight, dtype=dtype)
    unbatched = x.ndim == spatial + 1
    if unbatched:
        x = x[np.newaxis]
    if x.ndim != spatial + 2 or weight.ndim != spatial + 2:
        raise ValueError(f"conv{spatial}d: input must be {spatial + 1}-D or {spatial + 2}-D and weight "
                         f"{spatial + 2}-D, got {x.shape} and {weight.shape}")
    if bias is not None:
        bias = np.ascontiguousarray(bias, dtype=dtype).reshape(-1)
    return x, weight, bias, unbatched


def _conv_size(n: int, k: int, stride: int, padding: int) -> int:
    if stride < 1 or padding < 0 or n + 2 * padding < k:
        raise ValueError(f"conv: kernel size {k} does not fit input {n} with padding {padding}")
    return (n + 2 * padding - k) // stride + 1


@record_op("conv1d")
def conv1d(x, weight, bias=None, stride: int = 1, padding: int = 0) -> np.ndarray:
    """1-D cross-correlation: x (N, C, L) or (C, L), weight (O, C, k) -> (N, O, L_out)."""
    x, weight, bias, unbatched = _conv_operands(x, weight, bias, 1)
    out = np.empty((x.shape[0], weight.shape[0], _conv_size(x.shape[2], weight.shape[2], stride, padding)),
                   dtype=x.dtype)
    _C.conv1d(x, weight, bias, out, stride, padding)
    return out[0] if unbatched else out


@record_op("conv2d")
def conv2d(x, weight, bias=None, stride: int = 1, padding: int = 0) -> np.ndarray:
    """2-D cross-correlation, NCHW: x (N, C, H, W) or (C, H, W), weight (O, C, kh, kw)."""
    x, weight, bias, unbatched = _conv_operands(x, weight, bias, 2)
    oh = _conv_size(x.shape[2], weight.shape[2], stride, padding)
    ow = _conv_size(x.shape[3], weight.shape[3], stride, padding)
    out = np.empty((x.shape[0], weight.shape[0], oh, ow), dtype=x.dtype)
    _C.conv2d(x, weight, bias, out, stride, padding)
    return out[0] if unbatched else out


@record_op("index_add")
def index_add(x, dim: int, index, source, device: str = "cpu") -> np.ndarray:
    """Copy of x with source's slices added at `index` along `dim` (repeated indices add up).

    Threads add in racing order, so there is no deterministic version: raises RuntimeError
    while ember.set_deterministic(True) is on.
    """
    on_cuda = _on_cuda(device)
    dtype = _result_dtype(x, source)
    out = np.array(np.moveaxis(np.asarray(x, dtype=dtype), dim, 0), order="C")
    index = np.ascontiguousarray(index, dtype=np.int64).reshape(-1)
    src = np.ascontiguousarray(np.moveaxis(np.asarray(source, dtype=dtype), dim, 0))
    if src.shape[0] != index.shape[0] or src.shape[1:] != out.shape[1:]:
        raise ValueError(f"index_add: source shape {np.shape(source)} does not match index and x")
    rows = out.shape[0]
    out2 = out.reshape(rows, -1)
    (_C.cuda_index_add if on_cuda else _C.index_add)(out2, index, src.reshape(index.shape[0], -1))
    return np.moveaxis(out, 0, dim)
