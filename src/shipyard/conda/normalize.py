"""The normalising repack that makes two clean rattler-build builds of one recipe byte-identical.

rattler-build writes *when* and *where* a package was built into it: `info/index.json`'s
`timestamp` (ms), every tar member's mtime, the zip entries' dates, and in
`info/recipe/rendered_recipe.yaml` a `timestamp:` and the build directories (which carry the
output folder and, without `no_build_id`, the build time in milliseconds).

Why a repack and not SOURCE_DATE_EPOCH: rattler-build 0.73 ignores SOURCE_DATE_EPOCH in its own
environment; it only *sets* it, to its own build time, for the build script (two builds with
SOURCE_DATE_EPOCH=1700000000 still differed; docs/research/conda/REPORT.md, "Timestamps"). Its
`--timestamp` option is an open pull request and the Python API has no such argument. So shipyard
rewrites those fields after the build, with stdlib `zipfile`/`tarfile` and PyPI `zstandard`:

- `info/index.json`: `timestamp` := epoch x 1000 (only that value; the text is otherwise kept);
- every member of both tars: mtime := epoch, uid/gid 0, uname/gname empty (mode, type, name,
  link target and contents kept, member order kept);
- `rendered_recipe.yaml`: `timestamp:` := the epoch as ISO 8601, the output folder in the build
  directories := OUTPUT_TOKEN, the build id suffix and the host prefix's padding dropped;
- the zip: members stored, dated from the epoch, mode 0644, in the fixed order metadata.json,
  pkg-*, info-* (rattler-build's own order: info last, where range reads find it);
- each tar.zst is recompressed single-threaded at the level the package was built with
  (`packaging_settings.compression_level` of the rendered recipe).

What it cannot fix, and the build must therefore keep fixed: text that rattler-build writes into
the payload itself. Files with a prefix placeholder record the host prefix, which is padded to a
fixed length *from the output folder*, so builds that are to be compared use one fixed absolute
output root and `no_build_id=True`; .pyc files record a random compile folder, so Python
packages set `build.python.skip_pyc_compilation`. `.tar.bz2` packages are out of scope: shipyard
writes `.conda`.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import stat
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO

import zstandard

from shipyard.errors import NormalizeError
from shipyard.plumbing.atomic_files import replace_if_changed

# What the build's output folder becomes in rendered_recipe.yaml.
OUTPUT_TOKEN = "/shipyard-output"
# rattler-build's zstd level for .conda when the rendered recipe does not say (package_format "conda").
DEFAULT_ZSTD_LEVEL = 15
_ZIP_EPOCH = 315532800  # 1980-01-01: the earliest date a zip entry can hold
_CHUNK = 1 << 20

_INDEX_TIMESTAMP = re.compile(rb'("timestamp"\s*:\s*)\d+')
_RECIPE_TIMESTAMP = re.compile(r"(?m)^(\s*timestamp:)[^\n]*$")
_BUILD_DIR = re.compile(r"(?m)^\s*build_dir:\s*(\S+?)/bld/rattler-build_[^\s/]+\s*$")
_BUILD_ID = re.compile(r"(/bld/rattler-build_[A-Za-z0-9_.\-]+?)_\d{9,}(?=[/\s]|$)", re.MULTILINE)
_HOST_PADDING = re.compile(r"/host_env_placehold[a-z_]*")
_LEVEL = re.compile(r"(?m)^\s*compression_level:\s*(\d+)\s*$")
RENDERED_RECIPE = "info/recipe/rendered_recipe.yaml"


def normalize_conda_package(path: Path, *, epoch: int, info_files: Mapping[str, bytes] | None = None) -> bool:
    """Rewrite the .conda at `path` in place (atomically) so that it carries `epoch` as its build
    time and no trace of its build folder; return whether its bytes changed. Idempotent.
    `info_files` ({"info/…": bytes}) are added to the info tar, replacing members of the same name
    (the SBOM, shipyard.supply.sbom)."""
    if not path.name.endswith(".conda"):
        raise NormalizeError(f"{path}: not a .conda package; shipyard normalises only .conda "
                             f"(build with package_format='conda')")
    stamp = time.gmtime(max(epoch, _ZIP_EPOCH))[:6]
    try:
        zin = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise NormalizeError(f"{path}: cannot be read as a .conda (zip) archive: {exc}; "
                             f"rebuild it with rattler-build") from exc
    with zin:
        names = zin.namelist()
        _check_layout(path, names)
        level = _zstd_level(zin, names)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(raw, "w", compression=zipfile.ZIP_STORED) as zout:
                for name in sorted(names, key=_zip_rank):
                    info = zipfile.ZipInfo(name, date_time=stamp)
                    info.create_system = 3  # unix, wherever this runs
                    info.external_attr = (stat.S_IFREG | 0o644) << 16
                    with tempfile.TemporaryFile() as member:
                        if name.endswith(".tar.zst"):
                            with zin.open(name) as source:
                                extra = (info_files or {}) if name.startswith("info-") else {}
                                _retar(source, member, epoch=epoch, level=level, extra=extra)
                        else:
                            with zin.open(name) as source:
                                shutil.copyfileobj(source, member, _CHUNK)
                        info.file_size = member.tell()
                        member.seek(0)
                        with zout.open(info, "w") as target:
                            shutil.copyfileobj(member, target, _CHUNK)
            return replace_if_changed(tmp, path, stat.S_IMODE(path.stat().st_mode))
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise


def _check_layout(path: Path, names: list[str]) -> None:
    if "metadata.json" not in names or not any(n.startswith("info-") and n.endswith(".tar.zst") for n in names):
        raise NormalizeError(f"{path}: no metadata.json or info-*.tar.zst inside, so not a .conda package "
                             f"(members: {', '.join(names) or 'none'}); rebuild it with rattler-build")


def _zip_rank(name: str) -> tuple[int, str]:
    rank = 0 if name == "metadata.json" else 1 if name.startswith("pkg-") else 2 if name.startswith("info-") else 3
    return rank, name


def _zstd_level(zin: zipfile.ZipFile, names: list[str]) -> int:
    """The level the package was compressed with: a zstd frame does not record it, the rendered
    recipe does (absent when built with no_include_recipe: then rattler-build's default)."""
    info = next(n for n in names if n.startswith("info-") and n.endswith(".tar.zst"))
    with zin.open(info) as source, zstandard.ZstdDecompressor().stream_reader(source) as reader, \
            tarfile.open(fileobj=reader, mode="r|") as tar:
        for member in tar:
            if member.name == RENDERED_RECIPE and member.isfile():
                handle = tar.extractfile(member)
                found = _LEVEL.search(handle.read().decode()) if handle else None
                return int(found.group(1)) if found else DEFAULT_ZSTD_LEVEL
    return DEFAULT_ZSTD_LEVEL


def _retar(source: IO[bytes], target: IO[bytes], *, epoch: int, level: int,
           extra: Mapping[str, bytes] | None = None) -> None:
    """One tar.zst member, decompressed, rewritten member by member (then `extra` appended, in
    name order, replacing members of the same name) and recompressed."""
    extra = extra or {}
    with tempfile.TemporaryFile() as plain, tempfile.TemporaryFile() as rewritten:
        zstandard.ZstdDecompressor().copy_stream(source, plain)
        plain.seek(0)
        with tarfile.open(fileobj=plain, mode="r:") as src, \
                tarfile.open(fileobj=rewritten, mode="w:", format=tarfile.GNU_FORMAT) as dst:
            for member in src:
                if member.name in extra:
                    continue
                data: IO[bytes] | None = src.extractfile(member) if member.isfile() else None
                if member.name in ("info/index.json", RENDERED_RECIPE) and data is not None:
                    body = data.read()
                    body = (_INDEX_TIMESTAMP.sub(rb"\g<1>" + str(epoch * 1000).encode(), body, count=1)
                            if member.name == "info/index.json" else _rendered_recipe(body.decode(), epoch).encode())
                    member.size = len(body)
                    data = io.BytesIO(body)
                member.mtime, member.uid, member.gid, member.uname, member.gname = epoch, 0, 0, "", ""
                member.pax_headers = {}
                dst.addfile(member, data)
            for name in sorted(extra):
                added = tarfile.TarInfo(name)
                added.size, added.mtime, added.mode = len(extra[name]), epoch, 0o644
                dst.addfile(added, io.BytesIO(extra[name]))
        size = rewritten.tell()
        rewritten.seek(0)
        zstandard.ZstdCompressor(level=level, threads=0).copy_stream(rewritten, target, size=size)


def _rendered_recipe(text: str, epoch: int) -> str:
    text = _RECIPE_TIMESTAMP.sub(r"\g<1> " + time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch)), text)
    text = _BUILD_ID.sub(r"\g<1>", text)
    root = _BUILD_DIR.search(text)
    if root and root.group(1) != OUTPUT_TOKEN:
        text = text.replace(root.group(1) + "/bld/", OUTPUT_TOKEN + "/bld/")
    return _HOST_PADDING.sub("/host_env", text)
