"""What a release manager asks first: what ran here and how it went, and what blocks the release.
Counted from the manifest's cells (ReportCell), never from the matrix around them."""

from __future__ import annotations

from dataclasses import dataclass

from shipyard.record.gate import WHOLE_ARTIFACT, GateNote
from shipyard.report.cells import ReportCell


@dataclass(frozen=True)
class Count:
    key: str  # what the page's data-count names it
    number: int
    words: str
    hint: str = ""


@dataclass(frozen=True)
class Blocker:
    """A failed cell (its build, checks or tests failed), or what the gate (record/gate.py) says
    keeps an artifact out of a blocking channel: a feature of a blocking status not proven."""

    what: str
    detail: str
    cells: tuple[str, ...]


def run_counts(cells: list[ReportCell]) -> list[Count]:
    """Built, tested, passed, failed, and where the cache stood in: a cached build whose tests ran
    now, and a cached build whose verdict was reused (its tests did not run again)."""
    built = [c for c in cells if c.artifact is not None]
    tested = [c for c in built if c.tested]
    return [
        Count("built", len(built), "built here", "artifacts in the manifest, fresh or from the build cache"),
        Count("tested", len(tested), "tested", "a test verdict is recorded"),
        Count("passed", sum(c.state == "passed" for c in tested), "passed"),
        Count("failed", sum(c.state == "failed" for c in cells), "failed", "tests or build"),
        Count("not-tested", sum(c.state == "skipped" for c in built), "built, not tested"),
        Count("cached-build-fresh-tests", sum(c.build_cached and not c.verdict_cached for c in tested),
              "cached build, tests run now"),
        Count("cached-verdict", sum(c.verdict_cached for c in tested), "cached build and verdict",
              "the same bytes passed before; their tests did not run again"),
    ]


def blockers(cells: list[ReportCell], unproven: tuple[GateNote, ...]) -> list[Blocker]:
    """Every failed cell with its reason, then every feature the gate finds not proven (`unproven`:
    record/gate.gate_notes' blocking notes), one line per feature and status with its cells, then
    the other artifacts the gate keeps out (tests not run, a proving cell missing)."""
    out = [Blocker(cell.id, cell.reason or "failed; no reason recorded", (cell.id,))
           for cell in cells if cell.state == "failed"]
    listed = {b.what for b in out}
    by_feature: dict[tuple[str, str], list[GateNote]] = {}
    for note in unproven:
        if note.feature != WHOLE_ARTIFACT:
            by_feature.setdefault((note.feature, note.status), []).append(note)
        elif note.cell not in listed:
            out.append(Blocker(note.cell or note.artifact, note.summary, (note.cell,)))
    for (feature, status), notes in by_feature.items():
        summaries = "; ".join(dict.fromkeys(n.summary for n in notes))
        out.append(Blocker(f"{feature} ({status})", summaries, tuple(dict.fromkeys(n.cell for n in notes))))
    return out
