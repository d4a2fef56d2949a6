"""What every rattler-build call and every channel folder of shipyard needs: the build log
rattler-build keeps nowhere else, and a py-rattler index of a folder that is the same bytes
whenever the packages are."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path
from typing import Any

import zstandard
from rattler.index import index_fs

from shipyard.plumbing.atomic_files import write_atomic

# The one field of py-rattler's index that comes from the clock: the milliseconds at which each
# record was indexed. It is optional (conda-index never wrote it), and rattler's solver falls back
# to the package's own build `timestamp` for exclude_newer when it is missing.
CLOCK_FIELDS = ("indexed_timestamp",)
# zstd's output is a function of the input, the level and the library version only (no time, no
# threads here), so the rewritten repodata.json.zst is as reproducible as repodata.json.
ZSTD_LEVEL = 19


class BuildLog:
    """rattler-build's progress callback. rattler-build writes its log nowhere else, and a failed
    recipe test says why only there: every line and build step is kept, for the log file and for
    the tail a failure quotes, each after the seconds since the build started (where a slow
    build spends its time)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._start = time.monotonic()

    def _stamp(self) -> str:
        return f"[{time.monotonic() - self._start:6.1f}s] "

    def on_log(self, event: Any) -> None:
        stamp = self._stamp()
        self.lines.extend(stamp + line for line in str(getattr(event, "message", "")).splitlines() if line.strip())

    def on_build_step(self, event: Any) -> None:
        self.lines.append(f"{self._stamp()}== {getattr(event, 'step_name', '')}: {getattr(event, 'message', '')}")

    def on_download_start(self, event: Any) -> None:
        pass

    def on_download_progress(self, event: Any) -> None:
        pass

    def on_download_complete(self, event: Any) -> None:
        pass

    def tail(self, count: int) -> list[str]:
        return self.lines[-count:]


def index_channel(folder: Path) -> None:
    """repodata.json and repodata.json.zst (sha256, md5, size of every package) for each subdir of
    `folder`, written by py-rattler; a channel always has a noarch subdir."""
    (folder / "noarch").mkdir(parents=True, exist_ok=True)
    asyncio.run(index_fs(folder, write_zst=True, write_shards=False, force=True))
    shutil.rmtree(folder / ".tmp", ignore_errors=True)  # index_fs's scratch folder, empty when it is done
    for repodata in sorted(folder.glob("*/repodata.json")):
        drop_clock_fields(repodata)


def drop_clock_fields(repodata: Path) -> None:
    """Rewrite `repodata` (and its .zst beside it) without the fields that hold the clock time of
    the indexing, so that indexing the same packages twice gives the same bytes. Each file is
    replaced whole (write_atomic), in py-rattler's own layout: compact JSON, keys sorted."""
    data = json.loads(repodata.read_bytes())
    for group in ("packages", "packages.conda"):
        for record in data.get(group, {}).values():
            for name in CLOCK_FIELDS:
                record.pop(name, None)
    plain = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    write_atomic(repodata, plain)
    packed = repodata.with_name(repodata.name + ".zst")
    if packed.exists():
        write_atomic(packed, zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(plain))
