"""The journal: what a publish has done, one JSON line per step, under the state folder.

A publish killed at any moment (kill -9) is finished by running it again: each step is recorded
after it happened (fsync'd), and on a re-run the targets read the journal to skip what was
already verified, while the servers' own listings decide what still needs uploading. The last
line of a killed run may be cut short; it is ignored. The journal holds names, hashes and URLs
without credentials, never a secret.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def record(self, event: str, **fields: Any) -> None:
        line = json.dumps({"event": event, "time": round(time.time(), 3), **fields}, sort_keys=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def events(self, event: str | None = None) -> list[dict[str, Any]]:
        if not self.path.is_file():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue  # the line a kill -9 cut short
            if event is None or entry.get("event") == event:
                out.append(entry)
        return out

    def verified(self, where: str) -> dict[str, str]:
        """filename -> sha256 of every file recorded as verified at `where` (a staging index)."""
        return {e["file"]: e["sha256"] for e in self.events("verified") if e.get("where") == where}
