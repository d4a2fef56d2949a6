"""Artifacts against their size budgets with the CUDA archs their binaries carry, and the seconds
each cell took to build and test."""

from __future__ import annotations

from dataclasses import dataclass

from shipyard.record.manifest import ArtifactRecord
from shipyard.release.kinds import kind_of
from shipyard.release.spec import Release
from shipyard.report.cells import ReportCell


@dataclass(frozen=True)
class ArtifactRow:
    record: ArtifactRecord
    budget_bytes: int | None  # release.yaml's budget for this kind of artifact, when it has one

    @property
    def over_budget(self) -> bool:
        return self.budget_bytes is not None and self.record.size > self.budget_bytes

    @property
    def share(self) -> float:
        """The size as a share of the budget (of the largest artifact when there is no budget)."""
        return self.record.size / self.budget_bytes if self.budget_bytes else 0.0

    @property
    def cuda_archs(self) -> str:
        """What its binaries verifiably carry ('SASS sm_70, sm_80; PTX compute_80'); '' without kernels."""
        archs = self.record.cuda_archs
        if archs is None:
            return ""
        return f"SASS {', '.join(archs.sass) or 'none'}; PTX {', '.join(archs.ptx) or 'none'}"


@dataclass(frozen=True)
class TimingRow:
    cell_id: str
    build_seconds: float
    test_seconds: float
    cached: bool


def artifact_rows(release: Release, records: tuple[ArtifactRecord, ...]) -> list[ArtifactRow]:
    return [ArtifactRow(r, _budget_bytes(release, r)) for r in sorted(records, key=lambda r: r.cell_id)]


def _budget_bytes(release: Release, record: ArtifactRecord) -> int | None:
    budget = kind_of(record.package_type).size_budget
    if budget == "release":
        variant = release.find_variant(record.variant)
        mb = release.wheel_size_budget_mb(variant)
        return int(mb * 1024 * 1024) if mb else None  # as wheel/checks.check_size counts a MiB
    if budget == "recorded" and isinstance(record.build.get("budget_mb"), int | float):
        return int(record.build["budget_mb"] * 1_000_000)  # docker counts MB (image/build.py)
    return None


def timing_rows(cells: list[ReportCell]) -> list[TimingRow]:
    """Every built cell with the seconds it recorded, in cell order."""
    return [TimingRow(c.id, c.build_seconds or 0.0, c.test_seconds or 0.0, c.cached)
            for c in sorted(cells, key=lambda c: c.id)
            if c.artifact is not None and (c.build_seconds is not None or c.test_seconds is not None)]
