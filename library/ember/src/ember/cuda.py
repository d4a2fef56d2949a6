"""ember.cuda: the CUDA backend's state. Importing ember never needs a driver or a GPU;
ops take ``device="cuda"`` and raise RuntimeError when CUDA cannot be used."""

from __future__ import annotations

from typing import List

from . import _C

__all__ = ["is_available", "compiled_with_cuda", "arch_list", "device_count", "require_device"]


def compiled_with_cuda() -> bool:
    """True when this build of ember contains CUDA kernels."""
    return bool(_C.cuda_compiled())


def arch_list() -> List[str]:
    """The GPU architectures compiled in, e.g. ``["sm_75", "sm_80"]``; ``[]`` on CPU builds."""
    return list(_C.cuda_arch_list())


def device_count() -> int:
    """Number of usable CUDA devices (0 without a driver or GPU)."""
    return int(_C.cuda_device_count())


def is_available() -> bool:
    """True when ember was built with CUDA and a device can be used now."""
    return bool(_C.cuda_is_available())


def require_device() -> None:
    """Raise RuntimeError saying why device='cuda' cannot be used, if it cannot."""
    if not compiled_with_cuda():
        raise RuntimeError(
            "device='cuda' requested, but this ember build has no CUDA support (CPU build); "
            "install a CUDA variant of ember (e.g. 1.7.0+cu118)")
    if not is_available():
        raise RuntimeError(f"device='cuda' requested, but no CUDA device is usable: "
                           f"{_C.cuda_unavailable_reason()}")
