"""Where shipyard keeps what it fetched or built once for every later run on this machine."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """shipyard's cache: $SHIPYARD_CACHE, else ~/.cache/shipyard."""
    return Path(os.environ.get("SHIPYARD_CACHE") or Path.home() / ".cache" / "shipyard")
