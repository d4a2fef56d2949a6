"""ember.fft: NumPy-compatible discrete Fourier transforms computed by libember.

Same signatures and results as numpy.fft (``n``, ``axis``, ``s``, ``axes``,
``norm`` in {"backward", "ortho", "forward"}). Transforms run in double precision;
float32 and complex64 inputs give complex64 (or float32 for the inverse real transforms)
outputs, as numpy >= 2 does, every other input complex128/float64.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from . import _C
from .profiler import record_op

__all__ = [
    "fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "fftn", "ifftn", "rfftn", "irfftn",
    "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift",
]



def _is_single(a: np.ndarray) -> bool:
    return a.dtype.char in "fF"  # float32, complex64


def _axis_index(axis: int, ndim: int) -> int:
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


def _to_last(a: np.ndarray, axis: int) -> np.ndarray:
    return a if axis == a.ndim - 1 else np.moveaxis(a, axis, -1)


def _from_last(a: np.ndarray, axis: int) -> np.ndarray:
    return a if axis == a.ndim - 1 else np.moveaxis(a, -1, axis)


def _scale(norm: Optional[str], n: int, forward: bool) -> float:
    if norm is None or norm == "backward":
        return 1.0 if forward else 1.0 / n
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    if norm == "forward":
        return 1.0 / n if forward else 1.0
    raise ValueError(f'Invalid norm value {norm!r}; should be "backward", "ortho" or "forward".')


def _check_n(n: int) -> int:
    n = int(n)
    if n < 1:
        raise ValueError(f"Invalid number of FFT data points ({n}) specified.")
    return n


def _resize(a: np.ndarray, n: int, axis: int) -> np.ndarray:
    """Truncate or zero-pad `a` to length n along axis."""
    have = a.shape[axis]
    if have == n:
        return a
    if have > n:
        index = [slice(None)] * a.ndim
        index[axis] = slice(0, n)
        return a[tuple(index)]
    shape = list(a.shape)
    shape[axis] = n
    padded = np.zeros(shape, dtype=a.dtype)
    index = [slice(None)] * a.ndim
    index[axis] = slice(0, have)
    padded[tuple(index)] = a
    return padded


def _c2c(a, n, axis: int, norm, forward: bool) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim == 0:
        raise ValueError("fft: input must have at least one dimension")
    single = _is_single(a)
    axis = _axis_index(axis, a.ndim)
    n = _check_n(a.shape[axis] if n is None else n)
    a = _resize(a, n, axis)
    # Own contiguous complex128 copy with the axis last; transformed in place.
    work = _to_last(a, axis).astype(np.complex128, order="C")
    _C.fft_c2c(work, work, forward, _scale(norm, n, forward))
    out = _from_last(work, axis)
    return out.astype(np.complex64) if single else out


def _r2c(a, n, axis: int, norm, forward: bool = True) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim == 0:
        raise ValueError("fft: input must have at least one dimension")
    if np.iscomplexobj(a):
        raise TypeError("rfft: input must be real")
    single = _is_single(a)
    axis = _axis_index(axis, a.ndim)
    n = _check_n(a.shape[axis] if n is None else n)
    a = _resize(a, n, axis)
    work = np.ascontiguousarray(_to_last(a, axis), dtype=np.float64)
    out = np.empty(work.shape[:-1] + (n // 2 + 1,), dtype=np.complex128)
    _C.fft_r2c(work, out, _scale(norm, n, forward))
    if not forward:  # ihfft: conjugate of the forward transform
        np.conjugate(out, out=out)
    out = _from_last(out, axis)
    return out.astype(np.complex64) if single else out


def _c2r(a, n, axis: int, norm, forward: bool = False) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim == 0:
        raise ValueError("fft: input must have at least one dimension")
    single = _is_single(a)
    axis = _axis_index(axis, a.ndim)
    if n is None:
        n = 2 * (a.shape[axis] - 1)
    n = _check_n(n)
    a = _resize(a, n // 2 + 1, axis)
    if forward:  # hfft: transform of a Hermitian signal = inverse of its conjugate
        work = np.ascontiguousarray(np.conjugate(_to_last(a, axis)), dtype=np.complex128)
    else:
        work = np.ascontiguousarray(_to_last(a, axis), dtype=np.complex128)
    out = np.empty(work.shape[:-1] + (n,), dtype=np.float64)
    _C.fft_c2r(work, out, _scale(norm, n, forward))
    out = _from_last(out, axis)
    return out.astype(np.float32) if single else out


@record_op("fft.fft")
def fft(a, n: Optional[int] = None, axis: int = -1, norm: Optional[str] = None) -> np.ndarray:
    """1-D discrete Fourier transform (numpy.fft.fft)."""
    return _c2c(a, n, axis, norm, True)


@record_op("fft.ifft")
def ifft(a, n: Optional[int] = None, axis: int = -1, norm: Optional[str] = None) -> np.ndarray:
    """1-D inverse discrete Fourier transform (numpy.fft.ifft)."""
    return _c2c(a, n, axis, norm, False)


@record_op("fft.rfft")
def rfft(a, n: Optional[int] = None, axis: int = -1, norm: Optional[str] = None) -> np.ndarray:
    """1-D transform of real input: the n//2+1 non-negative frequency terms."""
    return _r2c(a, n, axis, norm)


@record_op("fft.irfft")
def irfft(a, n: Optional[int] = None, axis: int = -1, norm: Optional[str] = None) -> np.ndarray:
    """Inverse of rfft; n defaults to 2*(m-1) for m input terms."""
    return _c2r(a, n, axis, norm)


