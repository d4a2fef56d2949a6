"""dist/RELEASE_NOTES.md in the shape of PyTorch 1.7's notes: highlights, the features grouped
Stable / Beta / Prototype (or by the statuses of feature_status.yaml's own vocabulary, in its
order: API-Stable / API-Unstable), known issues, and what changed since the previous release."""

from __future__ import annotations

from pathlib import Path

from shipyard.plumbing.atomic_files import write_atomic
from shipyard.record.gate import WHOLE_ARTIFACT
from shipyard.redaction import redact
from shipyard.release.matrix import ANY
from shipyard.release.spec import FeatureFile
from shipyard.report.cells import left_out_groups
from shipyard.report.document import ReleaseReport
from shipyard.report.previous import PreviousRelease, new_features, removed_features, status_changes


def release_notes(report: ReleaseReport, features: FeatureFile, previous: PreviousRelease | None = None) -> str:
    """The notes as Markdown."""
    lines = [f"# {report.name} {report.version} release notes", "", "## Highlights", ""]
    lines += _highlights(report, features, previous)
    statuses = features.statuses
    for status in statuses.names:
        lines += ["", f"## {status[0].upper()}{status[1:]} features", ""]
        listed = [(row, [p for p, o in row.outcomes.items() if o.status == status]) for row in report.features]
        listed = [(row, on) for row, on in listed if on]
        lines += [f"- **{row.feature.title}** (`{row.feature.id}`, {row.feature.component}): {', '.join(on)}"
                  for row, on in listed] or ["- none"]
    blocking = tuple(s for s in statuses.names if statuses.blocks(s))
    blockers = _blockers(report, blocking)
    if blockers:
        lines += ["", "## Release blockers", "",
                  f"A {' / '.join(blocking)} feature failed its tests, or some of them did not run: its cells are "
                  "not released.", ""]
        lines += blockers
    lines += ["", "## Known issues", ""]
    known = _issues(report, blocking, {"partial"})
    known += _issues(report, tuple(s for s in statuses.names if s not in blocking),
                     {"failed", "not-run", "partial", "idle"})
    lines += (known + _left_out_issues(report)) or ["- none"]
    if previous is not None:
        lines += ["", f"## Changes since {previous.label}", ""]
        lines += _changes(features, previous, _shipped(report))
    return "\n".join(lines) + "\n"


def write_notes(text: str, out: Path) -> Path:
    """The notes, published beside the release: through the one scrubber, as everything printed is."""
    write_atomic(out, redact(text))
    return out


def _highlights(report: ReleaseReport, features: FeatureFile, previous: PreviousRelease | None) -> list[str]:
    statuses = features.statuses
    by_status = {s: sum(1 for r in report.features if any(o.status == s for o in r.outcomes.values()))
                 for s in statuses.names}
    counted = ", ".join(f"{count} {status}" for status, count in by_status.items())
    out = [f"- {len(features.features)} features: {counted} (a feature may have another status on another "
           "platform)."]
    if previous is not None:
        added = new_features(features, previous.features)
        promoted = [c for c in status_changes(features, previous.features, _shipped(report))
                    if statuses.rank(c.after) < statuses.rank(c.before)]
        if added:
            out.append(f"- New since {previous.label}: " + ", ".join(f"{f.title} (`{f.id}`)" for f in added) + ".")
        out += [f"- {c.feature.title} (`{c.feature.id}`) is now {c.after} on {', '.join(c.platforms)} "
                f"(was {c.before})." for c in promoted]
    else:
        # A feature is new in its component's release version (mesonext 0.9.1), not the family's.
        fresh: dict[str, list[str]] = {}
        for f in features.features:
            if f.since == (version := report.version_of(f.component)):
                own = "" if version == report.version else f"{f.component} "
                fresh.setdefault(f"{own}{version}", []).append(f"{f.title} (`{f.id}`)")
        out += [f"- New in {release}: " + ", ".join(titles) + "." for release, titles in fresh.items()]
    built = [c for c in report.cells if c.artifact is not None]
    failed = [c for c in built if c.state == "failed"]
    out.append(f"- {len(built)} artifacts built and recorded in the manifest; {len(failed)} failed their tests."
               if built else "- No artifact is recorded in the manifest yet: the test results below are empty.")
    return out


