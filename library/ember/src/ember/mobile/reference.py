"""Reference execution of an ember-lite model in Python, to compare the runtime against.

Two backends: "ember" runs each op with ember's Python ops (float32, the same kernels the
runtime links, so the runtime must agree to rounding), "numpy" with plain numpy in float64
(an independent implementation, to catch a wrong kernel as well as a wrong runtime).
"""

from __future__ import annotations

import os
from typing import Union

import numpy as np

from ember.mobile.format import decode
from ember.mobile.ops import (
    Add, Conv2d, Exp, Flatten, Linear, MobileModel, Mul, ReLU, Reshape, Softmax,
)


def _conv2d(x: np.ndarray, weight: np.ndarray, bias, stride: int, padding: int) -> np.ndarray:
    if padding:
        x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    kh, kw = weight.shape[2:]
    windows = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))
    windows = windows[:, :, ::stride, ::stride]  # n, c_in, oh, ow, kh, kw
    out = np.einsum("nchwij,ocij->nohw", windows, weight, optimize=True)
    if bias is not None:
        out = out + bias[None, :, None, None]
    return out


def _softmax(x: np.ndarray) -> np.ndarray:
    shifted = np.exp(x - x.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def apply_op_numpy(op, x: np.ndarray) -> np.ndarray:
    """One op on a float64 activation (float64 so the reference is the more exact side)."""
    if isinstance(op, Linear):
        out = x @ op.weight.T.astype(np.float64)
        return out + op.bias if op.bias is not None else out
    if isinstance(op, ReLU):
        return np.maximum(x, 0.0)
    if isinstance(op, Softmax):
        return _softmax(x)
    if isinstance(op, Exp):
        return np.exp(x)
    if isinstance(op, Conv2d):
        bias = None if op.bias is None else op.bias.astype(np.float64)
        return _conv2d(x, op.weight.astype(np.float64), bias, int(op.stride), int(op.padding))
    if isinstance(op, Add):
        return x + op.constant.astype(np.float64)
    if isinstance(op, Mul):
        return x * op.constant.astype(np.float64)
    if isinstance(op, Flatten):
        return x.reshape(x.shape[:op.start_dim] + (-1,))
    if isinstance(op, Reshape):
        return x.reshape(op.shape)
    raise TypeError(f"no reference for {type(op).__name__}")


def apply_op_ember(op, x: np.ndarray) -> np.ndarray:
    """One op on a float32 activation with ember's Python ops."""
    import ember

    if isinstance(op, Linear):
        out = ember.matmul(x, np.ascontiguousarray(op.weight.T))
        return ember.add(out, op.bias) if op.bias is not None else out
    if isinstance(op, ReLU):
        return ember.relu(x)
    if isinstance(op, Softmax):
        return ember.softmax(x, axis=-1)
    if isinstance(op, Exp):
        return ember.exp(x)
    if isinstance(op, Conv2d):
        return ember.conv2d(x, op.weight, op.bias, stride=int(op.stride), padding=int(op.padding))
    if isinstance(op, Add):
        return ember.add(x, op.constant)
    if isinstance(op, Mul):
        return ember.mul(x, op.constant)
    # Flatten and Reshape only relabel row-major data: nothing to compute.
    return apply_op_numpy(op, x)


BACKENDS = {"ember": (apply_op_ember, np.float32), "numpy": (apply_op_numpy, np.float64)}


def run_model(model: MobileModel, x, *, backend: str = "ember") -> np.ndarray:
    """Run `model` on x (shape model.input_shape) with `backend`; returns float32 like the runtime."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {sorted(BACKENDS)}, got {backend!r}")
    apply, dtype = BACKENDS[backend]
    activation = np.ascontiguousarray(np.asarray(x, dtype=dtype))
    if activation.shape != model.input_shape:
        raise ValueError(f"input has shape {activation.shape}, the model takes {model.input_shape}")
    for op in model.ops:
        activation = np.ascontiguousarray(apply(op, activation), dtype=dtype)
    return activation.astype(np.float32)


def run_reference(path: Union[str, os.PathLike], x, *, backend: str = "ember") -> np.ndarray:
    """Load the .elm file at `path` (validating it) and compute its output for x.

    backend "ember" uses ember's Python ops, "numpy" an independent float64 numpy version.
    """
    with open(path, "rb") as handle:
        model = decode(handle.read())
    return run_model(model, x, backend=backend)