@record_op("fft.hfft")
def hfft(a, n: Optional[int] = None, axis: int = -1, norm: Optional[str] = None) -> np.ndarray:
    """Transform of a signal with Hermitian symmetry (real spectrum), numpy.fft.hfft."""
    return _c2r(a, n, axis, norm, forward=True)


@record_op("fft.ihfft")
def ihfft(a, n: Optional[int] = None, axis: int = -1, norm: Optional[str] = None) -> np.ndarray:
    """Inverse of hfft (numpy.fft.ihfft)."""
    return _r2c(a, n, axis, norm, forward=False)


def _cook_nd(a: np.ndarray, s, axes, invreal: bool = False):
    """numpy's s/axes rules: default all axes, or the last len(s) axes when only s is given."""
    if axes is None:
        axes = list(range(-len(s), 0)) if s is not None else list(range(a.ndim))
    else:
        axes = [int(ax) for ax in axes]
    if s is None:
        s = [a.shape[ax] for ax in axes]
        if invreal:
            s[-1] = 2 * (a.shape[axes[-1]] - 1)
    else:
        s = list(s)
        if len(s) != len(axes):
            raise ValueError("Shape and axes have different lengths.")
        if invreal:
            s = [(2 * (a.shape[ax] - 1) if n is None or n == -1 else n) for n, ax in zip(s, axes)]
        else:
            s = [(a.shape[ax] if n is None or n == -1 else n) for n, ax in zip(s, axes)]
    return s, axes


def _c2c_nd(a, s, axes, norm, forward: bool) -> np.ndarray:
    a = np.asarray(a)
    s, axes = _cook_nd(a, s, axes)
    out = a
    for n, ax in reversed(list(zip(s, axes))):
        out = _c2c(out, n, ax, norm, forward)
    return out


@record_op("fft.fftn")
def fftn(a, s: Optional[Sequence[int]] = None, axes: Optional[Sequence[int]] = None,
         norm: Optional[str] = None) -> np.ndarray:
    """N-D discrete Fourier transform (numpy.fft.fftn)."""
    return _c2c_nd(a, s, axes, norm, True)


@record_op("fft.ifftn")
def ifftn(a, s: Optional[Sequence[int]] = None, axes: Optional[Sequence[int]] = None,
          norm: Optional[str] = None) -> np.ndarray:
    """N-D inverse discrete Fourier transform (numpy.fft.ifftn)."""
    return _c2c_nd(a, s, axes, norm, False)


@record_op("fft.fft2")
def fft2(a, s: Optional[Sequence[int]] = None, axes: Sequence[int] = (-2, -1),
         norm: Optional[str] = None) -> np.ndarray:
    """2-D discrete Fourier transform over `axes` (numpy.fft.fft2)."""
    return _c2c_nd(a, s, axes, norm, True)


@record_op("fft.ifft2")
def ifft2(a, s: Optional[Sequence[int]] = None, axes: Sequence[int] = (-2, -1),
          norm: Optional[str] = None) -> np.ndarray:
    """2-D inverse discrete Fourier transform over `axes` (numpy.fft.ifft2)."""
    return _c2c_nd(a, s, axes, norm, False)


@record_op("fft.rfftn")
def rfftn(a, s: Optional[Sequence[int]] = None, axes: Optional[Sequence[int]] = None,
          norm: Optional[str] = None) -> np.ndarray:
    """N-D transform of real input: rfft over the last axis, fft over the others."""
    a = np.asarray(a)
    s, axes = _cook_nd(a, s, axes)
    out = _r2c(a, s[-1], axes[-1], norm)
    for n, ax in reversed(list(zip(s[:-1], axes[:-1]))):
        out = _c2c(out, n, ax, norm, True)
    return out


@record_op("fft.irfftn")
def irfftn(a, s: Optional[Sequence[int]] = None, axes: Optional[Sequence[int]] = None,
           norm: Optional[str] = None) -> np.ndarray:
    """Inverse of rfftn: ifft over all but the last axis, irfft over the last."""
    a = np.asarray(a)
    s, axes = _cook_nd(a, s, axes, invreal=True)
    out = a
    for n, ax in zip(s[:-1], axes[:-1]):
        out = _c2c(out, n, ax, norm, False)
    return _c2r(out, s[-1], axes[-1], norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None) -> np.ndarray:
    """2-D rfftn."""
    return rfftn(a, s, axes, norm)


def irfft2(a, s=None, axes=(-2, -1), norm=None) -> np.ndarray:
    """2-D irfftn."""
    return irfftn(a, s, axes, norm)


def fftfreq(n: int, d: float = 1.0) -> np.ndarray:
    """Sample frequencies of an n-point fft with sample spacing d."""
    n = int(n)
    k = np.empty(n, dtype=np.int64)
    half = (n - 1) // 2 + 1
    k[:half] = np.arange(0, half)
    k[half:] = np.arange(-(n // 2), 0)
    return k * (1.0 / (n * d))


def rfftfreq(n: int, d: float = 1.0) -> np.ndarray:
    """Sample frequencies of an n-point rfft with sample spacing d."""
    n = int(n)
    return np.arange(0, n // 2 + 1, dtype=np.int64) * (1.0 / (n * d))


def _shift(x, axes, sign: int) -> np.ndarray:
    x = np.asarray(x)
    if axes is None:
        axes = tuple(range(x.ndim))
    elif isinstance(axes, (int, np.integer)):
        axes = (int(axes),)
    shifts = [sign * (x.shape[ax] // 2) for ax in axes]
    return np.roll(x, shifts, axes)


def fftshift(x, axes=None) -> np.ndarray:
    """Move the zero-frequency term to the centre."""
    return _shift(x, axes, 1)


def ifftshift(x, axes=None) -> np.ndarray:
    """Inverse of fftshift."""
    return _shift(x, axes, -1)
