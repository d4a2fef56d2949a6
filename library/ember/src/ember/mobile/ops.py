"""The ops an ember-lite model is made of: a chain applied to one float32 activation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence, Tuple

import numpy as np


def _f32(array, name: str) -> np.ndarray:
    out = np.ascontiguousarray(np.asarray(array, dtype=np.float32))
    if out.ndim < 1 or out.ndim > 6:
        raise ValueError(f"{name} must have rank 1..6, has {out.ndim}")
    return out


@dataclass(frozen=True, eq=False)
class Linear:
    """y = x @ weight.T + bias, weight [out_features, in_features] (ember/torch layout)."""

    weight: np.ndarray
    bias: Optional[np.ndarray] = None

    def __post_init__(self):
        object.__setattr__(self, "weight", _f32(self.weight, "Linear.weight"))
        if self.weight.ndim != 2:
            raise ValueError("Linear.weight must be 2-D [out_features, in_features]")
        if self.bias is not None:
            object.__setattr__(self, "bias", _f32(self.bias, "Linear.bias"))
            if self.bias.shape != (self.weight.shape[0],):
                raise ValueError(f"Linear.bias must have shape ({self.weight.shape[0]},)")


@dataclass(frozen=True, eq=False)
class Conv2d:
    """NCHW convolution, weight [c_out, c_in, kh, kw], optional bias [c_out]."""

    weight: np.ndarray
    bias: Optional[np.ndarray] = None
    stride: int = 1
    padding: int = 0

    def __post_init__(self):
        object.__setattr__(self, "weight", _f32(self.weight, "Conv2d.weight"))
        if self.weight.ndim != 4:
            raise ValueError("Conv2d.weight must be 4-D [c_out, c_in, kh, kw]")
        if self.bias is not None:
            object.__setattr__(self, "bias", _f32(self.bias, "Conv2d.bias"))
            if self.bias.shape != (self.weight.shape[0],):
                raise ValueError(f"Conv2d.bias must have shape ({self.weight.shape[0]},)")
        if int(self.stride) < 1 or int(self.padding) < 0:
            raise ValueError("Conv2d needs stride >= 1 and padding >= 0")


@dataclass(frozen=True)
class ReLU:
    """max(x, 0)."""


@dataclass(frozen=True)
class Softmax:
    """Softmax along the last axis."""


@dataclass(frozen=True)
class Exp:
    """Elementwise exp."""


@dataclass(frozen=True, eq=False)
class Add:
    """x + constant; constant has the activation's shape or one sample's (batch dropped)."""

    constant: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "constant", _f32(self.constant, "Add.constant"))


@dataclass(frozen=True, eq=False)
class Mul:
    """x * constant, broadcast like Add."""

    constant: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "constant", _f32(self.constant, "Mul.constant"))


@dataclass(frozen=True)
class Flatten:
    """Merge dims start_dim.. into one."""

    start_dim: int = 1


@dataclass(frozen=True)
class Reshape:
    """Reshape to `shape` (full shape, batch included; one dim may be -1)."""

    shape: Tuple[int, ...] = field(default=())

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        if not 1 <= len(self.shape) <= 6:
            raise ValueError("Reshape.shape must have 1..6 dims")


Op = object  # any of the classes above


@dataclass(frozen=True, eq=False)
class MobileModel:
    """A fixed input shape and the chain of ops applied to it."""

    input_shape: Tuple[int, ...]
    ops: Tuple[Op, ...]

    def __init__(self, input_shape: Sequence[int], ops: Sequence[Op]):
        object.__setattr__(self, "input_shape", tuple(int(d) for d in input_shape))
        object.__setattr__(self, "ops", tuple(ops))
        if not 1 <= len(self.input_shape) <= 6 or any(d < 1 for d in self.input_shape):
            raise ValueError(f"input_shape must have 1..6 positive dims, got {self.input_shape}")
        if not self.ops:
            raise ValueError("a model needs at least one op")
