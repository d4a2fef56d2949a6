"""The cells of the report: every built cell of the manifest, and every cell of the matrix that
was not built here, with the reason (unavailable on this host, excluded, builds on a runner, or
not applicable: its project's requires-python rules its Python out)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from shipyard.host.toolchains.discover import Inventory
from shipyard.host.toolchains.resolve import Missing, resolve
from shipyard.record.manifest import ArtifactRecord, Manifest, NotApplicableRecord
from shipyard.release.kinds import KINDS, kind_of
from shipyard.release.matrix import Cell, builder_platform, excluded_cells, expand, not_applicable
from shipyard.release.pytest_selection import left_out_text
from shipyard.release.spec import Release

# A built cell's state is its test result (passed, failed, skipped: built and not tested); whether
# its build or its verdict came from the cache is said apart (ReportCell.build_cached, .verdict_cached).
State = Literal["passed", "failed", "skipped", "unavailable", "excluded", "elsewhere", "pending", "not-applicable"]

# The states in the order a release manager reads them: what needs action first.
STATES: tuple[State, ...] = ("failed", "passed", "skipped", "unavailable", "elsewhere", "excluded",
                             "not-applicable", "pending")


@dataclass(frozen=True)
class FeatureResult:
    """One feature's tests in one cell, as the manifest records them."""

    id: str
    status: str  # stable / beta / prototype
    result: str  # failed / passed / partial / skipped / not-run
    summary: str  # 'passed (2 of 5 skipped: no CUDA device)'
    passed: int
    failed: int
    skipped: int
    not_run: int = 0  # collected or listed, and never run (a record from before these were counted: 0)
    skip_reasons: tuple[str, ...] = ()
    not_run_reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReportCell:
    """One cell of the grid. `reason` says why it is not built here or why it failed; `label` is
    the short text the grid shows (a colour never says it alone)."""

    id: str
    component: str
    python: str | None
    variant: str
    platform: str
    package_type: str
    state: State
    label: str
    reason: str = ""
    features: tuple[FeatureResult, ...] = ()
    log_tail: str = ""
    build_seconds: float | None = None
    test_seconds: float | None = None
    artifact: ArtifactRecord | None = None
    left_out: str = ""  # the tests release.yaml's pytest_args left out of this cell's run, in words
    build_cached: bool = False  # the artifact came from shipyard's build cache, not a fresh build
    verdict_cached: bool = False  # its tests did not run again: the verdict of the same bytes was reused

    @property
    def cached(self) -> bool:
        return self.build_cached

    @property
    def tested(self) -> bool:
        """A verdict is recorded for the cell's artifact (passed or failed, fresh or reused)."""
        return self.artifact is not None and self.state in ("passed", "failed") and bool(self.artifact.tests)


def collect_cells(release: Release, manifest: Manifest | None, inventory: Inventory) -> list[ReportCell]:
    """The manifest's cells (built, or recorded as not applicable), then every matrix cell it lacks
    (unavailable here, builds on a runner, not built yet, or ruled out by its project's
    requires-python), then the excluded ones."""
    records = manifest.by_cell() if manifest else {}
    cells = [recorded_cell(r) for r in records.values()]
    # The cells ruled out by their project's requires-python: as the build recorded them, and as
    # the matrix says for those not built yet.
    ruled_out = {r.cell_id: r for r in manifest.not_applicable} if manifest else {}
    ruled_out |= {n.cell.id: NotApplicableRecord(**NotApplicableRecord.identity(n.cell), reason=n.reason)
                  for n in not_applicable(release) if n.cell.id not in ruled_out}
    cells += [_not_applicable(r) for r in ruled_out.values() if r.cell_id not in records]
    made: set[tuple[str, str]] = set()
    for cell in expand(release):
        made.add((cell.component, cell.package_type))
        if cell.id not in records and cell.id not in ruled_out:
            cells.append(_unbuilt(release, cell, inventory))
    for cell, exclusion in excluded_cells(release):
        # An sdist is one for every variant and platform: an exclusion of some of them leaves it whole.
        if not (KINDS[cell.package_type].once_per_component and (cell.component, cell.package_type) in made):
            cells.append(_from_matrix(cell, "excluded", "excluded", exclusion.reason))
    return cells


def _not_applicable(record: NotApplicableRecord) -> ReportCell:
    """A cell its project rules out: neither failed nor missing, and the grid says why."""
    return ReportCell(id=record.cell_id, component=record.component, python=record.python, variant=record.variant,
                      platform=record.platform, package_type=record.package_type, state="not-applicable",
                      label=f"not applicable: {record.reason}",
                      reason=f"its project's {record.reason} rules out Python {record.python}; never built, "
                             f"never a failure")


