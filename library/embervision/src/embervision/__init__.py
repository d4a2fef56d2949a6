"""embervision: native PNG/JPEG image IO and image transforms for ember."""

import json as _json
from pathlib import Path as _Path

from . import _C, transforms
from .io import (
    ImageReadMode,
    decode_image,
    decode_jpeg,
    decode_png,
    encode_jpeg,
    encode_png,
    read_file,
    read_image,
    write_jpeg,
    write_png,
)

__all__ = [
    "ImageReadMode",
    "build_info",
    "cuda_available",
    "decode_image",
    "decode_jpeg",
    "decode_png",
    "encode_jpeg",
    "encode_png",
    "read_file",
    "read_image",
    "transforms",
    "write_jpeg",
    "write_png",
]


def cuda_available() -> bool:
    """True when this build has CUDA kernels and a CUDA device is usable."""
    return bool(_C.built_with_cuda) and _C.cuda_device_count() > 0


def build_info() -> dict:
    """How this copy was built: shipyard's _build_info.json if present, plus codec versions."""
    info = {"variant": _C.variant, "built_with_cuda": bool(_C.built_with_cuda)}
    stamped = _Path(__file__).with_name("_build_info.json")
    if stamped.is_file():
        info.update(_json.loads(stamped.read_text(encoding="utf-8")))
    info["libpng"] = _C.libpng_version()
    info["libjpeg"] = _C.libjpeg_version()
    return info


def _package_version() -> str:
    """The version shipyard stamped (a nightly's development version), else the installed distribution's."""
    import importlib.metadata

    stamped = build_info().get("version")
    if stamped:
        return str(stamped)
    try:
        return importlib.metadata.version("embervision")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


__version__ = _package_version()
