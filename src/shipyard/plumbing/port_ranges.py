"""Port ranges for test cells that run side by side.

A component's tests sometimes need a port number before anything listens on it (a rendezvous
address handed to several processes). Picked from the kernel's ephemeral range, two cells may
pick the same one between the probe and the use. Each running cell therefore claims a range of
its own, below Linux's ephemeral range (32768-60999) so the kernel never hands those ports out,
and passes it to its tests as SHIPYARD_PORT_RANGE=lo-hi. A claim is an flock on a slot file,
so cells of different shipyard processes (parallel nox sessions, pytest-xdist workers) never
share a range either; a crashed process's claims go with it.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from shipyard.plumbing.file_lock import exclusive

FIRST_PORT = 20000
RANGE_SIZE = 400
SLOTS = 30  # 20000-31999

LOCK_DIR = Path(tempfile.gettempdir()) / "shipyard-port-ranges"


@contextmanager
def claimed_port_range(lock_dir: Path = LOCK_DIR, poll_seconds: float = 0.2) -> Iterator[range]:
    """Claim a free slot's port range for the `with` block (waiting while every slot is held)."""
    while True:
        for slot in range(SLOTS):
            with exclusive(lock_dir / f"slot-{slot}.lock", wait=False) as claimed:
                if claimed:
                    start = FIRST_PORT + slot * RANGE_SIZE
                    yield range(start, start + RANGE_SIZE)
                    return
        time.sleep(poll_seconds)
