"""The gate: which of the manifest's artifacts may go to a channel. The one decision that
`publish`, `promote`, `manifest gate`, the release report's blockers, the release notes' blockers
and the get-started page all use.

It allows; it never denies by exception. An artifact passes only when what proves it is on record
and says so:
- the cells that prove it (its own; an image's the wheels it installs; the conda core package's
  and the mutex's the packages that depend on them: `ArtifactRecord.proven_by`) are all in the
  manifest, were tested (`tests` recorded), and their run passed (`tests.result` is exactly
  `passed`, no problem recorded, the build did not fail);
- every feature it carries whose status blocks (feature_status.yaml's vocabulary: `stable`, or
  e.g. `API-Stable`) has, in every one of those cells that carries it, a result in
  PROVEN_RESULTS. Any other value (`failed`, `not-run`, `skipped`, `FAILED`, a typo), a missing
  result, or no cell that carries the feature blocks it.
A `gate: block` channel (test, release) refuses the whole publish when one artifact is blocked;
a `gate: mark` channel (nightly) takes it and the run says so. Features of the other statuses
(beta, prototype) that failed are listed either way and never block.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shipyard.errors import GateBlocked
from shipyard.record.manifest import ArtifactRecord
from shipyard.release.destinations import ReleaseChannel
from shipyard.release.fields import DEFAULT_STATUSES, StatusVocabulary

# What proves a feature in a cell, as testing/verdict.FeatureOutcome.result names it: `passed`
# (every test of it ran and passed) and `partial` (none failed, none was left unrun, at least one
# passed, and the others were skipped by the tests themselves with a recorded reason, e.g. "no CUDA
# device"; the notes list those skips under known issues). A GPU test skips on every runner
# without a device: refusing `partial` would refuse every CUDA and vision artifact built there.
PROVEN_RESULTS = frozenset({"passed", "partial"})

# The feature field of a note about the artifact as a whole (its cells' runs), not one feature.
WHOLE_ARTIFACT = "(tests)"


@dataclass(frozen=True)
class GateNote:
    artifact: str
    feature: str  # a feature id, or WHOLE_ARTIFACT
    status: str
    summary: str
    cell: str = ""  # the artifact's cell id

    def __str__(self) -> str:
        if self.feature == WHOLE_ARTIFACT:
            return f"{self.artifact}: {self.summary}"
        return f"{self.artifact}: {self.feature} ({self.status}) {self.summary}"


@dataclass(frozen=True)
class Gating:
    channel: ReleaseChannel
    blocking_failures: tuple[GateNote, ...]  # what keeps artifacts out: blocking on `block`, marked on `mark`
    other_failures: tuple[GateNote, ...]  # failures of the other statuses (beta, prototype): listed, never blocking
    statuses: StatusVocabulary = DEFAULT_STATUSES

    @property
    def blocking_names(self) -> str:
        """The blocking statuses in words: 'stable', 'API-Stable'."""
        return " / ".join(n for n in self.statuses.names if self.statuses.blocks(n))

    @property
    def marked(self) -> tuple[GateNote, ...]:
        return self.blocking_failures if self.channel.gate == "mark" else ()


def unproven(artifact: ArtifactRecord, records: Mapping[str, ArtifactRecord], statuses: StatusVocabulary
             ) -> tuple[GateNote, ...]:
    """Why `artifact` may not go to a blocking channel; empty when it may. `records`: the
    manifest's records by cell id (where an artifact proven by other cells finds them)."""
    notes: list[GateNote] = []

    def note(feature: str, status: str, summary: str) -> None:
        notes.append(GateNote(artifact.name, feature, status, summary, artifact.cell_id))

    provers: list[ArtifactRecord] = []
    for cell_id in artifact.proven_by or (artifact.cell_id,):
        prover = artifact if cell_id == artifact.cell_id else records.get(cell_id)
        if prover is None:
            note(WHOLE_ARTIFACT, "", f"proven by cell {cell_id}, which the manifest does not hold")
            continue
        provers.append(prover)
        problem = _run_problem(prover)
        if problem:
            note(WHOLE_ARTIFACT, "", problem if prover is artifact else f"cell {cell_id}: {problem}")
    for feature in artifact.features:
        if not statuses.blocks(feature.status):
            continue
        carriers = [p for p in provers if p is artifact or any(f.id == feature.id for f in p.features)]
        if not carriers and provers:
            note(feature.id, feature.status, "not proven: no tested cell of this artifact carries it")
        for prover in carriers:
            if prover.tests is None:
                continue  # said once above: its tests did not run
            result = _feature_result(prover, feature.id)
            if result.get("result") not in PROVEN_RESULTS:
                where = "" if prover is artifact else f" in cell {prover.cell_id}"
                note(feature.id, feature.status, _result_words(result) + where)
    return tuple(notes)


