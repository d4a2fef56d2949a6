"""Image transforms on (C, H, W) images and (N, C, H, W) batches.

Arrays are numpy, uint8, float32 or float64. Resize, crop, flip and normalize run
in native code (threads over the planes of a batch); resize, crops, flips, normalize
and convert_dtype also run on CUDA with ``device="cuda"`` in CUDA builds. A batch gives exactly the
same result as transforming its images one by one.

Resize geometry is Pillow's and torchvision's: pixel centres at i + 0.5
(align_corners=False). ``bilinear`` with ``antialias=True`` (the default) is
Pillow's BILINEAR filter, which widens the triangle filter when downscaling;
``antialias=False`` is torch's ``interpolate(mode="bilinear", align_corners=False)``.
``nearest`` picks input floor((o + 0.5) * in / out), like Pillow's NEAREST.
uint8 results are rounded after the horizontal and again after the vertical pass,
as Pillow does; they match Pillow to within 1 grey level.
"""

import numbers
from typing import Callable, Optional, Sequence, Tuple, Union

import numpy as np

from . import _C

Size = Union[int, Sequence[int]]

_INTERPOLATIONS = {"nearest": 0, "bilinear": 1}
_DTYPES = (np.dtype(np.uint8), np.dtype(np.float32), np.dtype(np.float64))


def _as_batch(x: np.ndarray) -> Tuple[np.ndarray, bool]:
    """(batch, was_single): a C-contiguous (N, C, H, W) view or copy of x."""
    x = np.asarray(x)
    if x.dtype not in _DTYPES:
        raise TypeError(f"expected a uint8, float32 or float64 array, got {x.dtype}")
    if x.ndim == 3:
        return np.ascontiguousarray(x[None]), True
    if x.ndim == 4:
        return np.ascontiguousarray(x), False
    raise ValueError(f"expected a (C, H, W) image or an (N, C, H, W) batch, got shape {x.shape}")


def _unbatch(y: np.ndarray, was_single: bool) -> np.ndarray:
    return y[0] if was_single else y


def _on_cuda(device: str) -> bool:
    """True for device="cuda" in a build with CUDA kernels; the core checks for a usable device."""
    if device == "cpu":
        return False
    if device == "cuda":
        if not _C.built_with_cuda:
            raise RuntimeError(
                f"device='cuda' requested but this embervision build ({_C.variant}) has no CUDA kernels"
            )
        return True
    raise ValueError(f"unknown device {device!r}; expected 'cpu' or 'cuda'")


def _empty_like_batch(batch: np.ndarray, height: int, width: int) -> np.ndarray:
    return np.empty((batch.shape[0], batch.shape[1], height, width), dtype=batch.dtype)


def _image_size(x: np.ndarray) -> Tuple[int, int]:
    return int(x.shape[-2]), int(x.shape[-1])


def _pair(size: Size, name: str) -> Tuple[int, int]:
    if isinstance(size, numbers.Integral):
        return int(size), int(size)
    size = tuple(int(s) for s in size)
    if len(size) == 1:
        return size[0], size[0]
    if len(size) != 2:
        raise ValueError(f"{name} size must be an int or (height, width), got {size}")
    return size


def resized_shape(height: int, width: int, size: Size) -> Tuple[int, int]:
    """Output (height, width): an int matches the shorter edge and keeps the aspect ratio."""
    if isinstance(size, numbers.Integral) or len(size) == 1:
        target = int(size if isinstance(size, numbers.Integral) else size[0])
        short, long = (width, height) if width <= height else (height, width)
        new_short, new_long = target, int(target * long / short)
        return (new_long, new_short) if width <= height else (new_short, new_long)
    return _pair(size, "resize")


def resize(x: np.ndarray, size: Size, interpolation: str = "bilinear", antialias: bool = True,
           device: str = "cpu") -> np.ndarray:
    """Resize the last two axes to `size` (int: shorter edge, or (height, width))."""
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"unknown interpolation {interpolation!r}; expected 'bilinear' or 'nearest'")
    batch, single = _as_batch(x)
    out_h, out_w = resized_shape(*_image_size(batch), size)
    if out_h < 1 or out_w < 1:
        raise ValueError(f"resize to {out_h}x{out_w} is empty")
    cuda = _on_cuda(device)
    out = _empty_like_batch(batch, out_h, out_w)
    _C.resize(batch, out, _INTERPOLATIONS[interpolation], bool(antialias), cuda)
    return _unbatch(out, single)


