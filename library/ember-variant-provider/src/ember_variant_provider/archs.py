"""Which device code a GPU runs, and which CUDA runtimes a driver runs.

NVIDIA's compatibility rules, as `cuobjdump` names the code a binary carries:
- SASS `sm_XY` runs on a GPU of the same major X and a minor at least Y (sm_80 on 8.0, 8.6, 8.9;
  never on 9.0 or 7.5).
- PTX `compute_XY` is compiled by the driver for any GPU of compute capability X.Y or newer, when
  the driver is at least as new as the toolkit that wrote it (the runtime check below).
- A CUDA runtime X.Y needs a driver that supports CUDA X.Y or newer.
"""

from __future__ import annotations

# Every compute capability NVIDIA has shipped or may name: the values a variant may carry.
_MAJORS = range(2, 13)
_MINORS = range(0, 10)
# CUDA runtimes a variant may be built with.
_RUNTIME_MAJORS = range(7, 14)


def sass(major: int, minor: int) -> str:
    return f"sm_{major}{minor}"


def ptx(major: int, minor: int) -> str:
    return f"compute_{major}{minor}"


def all_arch_values() -> list[str]:
    return [make(m, n) for make in (sass, ptx) for m in _MAJORS for n in _MINORS]


def runnable_archs(cc: tuple[int, int]) -> list[str]:
    """The device code a GPU of compute capability `cc` runs, most preferred first: its own SASS,
    SASS of the same major and a lower minor (newest first), then PTX, newest first (JIT costs
    start-up time and gives up the tuned SASS)."""
    major, minor = cc
    native = [sass(major, n) for n in range(minor, -1, -1)]
    jit = [ptx(m, n) for m in reversed(_MAJORS) for n in reversed(_MINORS) if (m, n) <= cc]
    return native + jit


def runtime_value(major: int, minor: int) -> str:
    return f"{major}.{minor}"


def all_runtime_values() -> list[str]:
    return [runtime_value(m, n) for m in reversed(_RUNTIME_MAJORS) for n in reversed(_MINORS)]


def runnable_runtimes(driver: tuple[int, int]) -> list[str]:
    """The CUDA runtimes a driver supporting CUDA `driver` runs, newest first."""
    return [runtime_value(m, n) for m in reversed(_RUNTIME_MAJORS) for n in reversed(_MINORS) if (m, n) <= driver]


def arch_runs_on(arch: str, cc: tuple[int, int]) -> bool:
    return arch in runnable_archs(cc)
