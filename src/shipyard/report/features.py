"""Features x platforms: each feature's status where it ships, and what its tests said there,
summed over every cell of that platform the manifest holds."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from shipyard.release.matrix import ANY, expand
from shipyard.release.spec import Feature, Release
from shipyard.report.cells import ReportCell
from shipyard.testing.verdict import FeatureOutcome


@dataclass(frozen=True)
class FeatureOnPlatform:
    """One feature on one platform: its status (None where it does not ship) and its tests,
    summed over the cells that ran them (`tests`, judged as a cell's own are)."""

    status: str | None
    cells: int  # cells whose tests reported this feature
    tests: FeatureOutcome
    failed_cells: tuple[str, ...] = ()
    not_run_cells: tuple[str, ...] = ()  # cells where some of its tests did not run

    @property
    def result(self) -> str:
        """failed / not-run / passed / partial / skipped."""
        return self.tests.result

    @property
    def text(self) -> str:
        t = self.tests
        total = t.passed + t.failed + t.skipped + t.not_run
        cells = f" in {self.cells} cell{'s' if self.cells != 1 else ''}"
        skips = f" ({'; '.join(t.skip_reasons)})" if t.skip_reasons else ""
        unrun = (f"{t.not_run} of {total} not run in {len(self.not_run_cells)} of {self.cells} cells "
                 f"({'; '.join(t.not_run_reasons)})") if t.not_run else ""
        match self.result:
            case "failed":
                return (f"failed, {t.failed} of {total} tests in {len(self.failed_cells)} of {self.cells} cells"
                        + (f"; {unrun}" if unrun else ""))
            case "partial":
                return f"passed, {t.skipped} of {total} skipped{cells}{skips}"
            case "passed":
                return f"passed, {total} of {total}{cells}"
            case "skipped":
                return f"skipped, all {total}{cells}{skips}"
        return f"not run, {unrun}" if unrun else "did not run here"


@dataclass(frozen=True)
class FeatureRow:
    feature: Feature
    outcomes: dict[str, FeatureOnPlatform]  # platform -> outcome


def feature_platforms(release: Release) -> list[str]:
    return [*release.platforms, *release.mobile_targets]


def component_platforms(release: Release) -> dict[str, set[str]]:
    """The platforms (and mobile targets) each component is released for, exclusions applied."""
    out: dict[str, set[str]] = {}
    for cell in expand(release):
        out.setdefault(cell.component, set()).update(cell.platforms if cell.is_pure else (cell.platform,))
    return out


def feature_rows(release: Release, features: tuple[Feature, ...], cells: list[ReportCell],
                 host_platform: str) -> list[FeatureRow]:
    """Every feature with its outcome per platform; its status is None where its component is not
    released. A pure cell's tests ran on this host, so they count for the host's platform."""
    shipped = component_platforms(release)
    rows = []
    for feature in features:
        outcomes = {}
        for platform in feature_platforms(release):
            ran = [(cell, result) for cell in cells for result in cell.features
                   if result.id == feature.id and cell.component == feature.component
                   and (cell.platform == platform or (cell.platform == ANY and platform == host_platform))]
            outcomes[platform] = FeatureOnPlatform(
                status=feature.status_on(platform) if platform in shipped.get(feature.component, ()) else None,
                cells=len(ran),
                tests=FeatureOutcome(feature.id, feature.status_on(platform) or "",
                                     passed=sum(r.passed for _, r in ran),
                                     failed=sum(r.failed for _, r in ran), skipped=sum(r.skipped for _, r in ran),
                                     skip_reasons=_union(r.skip_reasons for _, r in ran),
                                     not_run=sum(r.not_run for _, r in ran),
                                     not_run_reasons=_union(r.not_run_reasons for _, r in ran)),
                failed_cells=tuple(c.id for c, r in ran if r.failed),
                not_run_cells=tuple(c.id for c, r in ran if r.not_run))
        rows.append(FeatureRow(feature, outcomes))
    return rows


def _union(reasons: Iterable[tuple[str, ...]]) -> tuple[str, ...]:
    return tuple(sorted({r for group in reasons for r in group}))
