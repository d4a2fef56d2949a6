"""How long work reports itself: a `Progress` callback takes one line of text per step.

A live display (build_report.live_progress) also shows what is running right now, one row per
running cell; `running(progress, label)` adds such a row for a `with` block when the callback
has that display, and does nothing otherwise (a plain function, a test's list.append).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

Progress = Callable[[str], None]


def running(progress: Progress | None, label: str) -> AbstractContextManager[object]:
    """A row that shows `label` with its elapsed time while the block runs."""
    show = getattr(progress, "running", None)
    return show(label) if callable(show) else nullcontext()