def _blockers(report: ReleaseReport, blocking: tuple[str, ...]) -> list[str]:
    """What the gate (record/gate.py) keeps out of a blocking channel: each feature it finds not
    proven, in the words of the features table where they say why (failed, not run), and every
    other reason it gives (a cell never tested, a result it does not take), by artifact."""
    unproven = report.unproven
    named = {n.feature for n in unproven if n.feature != WHOLE_ARTIFACT}
    lines = _issues(report, blocking, {"failed", "not-run"}, only=named)
    said = {line.split("`", 2)[1] for line in lines}
    rest: dict[str, list[str]] = {}
    for note in unproven:
        if note.feature == WHOLE_ARTIFACT:
            rest.setdefault(note.artifact, []).append(note.summary)
        elif note.feature not in said:
            rest.setdefault(note.artifact, []).append(f"{note.feature} ({note.status}) {note.summary}")
    return lines + [f"- `{artifact}`: {'; '.join(dict.fromkeys(why))}." for artifact, why in rest.items()]


def _issues(report: ReleaseReport, statuses: tuple[str, ...], kinds: set[str],
            only: set[str] | None = None) -> list[str]:
    """One line per feature and status, naming each platform where it `failed` (with the cells),
    where some of its tests did `not-run` (with why), where it passed with some tests skipped
    (`partial`, with why), and where it is `idle`: its platform's cells ran none of its tests, or
    no cell of the platform is in the manifest at all. `only`: just these features."""
    built = {report.host_platform if c.platform == ANY else c.platform for c in report.cells if c.artifact}
    out = []
    for row in report.features:
        if only is not None and row.feature.id not in only:
            continue
        for status in statuses:
            here = {p: o for p, o in row.outcomes.items() if o.status == status}
            parts = []
            if "failed" in kinds:
                parts += [f"failed on {p}: {o.text} ({', '.join(o.failed_cells)})"
                          for p, o in here.items() if o.result == "failed"]
            if "not-run" in kinds:
                parts += [f"not run on {p}: {o.text} ({', '.join(o.not_run_cells)})"
                          for p, o in here.items() if o.result == "not-run" and o.tests.not_run]
            if "partial" in kinds:
                parts += [f"partly skipped on {p}: {o.text}" for p, o in here.items() if o.result == "partial"]
            idle = [p for p, o in here.items() if o.result == "not-run" and not o.tests.not_run]
            if idle and "idle" in kinds:
                ran_none = [p for p in idle if p in built]
                absent = [p for p in idle if p not in built]
                if ran_none:
                    parts.append(f"did not run on {', '.join(ran_none)} (the cells built there ran none of its tests)")
                if absent:
                    which = "that platform" if len(absent) == 1 else "those platforms"
                    parts.append(f"not tested on {', '.join(absent)} (no cell of {which} is in this manifest)")
            if parts:
                out.append(f"- **{row.feature.title}** (`{row.feature.id}`, {status}): " + "; ".join(parts) + ".")
    return out


def _left_out_issues(report: ReleaseReport) -> list[str]:
    """The tests release.yaml's pytest_args left out, once per component and selection."""
    return [f"- **{component}**: {text} ({len(ids)} cell{'' if len(ids) == 1 else 's'}); not tested in this release."
            for component, text, ids in left_out_groups(report.cells)]


def _shipped(report: ReleaseReport) -> dict[str, list[str]]:
    """Feature id -> the platforms it ships on (where its component is released)."""
    return {row.feature.id: [p for p, o in row.outcomes.items() if o.status] for row in report.features}


def _changes(features: FeatureFile, previous: PreviousRelease, platforms: dict[str, list[str]]) -> list[str]:
    out = ["### New features", ""]
    out += [f"- **{f.title}** (`{f.id}`, {f.component}): "
            + ", ".join(f"{s} on {p}" for p in platforms.get(f.id, ()) if (s := f.status_on(p)))
            for f in new_features(features, previous.features)] or ["- none"]
    out += ["", "### Status changes", ""]
    out += [f"- **{c.feature.title}** (`{c.feature.id}`): {c.before} → {c.after} on {', '.join(c.platforms)}"
            for c in status_changes(features, previous.features, platforms)] or ["- none"]
    removed = removed_features(features, previous.features)
    if removed:
        out += ["", "### Removed features", ""]
        out += [f"- **{f.title}** (`{f.id}`)" for f in removed]
    return out
