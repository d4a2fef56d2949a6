"""GPU architecture lists: parsing `TORCH_CUDA_ARCH_LIST`-style strings and what each toolkit supports."""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources


@cache
def supported_archs() -> dict[str, tuple[str, ...]]:
    """CUDA version -> the archs its nvcc compiles SASS for (resources/cuda_archs.toml)."""
    text = resources.files("shipyard.resources").joinpath("cuda_archs.toml").read_text()
    return {version: tuple(archs) for version, archs in tomllib.loads(text)["toolkits"].items()}


def parse_arch_list(text: str) -> tuple[str, ...]:
    """'3.7;5.0 8.6' -> ('3.7', '5.0', '8.6'); separators are ';', ',' or spaces."""
    return tuple(part for part in text.replace(",", ";").replace(" ", ";").split(";") if part)


def sm_name(arch: str) -> str:
    """'8.6' -> 'sm_86'."""
    major, minor = arch.split(".")
    return f"sm_{major}{minor}"


def gencode_flags(archs: tuple[str, ...]) -> list[str]:
    """nvcc flags for SASS of exactly these archs (no PTX)."""
    flags = []
    for arch in archs:
        digits = arch.replace(".", "")
        flags += ["-gencode", f"arch=compute_{digits},code=sm_{digits}"]
    return flags