def gate_notes(artifacts: Iterable[ArtifactRecord], *, statuses: StatusVocabulary,
               records: Iterable[ArtifactRecord] | None = None) -> tuple[tuple[GateNote, ...], tuple[GateNote, ...]]:
    """(what blocks, the failures of non-blocking statuses) for `artifacts`; `records` is the
    whole manifest the proving cells are looked up in (default: `artifacts`)."""
    chosen = list(artifacts)
    by_cell = {r.cell_id: r for r in (chosen if records is None else records)}
    blocking: list[GateNote] = []
    other: list[GateNote] = []
    for artifact in chosen:
        blocking += unproven(artifact, by_cell, statuses)
        for feature_id, result in sorted(_features_of(artifact).items()):
            status = str(result.get("status", "?"))
            if not statuses.blocks(status) and result.get("result") == "failed":
                other.append(GateNote(artifact.name, feature_id, status, str(result.get("summary", "failed")),
                                      artifact.cell_id))
    return tuple(blocking), tuple(other)


def gate(channel: ReleaseChannel, artifacts: Iterable[ArtifactRecord], *, statuses: StatusVocabulary,
         records: Iterable[ArtifactRecord] | None = None) -> Gating:
    """The gate's verdict for `channel`; GateBlocked, listing every reason, when the channel's gate
    is `block` and any artifact is not proven (see the module doc)."""
    blocking, other = gate_notes(artifacts, statuses=statuses, records=records)
    gating = Gating(channel, blocking, other, statuses)
    if blocking and channel.gate == "block":
        lines = "\n  ".join(str(n) for n in blocking)
        raise GateBlocked(f"channel {channel.name} (gate: block) refuses artifacts with a {gating.blocking_names} "
                          f"feature not proven by its tests; nothing was uploaded:\n  {lines}\nfix the feature or run "
                          f"its tests and rebuild, or publish to a channel with gate: mark (release.yaml: channels)")
    return gating


def _features_of(record: ArtifactRecord) -> Mapping[str, Mapping[str, Any]]:
    features = (record.tests or {}).get("features")
    return features if isinstance(features, Mapping) else {}


def _feature_result(record: ArtifactRecord, feature_id: str) -> Mapping[str, Any]:
    result = _features_of(record).get(feature_id)
    return result if isinstance(result, Mapping) else {}


def _result_words(result: Mapping[str, Any]) -> str:
    value = result.get("result")
    if value is None:
        return "not proven: no test result recorded"
    summary = result.get("summary")
    return str(summary) if value in ("failed", "not-run", "skipped") and summary else f"not proven: result {value!r}"


def _run_problem(record: ArtifactRecord) -> str:
    """Why the cell's own run does not prove it ('' when it does)."""
    tests = record.tests
    if tests is None:
        return "its tests did not run (built, never tested)"
    problems = tests.get("problems") or []
    if tests.get("result") != "passed" or problems:
        said = "; ".join(str(p) for p in problems) if isinstance(problems, list) else ""
        return f"its tests did not pass (result {tests.get('result')!r}{': ' + said if said else ''})"
    if record.build.get("result") == "failed":
        return f"its build is recorded as failed ({record.build.get('detail') or 'see the build report'})"
    return ""
