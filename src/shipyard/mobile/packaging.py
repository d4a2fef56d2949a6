"""Reproducible archives of a staged ember-lite install: the .tar.gz for every target
and the feature manifest that goes into it."""

from __future__ import annotations

import gzip
import io
import json
import os
import stat
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from shipyard.plumbing.atomic_files import write_atomic


@dataclass(frozen=True)
class FeatureEntry:
    """One feature carried by a package, with its release status for the target."""

    id: str
    title: str
    status: str  # stable / beta / prototype


def feature_manifest(*, version: str, target: str, features: Sequence[FeatureEntry]) -> bytes:
    """The JSON bytes of the feature manifest (sorted, so the same input gives the same bytes)."""
    document = {
        "package": "ember-lite",
        "version": version,
        "target": target,
        "features": [{"id": f.id, "title": f.title, "status": f.status}
                     for f in sorted(features, key=lambda f: f.id)],
    }
    return (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()


def _normalized(info: tarfile.TarInfo, epoch: int) -> tarfile.TarInfo:
    info.mtime = epoch
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    executable = info.isdir() or bool(info.mode & stat.S_IXUSR)
    info.mode = 0o755 if executable else 0o644
    return info


def write_reproducible_tarball(staging: Path, output: Path, *, top_dir: str, epoch: int) -> Path:
    """Pack `staging` into output (.tar.gz) under `top_dir/`: sorted entries, every mtime
    `epoch`, owner 0:0, normalized modes, no absolute paths, gzip header without a name
    or time. The same files give the same bytes."""
    if os.path.isabs(top_dir) or ".." in Path(top_dir).parts:
        raise ValueError(f"top_dir must be a relative name, got {top_dir!r}")
    paths = sorted(staging.rglob("*"), key=lambda p: p.relative_to(staging).as_posix())
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        root = tarfile.TarInfo(top_dir)
        root.type = tarfile.DIRTYPE
        tar.addfile(_normalized(root, epoch))
        for path in paths:
            arcname = f"{top_dir}/{path.relative_to(staging).as_posix()}"
            info = tar.gettarinfo(str(path), arcname)
            if info.issym() and os.path.isabs(info.linkname):
                raise ValueError(f"{path} is a symlink to an absolute path ({info.linkname})")
            info = _normalized(info, epoch)
            if info.isfile():
                with path.open("rb") as handle:
                    tar.addfile(info, handle)
            else:
                tar.addfile(info)
    packed = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=packed, mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    write_atomic(output, packed.getvalue())
    return output
