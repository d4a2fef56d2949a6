"""A conda package checked file by file against its own `info/paths.json`: every file it would
install is listed there with the same sha256 and size, every listed path is in it, nothing else.

The payload of a `.conda` is `pkg-*.tar.zst` (info/ is its own `info-*.tar.zst`); a `.tar.bz2`
holds both in one tar. A soft link is listed with the length of its target as its size and
(rattler-build, conda-build) the sha256 of the file it points to; a `directory` entry is an
empty folder the package creates.
"""

from __future__ import annotations

import io
import json
import posixpath
import tarfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import zstandard

from shipyard.plumbing.hashing import sha256_hex

PATHS_JSON = "info/paths.json"


@dataclass(frozen=True)
class _Entry:
    kind: str  # file | softlink | directory
    size: int
    sha256: str  # of the file; of the file a link points to ("" when it points outside the package)
    link: str = ""


@contextmanager
def _tars(package: Path) -> Iterator[list[tarfile.TarFile]]:
    """The package's tar streams: (info, payload) of a .conda, the one tar of a .tar.bz2."""
    if package.name.endswith(".tar.bz2"):
        with tarfile.open(package, "r:bz2") as tar:
            yield [tar]
        return
    with zipfile.ZipFile(package) as zf:
        names = sorted(n for n in zf.namelist() if n.endswith(".tar.zst") and n.startswith(("info-", "pkg-")))
        tars = []
        for name in names:
            with zf.open(name) as source:
                plain = zstandard.ZstdDecompressor().decompressobj().decompress(source.read())
            tars.append(tarfile.open(fileobj=io.BytesIO(plain), mode="r:"))
        try:
            yield tars
        finally:
            for tar in tars:
                tar.close()


def _contents(package: Path) -> tuple[dict[str, _Entry], bytes | None]:
    """{path: entry} of everything the package would install (not info/), and its paths.json."""
    entries: dict[str, _Entry] = {}
    paths_json = None
    with _tars(package) as tars:
        for tar in tars:
            for member in tar:
                name = posixpath.normpath(member.name.removeprefix("./"))
                if name == PATHS_JSON and member.isfile():
                    paths_json = tar.extractfile(member).read()  # type: ignore[union-attr]
                if name == "info" or name.startswith("info/"):
                    continue
                if member.isfile():
                    data = tar.extractfile(member).read()  # type: ignore[union-attr]
                    entries[name] = _Entry("file", len(data), sha256_hex(data))
                elif member.issym():
                    entries[name] = _Entry("softlink", len(member.linkname.encode()), "", member.linkname)
                elif member.isdir():
                    entries[name] = _Entry("directory", 0, "")
    for name, entry in entries.items():  # a link carries the sha256 of the file it points to, if inside
        if entry.kind == "softlink":
            target = entries.get(posixpath.normpath(posixpath.join(posixpath.dirname(name), entry.link)))
            if target is not None and target.kind == "file":
                entries[name] = _Entry("softlink", entry.size, target.sha256, entry.link)
    return entries, paths_json


def check_conda_paths(package: Path) -> list[str]:
    """What differs between a conda package's files and its info/paths.json (empty: nothing)."""
    try:
        entries, raw = _contents(package)
    except (OSError, tarfile.TarError, zipfile.BadZipFile, zstandard.ZstdError) as exc:
        return [f"{package.name} cannot be read as a conda package ({type(exc).__name__}: {exc})"]
    if raw is None:
        return [f"no {PATHS_JSON} in the package"]
    try:
        listed = {posixpath.normpath(p["_path"]): p for p in json.loads(raw)["paths"]}
    except (ValueError, KeyError, TypeError) as exc:
        return [f"{PATHS_JSON} is not a paths.json (v1) document ({type(exc).__name__}: {exc})"]
    problems = []
    # Folders that only hold files are implied by the files; only a listed (empty) one must exist.
    present = {name for name, entry in entries.items() if entry.kind != "directory"}
    present |= {name for name, entry in entries.items() if entry.kind == "directory" and name in listed}
    problems += [f"{name} is in the package but not listed" for name in sorted(present - listed.keys())]
    problems += [f"{name} is listed but not in the package" for name in sorted(listed.keys() - entries.keys())]
    for name in sorted(listed.keys() & entries.keys()):
        problems += _entry_problems(name, listed[name], entries[name])
    return problems


def _entry_problems(name: str, listed: dict, entry: _Entry) -> list[str]:
    kind = {"hardlink": "file", "softlink": "softlink", "directory": "directory"}.get(str(listed.get("path_type")), "?")
    if kind != entry.kind:
        return [f"{name} is a {entry.kind} in the package, listed as {listed.get('path_type')}"]
    if kind == "directory":
        return []
    problems = []
    size = listed.get("size_in_bytes")
    if size is not None and size != entry.size:
        problems.append(f"{name} is {entry.size} bytes, listed as {size}")
    digest = listed.get("sha256")
    if kind == "file" and not digest:
        problems.append(f"{name} is listed without a sha256")
    elif digest and entry.sha256 and digest != entry.sha256:
        problems.append(f"{name} has sha256 {entry.sha256[:16]}…, listed as {digest[:16]}…")
    return problems
