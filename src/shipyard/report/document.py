"""The release report as data: what `shipyard report` renders as HTML or as a terminal grid."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from shipyard.host.toolchains.discover import Inventory
from shipyard.record.gate import GateNote, gate_notes
from shipyard.record.manifest import Manifest, check_release_names, read_manifest
from shipyard.release.fields import DEFAULT_STATUSES, StatusVocabulary
from shipyard.release.spec import Spec
from shipyard.report.artifacts import ArtifactRow, TimingRow, artifact_rows, timing_rows
from shipyard.report.cells import STATES, ReportCell, collect_cells
from shipyard.report.features import FeatureRow, feature_platforms, feature_rows
from shipyard.report.grid import GridSection, grid_sections


@dataclass(frozen=True)
class ReleaseReport:
    name: str
    version: str
    host_platform: str
    manifest_path: Path
    manifest_found: bool
    cells: list[ReportCell]
    sections: list[GridSection]
    platforms: list[str]  # the features table's columns
    features: list[FeatureRow]
    artifacts: list[ArtifactRow]
    timings: list[TimingRow]
    statuses: StatusVocabulary = DEFAULT_STATUSES  # feature_status.yaml's: which statuses block a release
    manifest: Manifest | None = None  # what the get-started page reads its commands from
    # Each component's release version (Release.component_version), where it differs from `version`:
    # its features' `since` is measured against it.
    component_versions: tuple[tuple[str, str], ...] = ()

    def version_of(self, component: str) -> str:
        """The release version of `component`: its own, else the report's."""
        return dict(self.component_versions).get(component, self.version)

    def counts(self) -> list[tuple[str, int]]:
        """(state, number of cells) for every state that occurs, most urgent first."""
        seen = Counter(c.state for c in self.cells)
        return [(state, seen[state]) for state in STATES if seen[state]]

    @property
    def unproven(self) -> tuple[GateNote, ...]:
        """What the gate (record/gate.py) finds keeping the manifest's artifacts out of a
        blocking channel: the report's and the notes' blockers are these, never judged apart."""
        if self.manifest is None:
            return ()
        return gate_notes(self.manifest.artifacts, statuses=self.statuses)[0]


def build_report(spec: Spec, manifest_path: Path, inventory: Inventory) -> ReleaseReport:
    """The report of `manifest_path` (which may be missing or hold any part of the matrix)."""
    manifest: Manifest | None = read_manifest(manifest_path)
    release = spec.release
    if manifest is not None:
        check_release_names(manifest, manifest_path, platforms=[*release.platforms, *release.mobile_targets],
                            variants=release.variants)
    cells = collect_cells(release, manifest, inventory)
    return ReleaseReport(
        name=release.release.name, version=release.release.version, host_platform=inventory.host_platform,
        manifest_path=manifest_path, manifest_found=manifest is not None, cells=cells,
        sections=grid_sections(release, cells), platforms=feature_platforms(release),
        features=feature_rows(release, spec.features.features, cells, inventory.host_platform),
        artifacts=artifact_rows(release, manifest.artifacts if manifest else ()),
        timings=timing_rows(cells), statuses=spec.statuses, manifest=manifest,
        component_versions=tuple((name, version) for name in release.components
                                 if (version := release.component_version(name)) != release.release.version))