def crop(x: np.ndarray, top: int, left: int, height: int, width: int, device: str = "cpu") -> np.ndarray:
    """The window [top, top+height) x [left, left+width); parts outside the image are 0."""
    batch, single = _as_batch(x)
    if int(height) < 1 or int(width) < 1:
        raise ValueError("crop size must be positive")
    cuda = _on_cuda(device)
    out = _empty_like_batch(batch, int(height), int(width))
    _C.crop(batch, out, int(top), int(left), cuda)
    return _unbatch(out, single)


def center_crop(x: np.ndarray, size: Size, device: str = "cpu") -> np.ndarray:
    """Central (height, width) window, torchvision's rounding; zero-padded if larger than the image."""
    h, w = _image_size(np.asarray(x))
    th, tw = _pair(size, "center_crop")
    top = int(round((h - th) / 2.0))
    left = int(round((w - tw) / 2.0))
    return crop(x, top, left, th, tw, device)


def random_crop(x: np.ndarray, size: Size, rng: Union[np.random.Generator, int, None] = None,
                device: str = "cpu") -> np.ndarray:
    """A uniformly placed (height, width) window drawn from `rng` (a Generator or a seed).

    A batch gets one window for all its images.
    """
    rng = np.random.default_rng(rng)
    h, w = _image_size(np.asarray(x))
    th, tw = _pair(size, "random_crop")
    if th > h or tw > w:
        raise ValueError(f"random_crop size {(th, tw)} is larger than the image {(h, w)}")
    top = int(rng.integers(0, h - th + 1))
    left = int(rng.integers(0, w - tw + 1))
    return crop(x, top, left, th, tw, device)


def _flip(x: np.ndarray, horizontal: bool, device: str) -> np.ndarray:
    batch, single = _as_batch(x)
    cuda = _on_cuda(device)
    out = np.empty_like(batch)
    _C.flip(batch, out, horizontal, cuda)
    return _unbatch(out, single)


def hflip(x: np.ndarray, device: str = "cpu") -> np.ndarray:
    """Mirror left-right."""
    return _flip(x, True, device)


def vflip(x: np.ndarray, device: str = "cpu") -> np.ndarray:
    """Mirror top-bottom."""
    return _flip(x, False, device)


def normalize(x: np.ndarray, mean: Sequence[float], std: Sequence[float], device: str = "cpu") -> np.ndarray:
    """(x - mean[c]) / std[c] per channel, in the input's float dtype."""
    batch, single = _as_batch(x)
    if batch.dtype == np.uint8:
        raise TypeError("normalize needs a float image; use convert_dtype(x, np.float32) first")
    channels = batch.shape[1]
    mean = np.ascontiguousarray(np.broadcast_to(np.asarray(mean, dtype=np.float64), (channels,)))
    std = np.ascontiguousarray(np.broadcast_to(np.asarray(std, dtype=np.float64), (channels,)))
    cuda = _on_cuda(device)
    out = np.empty_like(batch)
    _C.normalize(batch, out, mean, std, cuda)
    return _unbatch(out, single)


