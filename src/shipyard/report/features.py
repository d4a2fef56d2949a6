"""Features x platforms: each feature's status where it ships, and what its tests said there,
summed over every cell of that platform the manifest holds."""

from __future__ import annotations

from dataclasses import dataclass

from shipyard.matrix import ANY, expand
from shipyard.report.cells import ReportCell
from shipyard.spec import Feature, Release
from shipyard.wheel.testing import FeatureOutcome as TestedFeature


@dataclass(frozen=True)
class FeatureOutcome:
    """One feature on one platform: its status (None where it does not ship) and its tests,
    summed over the cells that ran them (`tests`, judged as a cell's own are)."""

    status: str | None
    cells: int  # cells whose tests reported this feature
    tests: TestedFeature
    failed_cells: tuple[str, ...] = ()

    @property
    def result(self) -> str:
        """failed / passed / partial / skipped / not-run."""
        return self.tests.result

    @property
    def text(self) -> str:
        t = self.tests
        total = t.passed + t.failed + t.skipped
        cells = f" in {self.cells} cell{'s' if self.cells != 1 else ''}"
        match self.result:
            case "failed":
                return f"failed, {t.failed} of {total} tests in {len(self.failed_cells)} of {self.cells} cells"
            case "partial":
                return f"passed, {t.skipped} of {total} skipped{cells}"
            case "passed":
                return f"passed, {total} of {total}{cells}"
            case "skipped":
                return f"skipped, all {total}{cells}"
        return "did not run here"


@dataclass(frozen=True)
class FeatureRow:
    feature: Feature
    outcomes: dict[str, FeatureOutcome]  # platform -> outcome


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
            outcomes[platform] = FeatureOutcome(
                status=feature.status_on(platform) if platform in shipped.get(feature.component, ()) else None,
                cells=len(ran),
                tests=TestedFeature(feature.id, feature.status_on(platform) or "", passed=sum(r.passed for _, r in ran),
                                    failed=sum(r.failed for _, r in ran), skipped=sum(r.skipped for _, r in ran)),
                failed_cells=tuple(c.id for c, r in ran if r.failed))
        rows.append(FeatureRow(feature, outcomes))
    return rows
