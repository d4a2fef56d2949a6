"""dist/report/index.html: one static file, styles and charts inline, no script and no external
asset, so it opens offline and from a CI artifact as it is."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape

from shipyard.plumbing.atomic_files import write_atomic
from shipyard.redaction import redact
from shipyard.report.artifacts import ArtifactRow, TimingRow
from shipyard.report.cells import left_out_groups
from shipyard.report.document import ReleaseReport
from shipyard.report.summary import blockers, run_counts

# Each state has an icon and words besides its colour; every pair passes WCAG AA (4.5:1) contrast.
ICONS = {"passed": "✓", "failed": "✗", "skipped": "–", "unavailable": "⊘", "excluded": "∅",
         "elsewhere": "→", "pending": "…", "not-applicable": "⊖"}
STATE_NAMES = {"passed": "passed", "failed": "failed", "skipped": "built, not tested",
               "unavailable": "unavailable here", "excluded": "excluded", "elsewhere": "build on CI runners",
               "pending": "not built yet",
               "not-applicable": "not applicable (requires-python)"}

_BAR_WIDTH = 160


def render_html(report: ReleaseReport, out: Path, dist: Path, get_started: Path | None = None) -> str:
    """The report's HTML; artifact links are relative to `out`'s folder, so the tree can move.
    `get_started`: the install page written beside it, which the header links to."""
    env = Environment(loader=PackageLoader("shipyard.report", "templates"), autoescape=select_autoescape(["j2"]),
                      trim_blocks=True, lstrip_blocks=True)
    link_prefix = Path(os.path.relpath(dist, out.parent)).as_posix() + "/"
    css = resources.files("shipyard.report").joinpath("templates", "report.css").read_text()
    return env.get_template("report.html.j2").render(
        r=report, css=Markup(css), icons=ICONS, state_names=STATE_NAMES, link_prefix=link_prefix,
        size_bar=_size_bar(report.artifacts), human_size=human_size, timing_chart=timing_chart,
        left_out=left_out_groups(report.cells), run_counts=run_counts(report.cells),
        get_started=Path(os.path.relpath(get_started, out.parent)).as_posix() if get_started else None,
        blockers=blockers(report.cells, report.unproven))


def write_html(report: ReleaseReport, out: Path, dist: Path, get_started: Path | None = None) -> Path:
    """Write the report to `out` atomically (a reader never sees half a page)."""
    # Published beside the release: through the one scrubber, as everything printed is.
    write_atomic(out, redact(render_html(report, out, dist, get_started)))
    return out


def human_size(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def _size_bar(rows: list[ArtifactRow]):  # noqa: ANN202 - a template callable
    largest = max((r.record.size for r in rows), default=1) or 1

    def bar(row: ArtifactRow) -> Markup:
        share = row.share if row.budget_bytes else row.record.size / largest
        filled = round(min(share, 1.0) * _BAR_WIDTH)
        colour = "#a4161a" if row.over_budget else ("#1f5f99" if row.budget_bytes else "#6c757d")
        title = f"{share:.0%} of the budget" if row.budget_bytes else "no budget; against the largest artifact"
        return Markup(
            f'<svg class="bar" width="{_BAR_WIDTH}" height="12" role="img" aria-label="{escape(title)}">'
            f'<title>{escape(title)}</title>'
            f'<rect width="{_BAR_WIDTH}" height="12" fill="#e9ecef"/>'
            f'<rect width="{filled}" height="12" fill="{colour}"/></svg>')

    return bar


def timing_chart(rows: list[TimingRow]) -> Markup:
    """Build and test seconds per cell as stacked horizontal bars; a cache hit is marked ↻ and hatched."""
    label_width, bar_width, line = 420, 420, 18
    longest = max((r.build_seconds + r.test_seconds for r in rows), default=1.0) or 1.0
    height = line * len(rows) + 24
    parts = [f'<svg class="timing" width="{label_width + bar_width + 90}" height="{height}" role="img" '
             f'aria-label="build and test seconds per cell">',
             '<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
             'patternTransform="rotate(45)"><rect width="3" height="6" fill="#1f5f99"/></pattern></defs>']
    for i, row in enumerate(rows):
        y = i * line
        build = row.build_seconds / longest * bar_width
        test = row.test_seconds / longest * bar_width
        mark = " ↻ cached" if row.cached else ""
        parts.append(f'<text x="{label_width - 6}" y="{y + 13}" text-anchor="end">{escape(row.cell_id)}</text>'
                     f'<rect x="{label_width}" y="{y + 3}" width="{build:.1f}" height="12" '
                     f'fill="{"url(#hatch)" if row.cached else "#1f5f99"}"><title>build {row.build_seconds:.1f} s'
                     f'{mark}</title></rect>'
                     f'<rect x="{label_width + build:.1f}" y="{y + 3}" width="{test:.1f}" height="12" fill="#e07a00">'
                     f'<title>test {row.test_seconds:.1f} s</title></rect>'
                     f'<text x="{label_width + build + test + 4:.1f}" y="{y + 13}">'
                     f'{row.build_seconds + row.test_seconds:.1f} s{mark}</text>')
    legend_y = line * len(rows) + 16
    parts.append(f'<rect x="{label_width}" y="{legend_y - 10}" width="12" height="12" fill="#1f5f99"/>'
                 f'<text x="{label_width + 16}" y="{legend_y}">build</text>'
                 f'<rect x="{label_width + 70}" y="{legend_y - 10}" width="12" height="12" fill="#e07a00"/>'
                 f'<text x="{label_width + 86}" y="{legend_y}">test</text>'
                 f'<rect x="{label_width + 130}" y="{legend_y - 10}" width="12" height="12" fill="url(#hatch)"/>'
                 f'<text x="{label_width + 146}" y="{legend_y}">build from cache</text></svg>')
    return Markup("".join(parts))
