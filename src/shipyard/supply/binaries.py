"""The binaries inside an artifact, as an SBOM and `shipyard verify` count them: every shared
library by its name (`*.so`, `*.so.*`) and every ELF file by its first bytes, wherever it lies;
and the libraries each links (DT_NEEDED, its dynamic section)."""

from __future__ import annotations

import io
import re
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile

ELF_MAGIC = b"\x7fELF"
_SHARED_LIBRARY_NAME = re.compile(r"\.so(\.|$)")


def is_binary(name: str, data: bytes) -> bool:
    """A shared library by its name, or any ELF file (a library renamed, a program)."""
    return bool(_SHARED_LIBRARY_NAME.search(PurePosixPath(name).name)) or data[:4] == ELF_MAGIC


def wheel_binaries(zf: zipfile.ZipFile) -> dict[str, bytes]:
    """{member: bytes} of every binary in a wheel."""
    found = {}
    for info in zf.infolist():
        if not info.is_dir() and is_binary(info.filename, data := zf.read(info)):
            found[info.filename] = data
    return found


def conda_files(package: Path, section: str) -> dict[str, bytes]:
    """{path: bytes} of every regular file in one section of a .conda package: "info" (its
    info/ metadata: about.json, index.json, the SBOM) or "pkg" (what it installs)."""
    import zstandard

    files = {}
    with zipfile.ZipFile(package) as zf:
        for name in (n for n in zf.namelist() if n.startswith(f"{section}-") and n.endswith(".tar.zst")):
            with zf.open(name) as source, zstandard.ZstdDecompressor().stream_reader(source) as reader, \
                    tarfile.open(fileobj=reader, mode="r|") as tar:
                for member in tar:
                    handle = tar.extractfile(member) if member.isfile() else None
                    if handle is not None:
                        files[member.name] = handle.read()
    return files


def conda_binaries(package: Path) -> dict[str, bytes]:
    """{path: bytes} of every binary a .conda package installs."""
    return {name: data for name, data in conda_files(package, "pkg").items() if is_binary(name, data)}


def archive_files(tar: tarfile.TarFile) -> dict[str, bytes]:
    """{path below the archive's top folder: bytes} of every regular file of a tarball with one
    top folder (`ember-lite-1.7.0-host/lib/…` -> `lib/…`)."""
    files = {}
    for member in tar:
        handle = tar.extractfile(member) if member.isfile() else None
        if handle is not None:
            files[PurePosixPath(*PurePosixPath(member.name).parts[1:]).as_posix()] = handle.read()
    return files


def needed_libraries(data: bytes) -> list[str]:
    """The DT_NEEDED entries of an ELF file ([] for one without a dynamic section, or no ELF)."""
    if data[:4] != ELF_MAGIC:
        return []
    try:
        elf = ELFFile(io.BytesIO(data))
        tags = [tag for section in elf.iter_sections() if isinstance(section, DynamicSection)
                for tag in section.iter_tags() if tag.entry.d_tag == "DT_NEEDED"]
        return [str(tag.needed) for tag in tags]  # type: ignore[attr-defined]
    except ELFError:
        return []


def soname(data: bytes) -> str | None:
    """The DT_SONAME of an ELF shared library, or None."""
    if data[:4] != ELF_MAGIC:
        return None
    try:
        for section in ELFFile(io.BytesIO(data)).iter_sections():
            if isinstance(section, DynamicSection):
                for tag in section.iter_tags():
                    if tag.entry.d_tag == "DT_SONAME":
                        return str(tag.soname)  # type: ignore[attr-defined]
    except ELFError:
        return None
    return None


def linked_from_outside(binaries: dict[str, bytes]) -> list[str]:
    """What the binaries of one artifact link (DT_NEEDED) that the artifact does not hold itself
    (by file name or soname): the libraries the system must provide."""
    inside = {PurePosixPath(path).name for path in binaries} | {s for data in binaries.values() if (s := soname(data))}
    needed = {lib for data in binaries.values() for lib in needed_libraries(data)}
    return sorted(needed - inside)
