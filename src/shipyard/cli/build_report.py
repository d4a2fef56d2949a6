"""What `shipyard build` shows: live progress while it runs and a summary table at the end."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from shipyard.wheel.build_request import CellOutcome

_STYLE = {"passed": "green", "cached": "cyan", "built": "green", "failed": "red", "skipped": "yellow",
          "unavailable": "yellow", "not applicable": "dim", "not tested": "yellow"}


class _LiveSteps:
    """The `progress(step)` callback of a live display: one log line per step, and with
    `running(label)` a row per piece of work in flight (every cell under test, say)."""

    def __init__(self, progress: Progress, title: str) -> None:
        self._progress = progress
        self._title = title
        self._main = progress.add_task(title, total=None)

    def __call__(self, text: str) -> None:
        self._progress.console.log(text)
        self._progress.update(self._main, description=f"{self._title}: {text}")

    @contextmanager
    def running(self, label: str) -> Iterator[None]:
        row = self._progress.add_task(f"  {label}", total=None)
        try:
            yield
        finally:
            self._progress.remove_task(row)

    def done(self) -> None:
        self._progress.update(self._main, description=f"{self._title}: done")


class _PlainSteps:
    """The `progress(step)` callback without a terminal (a CI log, a pipe): one plain line per
    step, UTC-timestamped, with no spinner and no source-file column; a running piece of work
    gets a line when it starts and one with its seconds when it ends."""

    def __init__(self, console: Console, title: str) -> None:
        self._console = console
        self._title = title

    def __call__(self, text: str) -> None:
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self._console.print(f"{stamp} {self._title}: {text}", markup=False, highlight=False, soft_wrap=True)

    @contextmanager
    def running(self, label: str) -> Iterator[None]:
        self(f"{label}: started")
        start = time.monotonic()
        try:
            yield
        finally:
            self(f"{label}: ended after {time.monotonic() - start:.1f} s")

    def done(self) -> None:
        self("done")


@contextmanager
def live_progress(console: Console, title: str) -> Iterator[_LiveSteps | _PlainSteps]:
    """In a terminal, a spinner line for the current step and one per running cell; elsewhere,
    plain timestamped lines. Yields the callback."""
    if not console.is_terminal:
        plain = _PlainSteps(console, title)
        yield plain
        plain.done()
        return
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=console, transient=False) as progress:
        steps = _LiveSteps(progress, title)
        yield steps
        steps.done()


def summary_table(outcomes: list[CellOutcome], title: str) -> Table:
    table = Table(title=title)
    table.add_column("cell")
    table.add_column("result")
    table.add_column("seconds", justify="right")
    table.add_column("size", justify="right")
    table.add_column("notes", overflow="fold")
    for outcome in outcomes:
        result = "skipped" if outcome.result == "unavailable" else outcome.result
        size = f"{outcome.size / 1048576:.2f} MiB" if outcome.size else "-"
        # In full: a skipped or failed feature must not hide behind an ellipsis.
        note = "; ".join(line.strip() for line in outcome.detail.strip().splitlines() if line.strip())
        shown = result
        if result == "not applicable":  # the project's own requires-python rules it out
            shown, note = f"not applicable ({outcome.detail})", ""
        table.add_row(outcome.cell.id, f"[{_STYLE.get(result, 'white')}]{shown}[/]",
                      f"{outcome.seconds:.1f}", size, note)
    return table