def convert_dtype(x: np.ndarray, dtype=np.float32, device: str = "cpu") -> np.ndarray:
    """Change dtype and rescale as torchvision's convert_image_dtype.

    Integers map [0, max] <-> floats [0, 1]; float -> integer multiplies by
    (max + 1 - 0.001) and truncates, so 1.0 maps to max and the bins are even.
    On the CPU any integer or float dtype; with device="cuda" uint8, float32 and float64
    (float values outside [0, 1] saturate there when converted to uint8).
    """
    x = np.asarray(x)
    dtype = np.dtype(dtype)
    if _on_cuda(device):
        for kind in (x.dtype, dtype):
            if kind not in _DTYPES:
                raise TypeError(f"convert_dtype on device='cuda' takes uint8, float32 or float64, got {kind}")
        out = np.empty(x.shape, dtype=dtype)
        _C.convert_dtype(np.ascontiguousarray(x), out, True)
        return out
    if x.dtype == dtype:
        return x.copy()
    src_int = np.issubdtype(x.dtype, np.integer)
    dst_int = np.issubdtype(dtype, np.integer)
    if src_int and not dst_int:
        return (x.astype(dtype) / dtype.type(np.iinfo(x.dtype).max)).astype(dtype)
    if not src_int and dst_int:
        scale = np.iinfo(dtype).max + 1.0 - 1e-3
        return (x * scale).astype(dtype)
    if src_int and dst_int:
        src_max, dst_max = np.iinfo(x.dtype).max, np.iinfo(dtype).max
        if src_max > dst_max:
            factor = (src_max + 1) // (dst_max + 1)
            return (x // factor).astype(dtype)
        factor = (dst_max + 1) // (src_max + 1)
        return (x.astype(dtype) * factor).astype(dtype)
    return x.astype(dtype)


def to_chw(image: np.ndarray) -> np.ndarray:
    """(H, W) or (H, W, C) -> (C, H, W); also (N, H, W, C) -> (N, C, H, W)."""
    image = np.asarray(image)
    if image.ndim == 2:
        return np.ascontiguousarray(image[None])
    if image.ndim == 3:
        return np.ascontiguousarray(image.transpose(2, 0, 1))
    if image.ndim == 4:
        return np.ascontiguousarray(image.transpose(0, 3, 1, 2))
    raise ValueError(f"expected 2-4 dimensions, got shape {image.shape}")


def to_hwc(image: np.ndarray) -> np.ndarray:
    """(C, H, W) -> (H, W, C); (N, C, H, W) -> (N, H, W, C)."""
    image = np.asarray(image)
    if image.ndim == 3:
        return np.ascontiguousarray(image.transpose(1, 2, 0))
    if image.ndim == 4:
        return np.ascontiguousarray(image.transpose(0, 2, 3, 1))
    raise ValueError(f"expected 3 or 4 dimensions, got shape {image.shape}")


class Compose:
    """Apply callables in order: Compose([f, g])(x) == g(f(x))."""

    def __init__(self, transforms: Sequence[Callable]):
        self.transforms = list(transforms)

    def __call__(self, x):
        for transform in self.transforms:
            x = transform(x)
        return x

    def __repr__(self) -> str:
        inner = ", ".join(repr(t) for t in self.transforms)
        return f"Compose([{inner}])"


class Resize:
    """Callable form of resize()."""

    def __init__(self, size: Size, interpolation: str = "bilinear", antialias: bool = True, device: str = "cpu"):
        self.size, self.interpolation, self.antialias, self.device = size, interpolation, antialias, device

    def __call__(self, x):
        return resize(x, self.size, self.interpolation, self.antialias, self.device)

    def __repr__(self) -> str:
        return f"Resize(size={self.size!r}, interpolation={self.interpolation!r}, antialias={self.antialias})"


class CenterCrop:
    """Callable form of center_crop()."""

    def __init__(self, size: Size, device: str = "cpu"):
        self.size, self.device = size, device

    def __call__(self, x):
        return center_crop(x, self.size, self.device)

    def __repr__(self) -> str:
        return f"CenterCrop(size={self.size!r})"


class RandomCrop:
    """Callable form of random_crop(); draws from its own seeded Generator."""

    def __init__(self, size: Size, rng: Union[np.random.Generator, int, None] = None, device: str = "cpu"):
        self.size = size
        self.rng = np.random.default_rng(rng)
        self.device = device

    def __call__(self, x):
        return random_crop(x, self.size, self.rng, self.device)

    def __repr__(self) -> str:
        return f"RandomCrop(size={self.size!r})"


class RandomHorizontalFlip:
    """Mirror left-right with probability p, drawn from a seeded Generator."""

    def __init__(self, p: float = 0.5, rng: Union[np.random.Generator, int, None] = None, device: str = "cpu"):
        self.p = p
        self.rng = np.random.default_rng(rng)
        self.device = device

    def __call__(self, x):
        return hflip(x, self.device) if self.rng.random() < self.p else np.array(x, copy=True)

    def __repr__(self) -> str:
        return f"RandomHorizontalFlip(p={self.p})"


class Normalize:
    """Callable form of normalize()."""

    def __init__(self, mean: Sequence[float], std: Sequence[float], device: str = "cpu"):
        self.mean, self.std, self.device = mean, std, device

    def __call__(self, x):
        return normalize(x, self.mean, self.std, self.device)

    def __repr__(self) -> str:
        return f"Normalize(mean={self.mean!r}, std={self.std!r})"


class ConvertDtype:
    """Callable form of convert_dtype()."""

    def __init__(self, dtype=np.float32, device: str = "cpu"):
        self.dtype = np.dtype(dtype)
        self.device = device

    def __call__(self, x):
        return convert_dtype(x, self.dtype, self.device)

    def __repr__(self) -> str:
        return f"ConvertDtype({self.dtype})"


class ToCHW:
    """Callable form of to_chw(), to feed decoded HWC images into the transforms."""

    def __call__(self, x):
        return to_chw(x)

    def __repr__(self) -> str:
        return "ToCHW()"


__all__ = [
    "CenterCrop", "Compose", "ConvertDtype", "Normalize", "RandomCrop", "RandomHorizontalFlip",
    "Resize", "ToCHW", "center_crop", "convert_dtype", "crop", "hflip", "normalize",
    "random_crop", "resize", "resized_shape", "to_chw", "to_hwc", "vflip",
]
