"""What `shipyard build` shows: live progress while it runs and a summary table at the end."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from shipyard.wheel.pipeline import CellOutcome

_STYLE = {"passed": "green", "cached": "cyan", "built": "green", "failed": "red", "skipped": "yellow",
          "unavailable": "yellow"}


@contextmanager
def live_progress(console: Console, title: str) -> Iterator[callable]:  # type: ignore[valid-type]
    """A spinner line that shows the current step; yields the `progress(step)` callback."""
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=console, transient=False) as progress:
        task = progress.add_task(title, total=None)

        def step(text: str) -> None:
            progress.console.log(text)
            progress.update(task, description=f"{title}: {text}")

        yield step
        progress.update(task, description=f"{title}: done")


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
        table.add_row(outcome.cell.id, f"[{_STYLE.get(result, 'white')}]{result}[/]",
                      f"{outcome.seconds:.1f}", size, note)
    return table
