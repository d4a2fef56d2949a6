"""sha256 as shipyard records it everywhere: lowercase hex, of a file read in chunks or of bytes."""

from __future__ import annotations

import hashlib
from pathlib import Path


def sha256_of(path: Path) -> str:
    """The sha256 of a file's bytes (read in 1 MiB chunks, so a large package is not held in memory)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_hex(data: bytes) -> str:
    """The sha256 of `data`."""
    return hashlib.sha256(data).hexdigest()
