"""`shipyard report --format text`: the grid compactly in a terminal, one rich table per section."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from shipyard.release.kinds import KINDS, kind_of
from shipyard.report.cells import ReportCell, left_out_groups
from shipyard.report.document import ReleaseReport
from shipyard.report.html import ICONS, STATE_NAMES

STYLES = {"passed": "green", "failed": "bold red", "skipped": "yellow", "unavailable": "dim",
          "excluded": "dim", "elsewhere": "magenta", "pending": "white",
          "not-applicable": "dim"}


def terminal_view(report: ReleaseReport) -> Group:
    """The legend with counts, the grid, and the failed cells with their reason."""
    parts: list[Table | Text] = [_legend(report)]
    for section in report.sections:
        # Compactly: a column of excluded cells only (cuda x macOS) is left out; the legend counts them.
        columns = [c for c in section.columns
                   if any(cell.state != "excluded" for row in section.rows for cell in section.slot(row, c))]
        rows = [r for r in section.rows if any(section.slot(r, c) for c in columns)]
        table = Table(title=section.title, title_justify="left", padding=(0, 1), show_lines=False)
        table.add_column("component · Python", no_wrap=True)
        for column in columns:
            table.add_column(column.label.replace(" · ", "\n"), overflow="fold")
        for row in rows:
            slots = []
            for column in columns:
                text = Text()
                for cell in section.slot(row, column):
                    # A slot holding several package types names each by its kind's letter.
                    letter = kind_of(cell.package_type).letter if column in section.mixed_types else ""
                    text.append(f"{letter}{ICONS[cell.state]}", style=STYLES[cell.state])
                    text.append("↻ " if cell.build_cached else " ", style="cyan")
                slots.append(text)
            table.add_row(row.label, *slots)
        parts.append(table)
    failed = [c for c in report.cells if c.state == "failed"]
    for cell in failed:
        line = Text("✗ failed ", style="bold red")
        line.append(cell.id)
        line.append(f": {cell.reason or 'no reason recorded'}")
        parts.append(line)
    parts += _not_applicable_lines(report)
    parts += [Text(f"− {component}: {text} ({len(ids)} cell{'' if len(ids) == 1 else 's'})", style="yellow")
              for component, text, ids in left_out_groups(report.cells)]
    return Group(*parts)


def _not_applicable_lines(report: ReleaseReport) -> list[Text]:
    """One line per component and reason: the Pythons its project rules out, and how many cells."""
    groups: dict[tuple[str, str], list[ReportCell]] = {}
    for cell in report.cells:
        if cell.state == "not-applicable":
            groups.setdefault((cell.component, cell.label), []).append(cell)
    lines = []
    for (component, label), cells in groups.items():
        found = {c.python for c in cells if c.python}
        pythons = ", ".join(sorted(found, key=lambda v: tuple(int(x) for x in v.split("."))))
        count = f"{len(cells)} cell{'' if len(cells) == 1 else 's'}"
        lines.append(Text(f"{ICONS['not-applicable']} {component} · Python {pythons} ({count}): {label}; "
                          f"never built, never a failure"))
    return lines


def _legend(report: ReleaseReport) -> Text:
    text = Text(f"{report.name} {report.version} from {report.manifest_path}"
                f"{'' if report.manifest_found else ' (no manifest yet)'}\n")
    for state, n in report.counts():
        text.append(f"{ICONS[state]} {n} {STATE_NAMES[state]}", style=STYLES[state])
        text.append("   ")
    cached = sum(c.build_cached for c in report.cells)
    if cached:
        text.append(f"↻ {cached} built from the cache", style="cyan")
    if any(s.mixed_types for s in report.sections):
        letters = ", ".join(f"{kind.letter} {kind.name}" for kind in KINDS.values())
        text.append(f"\n{letters}; columns of excluded cells only are left out")
    return text
