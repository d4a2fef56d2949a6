"""What a release manager asks first: what ran here and how it went, and what blocks the release.
Counted from the manifest's cells (ReportCell), never from the matrix around them."""

from __future__ import annotations

from dataclasses import dataclass

from shipyard.report.cells import ReportCell
from shipyard.report.features import FeatureRow


@dataclass(frozen=True)
class Count:
    key: str  # what the page's data-count names it
    number: int
    words: str
    hint: str = ""


@dataclass(frozen=True)
class Blocker:
    """A failed cell (a stable feature failed, or its build or checks did), or a stable feature
    whose tests did not all run on a platform."""

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


def blockers(cells: list[ReportCell], features: list[FeatureRow]) -> list[Blocker]:
    """Every failed cell with its reason, then every stable feature some of whose tests did not run."""
    out = [Blocker(cell.id, cell.reason or "failed; no reason recorded", (cell.id,))
           for cell in cells if cell.state == "failed"]
    for row in features:
        for platform, outcome in row.outcomes.items():
            if outcome.status == "stable" and outcome.result == "not-run" and outcome.tests.not_run:
                out.append(Blocker(f"{row.feature.title} ({row.feature.id}, stable) on {platform}",
                                   outcome.text, outcome.not_run_cells))
    return out
