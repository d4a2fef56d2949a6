"""What every rattler-build call and every channel folder of shipyard needs: the build log
rattler-build keeps nowhere else, and a py-rattler index of a folder."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

from rattler.index import index_fs


class BuildLog:
    """rattler-build's progress callback. rattler-build writes its log nowhere else, and a failed
    recipe test says why only there: every line and build step is kept, for the log file and for
    the tail a failure quotes."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def on_log(self, event: Any) -> None:
        self.lines.extend(str(getattr(event, "message", "")).splitlines() or [""])

    def on_build_step(self, event: Any) -> None:
        self.lines.append(f"== {getattr(event, 'step_name', '')}: {getattr(event, 'message', '')}")

    def on_download_start(self, event: Any) -> None:
        pass

    def on_download_progress(self, event: Any) -> None:
        pass

    def on_download_complete(self, event: Any) -> None:
        pass

    def tail(self, count: int) -> list[str]:
        return [line for line in self.lines if line.strip()][-count:]


def index_channel(folder: Path) -> None:
    """repodata.json and repodata.json.zst (sha256, md5, size of every package) for each subdir of
    `folder`, written by py-rattler; a channel always has a noarch subdir."""
    (folder / "noarch").mkdir(parents=True, exist_ok=True)
    asyncio.run(index_fs(folder, write_zst=True, write_shards=False, force=True))
    shutil.rmtree(folder / ".tmp", ignore_errors=True)  # index_fs's scratch folder, empty when it is done
