"""GPU architecture lists: parsing `TORCH_CUDA_ARCH_LIST`-style strings and what each toolkit supports."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
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


def ptx_arch(archs: tuple[str, ...]) -> str:
    """The arch whose PTX a build embeds besides the SASS: the highest of the list ('9.0').

    This is the implicit form of PyTorch's `8.6+PTX`: release.yaml lists SASS archs only,
    and a GPU newer than all of them JIT-compiles this PTX (library/README.md).
    """
    if not archs:
        raise ValueError("an empty arch list has no highest arch to embed PTX for")
    return max(archs, key=lambda arch: tuple(int(part) for part in arch.split(".")))


def gencode_flags(archs: tuple[str, ...], ptx: bool = False) -> list[str]:
    """nvcc flags for SASS of exactly these archs, and with `ptx` the PTX of the highest one."""
    flags = []
    for arch in archs:
        digits = arch.replace(".", "")
        flags += ["-gencode", f"arch=compute_{digits},code=sm_{digits}"]
    if ptx:
        digits = ptx_arch(archs).replace(".", "")
        flags += ["-gencode", f"arch=compute_{digits},code=compute_{digits}"]
    return flags


@dataclass(frozen=True)
class DeviceCode:
    """What a binary's fatbins hold, as cuobjdump names it: SASS {'sm_80'} and PTX {'sm_90'}."""

    sass: frozenset[str] = frozenset()
    ptx: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.sass or self.ptx)

    def __or__(self, other: DeviceCode) -> DeviceCode:
        return DeviceCode(self.sass | other.sass, self.ptx | other.ptx)


def expected_device_code(archs: tuple[str, ...]) -> DeviceCode:
    """The release rule for an arch list: SASS for each arch, PTX for the highest only."""
    return DeviceCode(frozenset(sm_name(a) for a in archs), frozenset({sm_name(ptx_arch(archs))}))
