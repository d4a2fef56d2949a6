"""ember: CPU and CUDA kernels on NumPy arrays, ember.fft, deterministic algorithms, an op
profiler and a C++ API (libember), modelled on the PyTorch 1.7 release."""

from __future__ import annotations

from . import _C
from . import cuda, fft, profiler
from ._metadata import build_info, cmake_prefix_path, features, package_version
from .ops import (
    add, conv1d, conv2d, div, exp, index_add, log, matmul, max, mean, mul, relu, sigmoid,
    softmax, sub, sum, tanh,
)

__version__ = package_version()

__all__ = [
    "add", "sub", "mul", "div", "relu", "exp", "log", "tanh", "sigmoid",
    "sum", "mean", "max", "matmul", "softmax", "conv1d", "conv2d", "index_add",
    "set_num_threads", "get_num_threads", "set_deterministic", "is_deterministic",
    "build_info", "features", "cmake_prefix_path", "cuda", "fft", "profiler",
]


def set_num_threads(n: int) -> None:
    """Threads used by ember's CPU kernels (default: EMBER_NUM_THREADS or all cores)."""
    if int(n) < 1:
        raise ValueError("set_num_threads: n must be >= 1")
    _C.set_num_threads(int(n))


def get_num_threads() -> int:
    """Threads used by ember's CPU kernels."""
    return int(_C.get_num_threads())


def set_deterministic(flag: bool) -> None:
    """Use deterministic algorithms only: reductions take a fixed combine order, and ops
    without a deterministic implementation (index_add) raise RuntimeError."""
    _C.set_deterministic(bool(flag))


def is_deterministic() -> bool:
    """Whether set_deterministic(True) is in force."""
    return bool(_C.is_deterministic())
