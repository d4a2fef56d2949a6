"""Which glibc a binary needs, read from its ELF symbol versions (GLIBC_2.17, GLIBC_2.34 …).

A manylinux_2_31 wheel promises to load on glibc 2.31: everything it carries, the CUDA runtime
it vendors included, must need no newer symbol version. The compilers and toolkits that make it
are held to the same reading here (toolchains.resolve, the doctor).
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

# The toolkit programs nvcc runs to compile (a builder image must be able to run each).
_CUDA_TOOLS = ("bin/nvcc", "bin/ptxas", "bin/fatbinary", "bin/nvlink", "bin/cudafe++", "nvvm/bin/cicc")


def glibc_tuple(version: str) -> tuple[int, ...]:
    """'2.31' -> (2, 31), for comparing glibc versions."""
    return tuple(int(p) for p in version.split("."))


def host_glibc() -> str:
    """The glibc this host's own compilers link against ('2.36'), '' where there is none."""
    try:
        found = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        return ""
    return found.split()[-1] if found.startswith("glibc ") else ""


def glibc_required(binary: Path) -> str:
    """The newest GLIBC_x.y symbol version an ELF file needs ('2.17'); '' when it needs none."""
    return symbol_version_required(binary, "GLIBC")


def symbol_version_required(binary: Path, library: str) -> str:
    """The newest `library`_x.y symbol version an ELF file needs: GLIBC ('2.17'), GLIBCXX ('3.4.30'),
    CXXABI; '' when it needs none."""
    stat = binary.stat()
    return _version_required(binary.resolve(), library,
                             (stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns))


# Reading a toolkit's ELF files takes a tenth of a second each, and the report and the doctor
# resolve every CUDA cell (each reading the same toolkit): read each file once per process,
# again when it changes (the stat is part of the key).
@functools.lru_cache(maxsize=1024)
def _version_required(binary: Path, library: str, _stat: tuple[int, ...]) -> str:
    newest: tuple[int, ...] = ()
    with binary.open("rb") as fh:
        try:
            section = ELFFile(fh).get_section_by_name(".gnu.version_r")
        except ELFError:
            return ""  # a script (Debian's nvcc wrapper) or not an ELF file
        if section is None:
            return ""
        for _needed, auxiliaries in section.iter_versions():  # type: ignore[attr-defined]
            for aux in auxiliaries:
                match = re.fullmatch(rf"{re.escape(library)}_(\d+(?:\.\d+)+)", aux.name)
                if match:
                    newest = max(newest, glibc_tuple(match.group(1)))
    return ".".join(map(str, newest))


@dataclass(frozen=True)
class ToolkitGlibc:
    """The newest glibc a CUDA toolkit's runtime library and its compiler programs need."""

    runtime: str  # what the vendored libcudart needs: the wheels' users must have it
    runtime_library: str
    tools: str  # what nvcc and the programs it runs need: the builder must have it
    tool: str


def toolkit_glibc(root: Path) -> ToolkitGlibc:
    """Read the CUDA toolkit at `root` (lib64/libcudart.so.*, bin/nvcc, nvvm/bin/cicc, …)."""
    def newest(paths: list[Path]) -> tuple[str, str]:
        found = [(glibc_required(p), p.name) for p in paths]
        found = [f for f in found if f[0]]
        return max(found, key=lambda f: glibc_tuple(f[0])) if found else ("", "")

    runtimes = [p for p in sorted((root / "lib64").glob("libcudart.so.*")) if p.is_file() and not p.is_symlink()]
    tools = [root / t for t in _CUDA_TOOLS if (root / t).is_file()]
    return ToolkitGlibc(*newest(runtimes), *newest(tools))
