"""One inter-process lock: an exclusive flock on a file next to what it guards.

Concurrent cells, parallel nox sessions and pytest-xdist workers share caches (toolkits, the
wheelhouse, the manifest); whoever holds the lock fills or rewrites, the others wait and reuse.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def exclusive(lock_file: Path, *, wait: bool = True) -> Iterator[bool]:
    """Hold an exclusive lock on `lock_file` (created if absent) for the `with` block; yields
    True. With `wait=False` it does not wait for another holder and yields False instead."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_file, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
