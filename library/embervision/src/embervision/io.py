"""Reading and writing PNG and JPEG images as HWC numpy arrays.

Decoders return a 3-D array (H, W, C) with C in 1..4: uint8, or uint16 for 16-bit
PNGs. Encoders accept (H, W) or (H, W, C). Corrupt, truncated or unsupported data
raises ValueError naming the problem.
"""

import os
from typing import Optional, Union

import numpy as np

from . import _C

BytesLike = Union[bytes, bytearray, memoryview, np.ndarray]

# Refuse images above this many pixels unless the caller raises the limit: a
# 60-byte file can claim 65535 x 65535 pixels. max_pixels=None lifts the limit.
DEFAULT_MAX_PIXELS = 1 << 28


class ImageReadMode:
    """Channel layouts a decoder can produce (strings are accepted too)."""

    UNCHANGED = "unchanged"
    GRAY = "gray"
    GRAY_ALPHA = "gray_alpha"
    RGB = "rgb"
    RGBA = "rgba"


_MODE_CODES = {"unchanged": 0, "gray": 1, "gray_alpha": 2, "rgb": 3, "rgba": 4}


def _mode_code(mode: str) -> int:
    try:
        return _MODE_CODES[str(mode).lower()]
    except KeyError:
        raise ValueError(f"unknown image mode {mode!r}; expected one of {sorted(_MODE_CODES)}") from None


def _pixel_limit(max_pixels: Optional[int]) -> int:
    if max_pixels is None:
        return 0
    if int(max_pixels) < 1:
        raise ValueError(f"max_pixels must be positive or None, got {max_pixels}")
    return min(int(max_pixels), (1 << 64) - 1)  # larger limits are no limit


def _as_byte_buffer(data: BytesLike):
    if isinstance(data, np.ndarray):
        if data.dtype != np.uint8 or data.ndim != 1:
            raise TypeError("encoded image array must be 1-D uint8")
        return np.ascontiguousarray(data)
    if isinstance(data, (bytes, bytearray, memoryview)):
        return data
    raise TypeError(f"expected bytes or a 1-D uint8 array, got {type(data).__name__}")


def read_file(path: Union[str, os.PathLike]) -> bytes:
    """The raw bytes of a file."""
    with open(path, "rb") as f:
        return f.read()


def decode_png(data: BytesLike, mode: str = "unchanged", max_pixels: Optional[int] = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Decode PNG bytes to (H, W, C) uint8 or uint16; palettes expand to RGB(A)."""
    return np.asarray(_C.decode_png(_as_byte_buffer(data), _mode_code(mode), _pixel_limit(max_pixels)))


def decode_jpeg(data: BytesLike, mode: str = "unchanged", max_pixels: Optional[int] = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Decode JPEG bytes to (H, W, C) uint8 (C = 1 gray or 3 RGB unless mode says otherwise)."""
    return np.asarray(_C.decode_jpeg(_as_byte_buffer(data), _mode_code(mode), _pixel_limit(max_pixels)))


def decode_image(data: BytesLike, mode: str = "unchanged", max_pixels: Optional[int] = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Decode PNG or JPEG bytes, chosen by their signature."""
    buffer = _as_byte_buffer(data)
    head = bytes(memoryview(buffer)[:8])
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return decode_png(buffer, mode, max_pixels)
    if head.startswith(b"\xff\xd8\xff"):
        return decode_jpeg(buffer, mode, max_pixels)
    raise ValueError("unsupported image format: neither a PNG nor a JPEG signature")


def read_image(path: Union[str, os.PathLike], mode: str = "unchanged", max_pixels: Optional[int] = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Read a PNG or JPEG file into an (H, W, C) array."""
    return decode_image(read_file(path), mode, max_pixels)


def _as_hwc(array: np.ndarray, name: str) -> np.ndarray:
    array = np.asarray(array)
    if array.ndim == 2:
        array = array[:, :, None]
    if array.ndim != 3:
        raise ValueError(f"{name} expects an (H, W) or (H, W, C) array, got shape {array.shape}")
    return np.ascontiguousarray(array)


def encode_png(array: np.ndarray, compression_level: int = 6) -> bytes:
    """PNG bytes for a uint8 or uint16 image with 1 (gray), 2 (gray+alpha), 3 (RGB) or 4 (RGBA) channels."""
    array = _as_hwc(array, "encode_png")
    if not 0 <= int(compression_level) <= 9:
        raise ValueError(f"compression_level must be in 0..9, got {compression_level}")
    if array.dtype in (np.uint8, np.uint16):
        return _C.encode_png(array, int(compression_level))
    raise TypeError(f"encode_png needs uint8 or uint16 pixels, got {array.dtype}")


def encode_jpeg(array: np.ndarray, quality: int = 75) -> bytes:
    """JPEG bytes for a uint8 gray (1 channel) or RGB (3 channels) image."""
    array = _as_hwc(array, "encode_jpeg")
    if array.dtype != np.uint8:
        raise TypeError(f"encode_jpeg needs uint8 pixels, got {array.dtype}")
    if not 1 <= int(quality) <= 100:
        raise ValueError(f"quality must be in 1..100, got {quality}")
    return _C.encode_jpeg(array, int(quality))


def write_png(array: np.ndarray, path: Union[str, os.PathLike], compression_level: int = 6) -> None:
    """Encode to PNG and write the file."""
    data = encode_png(array, compression_level)
    with open(path, "wb") as f:
        f.write(data)


def write_jpeg(array: np.ndarray, path: Union[str, os.PathLike], quality: int = 75) -> None:
    """Encode to JPEG and write the file."""
    data = encode_jpeg(array, quality)
    with open(path, "wb") as f:
        f.write(data)