def recorded_cell(record: ArtifactRecord) -> ReportCell:
    tests: Mapping[str, Any] = record.tests or {}
    build: Mapping[str, Any] = record.build
    state = _recorded_state(record)
    reason = str(build.get("detail") or tests.get("detail") or "; ".join(map(str, tests.get("problems") or ())))
    if not reason and kind_of(record.package_type).once_per_component:
        # No tests of its own: the wheels built from it (proven_by) are what tested it.
        reason = (f"made once from {record.component}'s sources for every variant, platform and Python; "
                  + (f"the wheels built from it prove it: {', '.join(record.proven_by)}" if record.proven_by
                     else "no wheel was built from it in this run"))
    # build.result "cached": the build and the verdict of its bytes both came from the cache.
    from_cache = build.get("result") == "cached"
    verdict_cached = from_cache and bool(tests)
    return ReportCell(
        id=record.cell_id, component=record.component, python=record.python, variant=record.variant,
        platform=record.platform, package_type=record.package_type, state=state,
        label={"skipped": "built, not tested"}.get(state, state), reason=reason,
        build_cached=from_cache or build.get("cached") is True, verdict_cached=verdict_cached,
        features=tuple(_feature_result(fid, f) for fid, f in (tests.get("features") or {}).items()),
        log_tail=str(tests.get("log_tail") or ""), build_seconds=_seconds(build.get("seconds")),
        test_seconds=_seconds(tests.get("seconds")), artifact=record, left_out=left_out_text(tests.get("left_out")))


def left_out_groups(cells: list[ReportCell]) -> list[tuple[str, str, list[str]]]:
    """(component, what pytest_args left out, the cells) for every distinct left-out text, in
    the order the cells come: what the report and the notes list once, not per cell."""
    groups: dict[tuple[str, str], list[str]] = {}
    for cell in cells:
        if cell.left_out:
            groups.setdefault((cell.component, cell.left_out), []).append(cell.id)
    return [(component, text, ids) for (component, text), ids in groups.items()]


def _recorded_state(record: ArtifactRecord) -> State:
    tests = record.tests or {}
    build = record.build
    if build.get("result") == "failed" or tests.get("result") == "failed":
        return "failed"
    if build.get("result") == "not tested":  # left out by --test-python: a cached build is no verdict
        return "skipped"
    if tests.get("result") == "passed" or (build.get("result") == "cached" and tests):
        return "passed"  # a reused verdict is one of a passed run: only passed runs are cached
    return "skipped"  # built, and no verdict recorded: the tests were not run (--no-tests, an image)


def _feature_result(feature_id: str, data: Mapping[str, Any]) -> FeatureResult:
    return FeatureResult(id=feature_id, status=str(data.get("status", "")), result=str(data.get("result", "")),
                         summary=str(data.get("summary") or data.get("result", "")),
                         passed=int(data.get("passed", 0)), failed=int(data.get("failed", 0)),
                         skipped=int(data.get("skipped", 0)), not_run=int(data.get("not_run", 0)),
                         skip_reasons=tuple(str(r) for r in data.get("skip_reasons") or ()),
                         not_run_reasons=tuple(str(r) for r in data.get("not_run_reasons") or ()))


def _seconds(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _unbuilt(release: Release, cell: Cell, inventory: Inventory) -> ReportCell:
    host = inventory.host_platform
    if KINDS[cell.package_type].on_mobile_targets or host in (cell.platform, *cell.platforms):
        result = resolve(cell, release, inventory)
        if isinstance(result, Missing):
            return _from_matrix(cell, "unavailable", "unavailable", str(result))
        return _from_matrix(cell, "pending", "not built", "this host can build it; it is not in the manifest yet")
    runner = builder_platform(release, cell).github_runner  # runner names live in release.yaml only
    return _from_matrix(cell, "elsewhere", f"builds on {runner}",
                        f"{cell.platform} cells build on GitHub's {runner} runners, not on this {host} host")


def _from_matrix(cell: Cell, state: State, label: str, reason: str) -> ReportCell:
    # The conda core (libember) sits in its component's row, as the manifest records it.
    return ReportCell(id=cell.id, component=cell.component, python=cell.python,
                      variant=cell.variant, platform=cell.platform, package_type=cell.package_type,
                      state=state, label=label, reason=reason)
