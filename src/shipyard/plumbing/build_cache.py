"""Content-addressed cache of built cells: a cell whose inputs did not change is not rebuilt."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import shipyard
from shipyard.plumbing.file_lock import exclusive
from shipyard.plumbing.hashing import sha256_hex

# Bump when the pipeline changes what it puts into an artifact.
PIPELINE_REVISION = "2"


def cache_key(*, kind: str, sources: str, spec_section: dict[str, Any], toolchain: str,
              python: str | None, extra: dict[str, str] | None = None) -> str:
    """The one function that names a build's inputs: sources, its release.yaml section,
    the toolchain's identity and the Python. Everything that can change the bytes."""
    payload = {
        "kind": kind,
        "pipeline": f"{shipyard.__version__}/{PIPELINE_REVISION}",
        "sources": sources,
        "spec": spec_section,
        "toolchain": toolchain,
        "python": python,
        "extra": extra or {},
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return sha256_hex(text.encode())


@dataclass(frozen=True)
class CacheEntry:
    key: str
    path: Path

    def files(self) -> list[Path]:
        return sorted(p for p in self.path.iterdir() if p.name != "entry.json")

    def metadata(self) -> dict[str, Any]:
        return json.loads((self.path / "entry.json").read_text())


class BuildCache:
    """Entries live in `<root>/<key[:2]>/<key>/`; an entry appears atomically or not at all."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @contextmanager
    def building(self, key: str) -> Iterator[None]:
        """Hold `key` while it is looked up and built: another process (a parallel nox session,
        a pytest-xdist worker) that wants the same entry waits for it and then finds it cached."""
        with exclusive(self.root / key[:2] / f".{key}.lock"):
            yield

    def get(self, key: str) -> CacheEntry | None:
        path = self.root / key[:2] / key
        return CacheEntry(key, path) if (path / "entry.json").is_file() else None

    def put(self, key: str, files: list[Path], metadata: dict[str, Any]) -> CacheEntry:
        """Copy `files` into a new entry (or a directory tree for a directory)."""
        final = self.root / key[:2] / key
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{key[:8]}-", dir=final.parent))
        for file in files:
            if file.is_dir():
                shutil.copytree(file, staging / file.name, symlinks=True)
            else:
                shutil.copy2(file, staging / file.name)
        (staging / "entry.json").write_text(json.dumps(metadata, indent=2, sort_keys=True))
        if final.exists():
            shutil.rmtree(final)
        os.replace(staging, final)
        return CacheEntry(key, final)
