"""What every rattler-build call and every channel folder of shipyard needs: the build log
rattler-build keeps nowhere else, and a py-rattler index of a folder."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import Any

from rattler.index import index_fs


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
