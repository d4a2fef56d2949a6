"""The gzip blob this machine made of each image layer it pushed, by the layer's diff id (the
sha256 of the layer's uncompressed tar, which the engine lists for every image it holds).

A registry push gzips every layer only to learn the digests of the blobs; with this record, a
push of an image whose blobs the registry holds already (a re-run, a promotion, another channel)
needs neither `docker save` nor gzip: a HEAD of the config and of each blob, then the manifest,
the same bytes as a full push gives. It is a cache, in shipyard's cache folder: a missing or
unreadable file, a layer it does not know, or a blob the registry lacks means the full push, which
records what it made. A recorded blob is one this machine made of that very layer, and the
registry checks every blob against its digest, so a stale record can only cost a full push.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from shipyard.plumbing.atomic_files import write_atomic
from shipyard.plumbing.file_lock import exclusive

FILE_NAME = "registry-layer-blobs.json"  # {"<diff id>": "<blob digest>", …}, in shipyard's cache folder


def _cache_file() -> Path:
    from shipyard.host.toolchains.discover import cache_root  # host facts: imported only where needed

    return cache_root() / FILE_NAME


def _read(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}


def known_blobs(diff_ids: Sequence[str]) -> list[str] | None:
    """The blob digest recorded for each diff id, in order; None when any is not recorded."""
    recorded = _read(_cache_file())
    blobs = [recorded.get(diff_id) for diff_id in diff_ids]
    return None if any(b is None for b in blobs) else [b for b in blobs if b is not None]


def remember_blobs(blobs: Mapping[str, str]) -> None:
    """Record `{diff id: blob digest}` beside what is recorded (under a lock: publishes run side by side)."""
    path = _cache_file()
    with exclusive(path.with_name(path.name + ".lock")):
        recorded = _read(path)
        if all(recorded.get(k) == v for k, v in blobs.items()):
            return
        write_atomic(path, json.dumps({**recorded, **blobs}, indent=0, sort_keys=True) + "\n")
