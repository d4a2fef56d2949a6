"""The verdict of a component's test run, judged as a release manager would.

Gating:
- pytest's own exit status is the first verdict: a run that was interrupted (a test module that
  fails to import), errored or collected nothing fails the cell, whatever the tests that did run say;
- a test's outcome comes only from its own setup/call/teardown reports; a collected test with
  none did not run (`not-run`, with why: a collection error, pytest.exit(), the interpreter's
  death), and neither did a test id the YAML lists that no collected test matches;
- a failing test of a stable feature (or of no feature at all) fails the cell, and so does one
  that did not run; beta and prototype failures and tests not run are recorded with their status
  and do not. "Stable" is whichever statuses feature_status.yaml's vocabulary says block (stable
  unless it declares its own, e.g. API-Stable);
- a stable feature that exists on the cell's platform and ran no test (none collected, or every
  one skipped) fails the cell: nothing proved it.

A test belongs to the features whose `tests:` in feature_status.yaml list it (the authority),
and to those its `@pytest.mark.feature` markers name. Running the tests is runner.py's.
"""

from __future__ import annotations

import functools
import hashlib
import json
import signal
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from shipyard.redaction import redact
from shipyard.release.fields import DEFAULT_STATUSES, StatusVocabulary
from shipyard.release.spec import Spec

UNMARKED = "(unmarked)"


# pytest's exit statuses (pytest.ExitCode), by value: what the summary says when one ends a run.
PYTEST_EXIT_MEANING = {0: "all tests passed", 1: "some tests failed", 2: "interrupted",
                       3: "internal error", 4: "usage error", 5: "no tests collected"}


# Bumped when the reading of a run changes (here, not in the plugin): with the plugin's own
# bytes, part of every test verdict's cache key, so an older judge's verdicts are judged again.
JUDGE_REVISION = 2


@functools.cache
def judge_identity() -> str:
    """What turns a test run into a verdict: the pytest plugin's files and JUDGE_REVISION."""

    digest = hashlib.sha256(f"{JUDGE_REVISION}\0".encode())
    folder = resources.files("shipyard.resources").joinpath("pytest_plugin")
    for item in sorted(folder.iterdir(), key=lambda i: i.name):
        if item.name.endswith(".py"):
            digest.update(item.name.encode() + b"\0" + item.read_bytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class FeatureOutcome:
    id: str
    status: str  # stable / beta / prototype
    passed: int
    failed: int
    skipped: int
    skip_reasons: tuple[str, ...] = ()
    exists_here: bool = True  # the feature ships on the cell's platform (not only tested there)
    not_run: int = 0  # collected (or listed) tests that produced no report: nothing ran them
    not_run_reasons: tuple[str, ...] = ()
    # The statuses whose failure stops the release (feature_status.yaml's vocabulary).
    blocking: frozenset[str] = DEFAULT_STATUSES.blocking

    @property
    def result(self) -> str:
        """failed / not-run (some test did not run, or none was collected) / passed / partial (some
        tests skipped) / skipped (all)."""
        if self.failed:
            return "failed"
        if self.not_run or not (self.passed or self.skipped):
            return "not-run"
        if self.passed:
            return "partial" if self.skipped else "passed"
        return "skipped"

    @property
    def summary(self) -> str:
        """What was proven, in words: 'passed (8 of 12 skipped: no CUDA device)'."""
        total = self.passed + self.failed + self.skipped + self.not_run
        why = f": {'; '.join(self.skip_reasons)}" if self.skip_reasons else ""
        unrun = f"{self.not_run} of {total} not run: {'; '.join(self.not_run_reasons)}" if self.not_run else ""
        match self.result:
            case "failed":
                return f"failed ({self.failed} of {total}{'; ' + unrun if unrun else ''})"
            case "partial":
                return f"passed ({self.skipped} of {total} skipped{why})"
            case "passed":
                return f"passed ({total} of {total})"
            case "skipped":
                return f"skipped (all {total}{why})"
        return f"not-run ({unrun})" if unrun else "not-run (no test collected)"

    @property
    def blocks_release(self) -> bool:
        if self.status not in self.blocking:
            return False
        return self.failed > 0 or self.not_run > 0 or (self.exists_here and self.passed == 0)


@dataclass(frozen=True)
class TestRun:
    installed: str  # the version pip resolved, e.g. 1.7.0+cu118
    features: tuple[FeatureOutcome, ...]
    seconds: float
    log_tail: str = ""
    problems: tuple[str, ...] = field(default=())  # why the cell failed, when it did
    installer: str = "uv"  # what made the environment and resolved the package: uv or pip
    slowest: tuple[tuple[str, float], ...] = ()  # the slowest tests, (test id, seconds)
    span: tuple[float, float] = (0.0, 0.0)  # when the cell's environment and tests started and ended (Unix time)
    left_out: Mapping[str, Any] | None = None  # what release.yaml's pytest_args left out (pytest_selection)

    @property
    def passed(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, object]:
        """The run as the manifest records it. The text that comes from the tests (pytest's last
        lines, skip reasons, problems) passes the one scrubber first: a test that printed a token
        would otherwise carry it into the manifest, the report and the notes."""
        return {
            "result": "passed" if self.passed else "failed",
            "installed": self.installed,
            "installer": self.installer,
            "seconds": round(self.seconds, 2),
            "problems": [redact(p) for p in self.problems],
            "features": {f.id: {"status": f.status, "result": f.result, "summary": redact(f.summary),
                                "passed": f.passed, "failed": f.failed, "skipped": f.skipped,
                                "skip_reasons": [redact(r) for r in f.skip_reasons], "not_run": f.not_run,
                                "not_run_reasons": [redact(r) for r in f.not_run_reasons]} for f in self.features},
            "slowest": [[test, seconds] for test, seconds in self.slowest],
            "span": [round(t, 2) for t in self.span],
            # pytest's last lines: what the release report shows when a cell is opened.
            "log_tail": redact(self.log_tail),
            **({"left_out": dict(self.left_out)} if self.left_out is not None else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TestRun:
        """The run that `to_json` recorded (a cached verdict; one recorded before not-run was
        counted reads as none not run)."""
        features = tuple(FeatureOutcome(fid, f["status"], f["passed"], f["failed"], f["skipped"],
                                        tuple(f["skip_reasons"]), not_run=f.get("not_run", 0),
                                        not_run_reasons=tuple(f.get("not_run_reasons", ())))
                         for fid, f in data["features"].items())
        span = data.get("span") or (0.0, 0.0)
        return cls(data["installed"], features, data["seconds"], data.get("log_tail", ""), tuple(data["problems"]),
                   data["installer"],
                   tuple((test, seconds) for test, seconds in data.get("slowest", [])), (span[0], span[1]),
                   data.get("left_out"))


@dataclass(frozen=True)
class FeatureGate:
    """What the tests of one component cell are held to: the gating status of each feature,
    which features ship on the cell's platform, and the YAML's tests of each feature (ids
    relative to the component's tests folder: `test_x.py`, `test_x.py::test_y`, `sub/`)."""

    statuses: Mapping[str, str]
    present: frozenset[str]
    listed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    vocabulary: StatusVocabulary = DEFAULT_STATUSES  # which statuses block, and what unmarked tests gate as


NOT_RUN = "not-run"


UNMATCHED = "feature_status.yaml lists it, but no collected test has this id"


def fold_feature_report(text: str, exit_status: int) -> dict[str, Any] | None:
    """The plugin's record (JSON lines, see shipyard_feature_report) as one report: each test's
    outcome from its own setup/call/teardown reports, `not-run` with the reason for a collected
    test that has none, and why the run ended early (`cause`, '' when it did not). None when the
    plugin recorded nothing it collected: nothing can be judged."""
    events = []
    for line in text.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue  # the last line of an interpreter that died mid-write
    if not any(e.get("event") == "collected" for e in events):
        return None
    tests: dict[str, dict[str, Any]] = {}
    phases: dict[str, dict[str, str]] = {}
    errors: list[str] = []
    running = interrupted = stopped = ""
    finished = False
    for event in events:
        kind = event.get("event")
        if kind == "collected":
            for test_id, features in event["tests"].items():
                tests.setdefault(test_id, {"outcome": NOT_RUN, "reason": "", "features": features, "seconds": 0.0})
            for test_id, features in event["unmatched"].items():
                tests[test_id] = {"outcome": NOT_RUN, "reason": UNMATCHED, "features": features, "seconds": 0.0,
                                  "unmatched": True}
        elif kind == "collection-error":
            errors.append(f"{event['id']}: {event['summary']}")
            tests[event["id"]] = {"outcome": "error", "reason": event["reason"], "features": event["features"],
                                  "seconds": 0.0}
        elif kind == "collection-skip":
            tests[event["id"]] = {"outcome": "skipped", "reason": event["reason"], "features": event["features"],
                                  "seconds": 0.0}
        elif kind == "start":
            running = event["id"]
        elif kind == "report":
            entry = tests.setdefault(event["id"], {"outcome": NOT_RUN, "reason": "", "features": [], "seconds": 0.0})
            entry["seconds"] = round(entry["seconds"] + event["seconds"], 3)
            phases.setdefault(event["id"], {})[event["when"]] = event["outcome"]
            if event["outcome"] == "failed" and entry["outcome"] not in ("failed", "error"):
                entry["outcome"], entry["reason"] = ("failed" if event["when"] == "call" else "error"), event["reason"]
            elif event["outcome"] == "skipped" and entry["outcome"] == NOT_RUN:
                entry["outcome"], entry["reason"] = "skipped", event.get("reason", "")
            if event["when"] == "teardown" and event["id"] == running:
                running = ""
        elif kind == "interrupted":
            interrupted = event["reason"]
        elif kind == "finish":
            finished, stopped = True, event.get("stopped", "")
    cause = _early_end(exit_status, finished, interrupted, stopped, running, errors)
    for test_id, entry in tests.items():
        seen = phases.get(test_id, {})
        if entry["outcome"] == NOT_RUN and seen.get("teardown") == "passed" and seen.get("call") == "passed":
            entry["outcome"] = "passed"  # setup, call and teardown each reported, and passed
        elif entry["outcome"] == NOT_RUN and not entry.get("unmatched"):
            entry["reason"] = cause or f"pytest ended without running it (exit status {exit_status})"
    return {"exitstatus": exit_status, "tests": tests, "collection_errors": errors, "cause": cause}


def _early_end(exit_status: int, finished: bool, interrupted: str, stopped: str, running: str,
               errors: Sequence[str]) -> str:
    """Why a run ended before every test it collected ran ('' when nothing says it did)."""
    during = f" while {running} ran" if running else ""
    if not finished:
        return f"the interpreter died ({exit_meaning(exit_status)}){during}"
    if interrupted and errors and "during collection" in interrupted:
        return f"a collection error stopped the run ({errors[0]})"
    if interrupted:
        return f"the run was interrupted by {interrupted}{during}"
    return f"the run stopped early ({stopped})" if stopped else ""


def exit_meaning(exit_status: int) -> str:
    """pytest's exit status in words; a negative one is the signal that killed the interpreter."""
    if exit_status < 0:
        try:
            return f"killed by signal {signal.Signals(-exit_status).name}"
        except ValueError:
            return f"killed by signal {-exit_status}"
    return PYTEST_EXIT_MEANING.get(exit_status, f"exit status {exit_status}")


def slowest_tests(report: Mapping[str, object], count: int = 10) -> tuple[tuple[str, float], ...]:
    """The `count` slowest tests of a feature report, slowest first."""
    tests = report.get("tests") or {}
    assert isinstance(tests, dict)
    timed = sorted(((float(e.get("seconds", 0.0)), test) for test, e in tests.items()), reverse=True)
    return tuple((test, round(seconds, 2)) for seconds, test in timed[:count])


def verdict_problems(exit_status: int, report: Mapping[str, object], outcomes: Sequence[FeatureOutcome],
                     log_tail: str) -> list[str]:
    """Why a component's test run fails its cell (empty when it does not)."""
    problems: list[str] = []
    tests = report.get("tests") or {}
    assert isinstance(tests, dict)
    failed_tests = sum(1 for e in tests.values() if e["outcome"] in ("failed", "error"))
    # Exit status 1 means "tests failed": those failures are judged one by one, by feature.
    # Any other non-zero status means pytest did not do its job and nothing it says is proof.
    if exit_status != 0 and not (exit_status == 1 and failed_tests):
        errors = report.get("collection_errors") or []
        assert isinstance(errors, list)
        meaning = exit_meaning(exit_status) + (" (a collection error)" if exit_status == 2 and errors else "")
        cause = str(report.get("cause") or "")
        detail = "; ".join(str(e) for e in errors)[:1500] if errors else cause or log_tail[-1500:]
        problems.append(f"pytest exited {exit_status} ({meaning}): {detail}")
    for outcome in outcomes:
        if not outcome.blocks_release:
            continue
        total = outcome.passed + outcome.failed + outcome.skipped + outcome.not_run
        unrun = (f"{outcome.not_run} of {total} test{'s' if total > 1 else ''} not run: "
                 f"{'; '.join(outcome.not_run_reasons)}") if outcome.not_run else ""
        if outcome.id == UNMARKED:
            problems.append(f"tests of no feature failed ({outcome.failed} of {total})" if outcome.failed
                            else f"tests of no feature did not run ({unrun})")
        elif outcome.failed:
            problems.append(f"{outcome.status} feature {outcome.id} failed ({outcome.failed} "
                            f"test{'s' if outcome.failed > 1 else ''}{'; ' + unrun if unrun else ''})")
        elif outcome.not_run:
            problems.append(f"{outcome.status} feature {outcome.id} not proven: {unrun}")
        else:
            problems.append(f"{outcome.status} feature {outcome.id} ran no test: {outcome.summary}")
    return problems


def feature_outcomes(report: Mapping[str, object], gate: FeatureGate) -> tuple[FeatureOutcome, ...]:
    counts = ("passed", "failed", "skipped", NOT_RUN)
    tally: dict[str, dict[str, int]] = {fid: dict.fromkeys(counts, 0) for fid in gate.statuses}
    reasons: dict[tuple[str, str], list[str]] = {}
    tests = report.get("tests") or {}
    assert isinstance(tests, dict)
    for test_id, entry in tests.items():
        outcome = "failed" if entry["outcome"] in ("failed", "error") else entry["outcome"]
        for fid in entry.get("features") or [UNMARKED]:
            if entry.get("unmatched") and fid not in gate.present:
                continue  # a listed test of a feature that does not ship here, not collected here: fine
            tally.setdefault(fid, dict.fromkeys(counts, 0))[outcome] += 1
            if outcome in ("skipped", NOT_RUN) and entry.get("reason"):
                reason = entry["reason"]
                if entry.get("unmatched"):
                    reason = f"{reason} ({test_id})"
                reasons.setdefault((fid, outcome), []).append(reason)
    # Unknown or unmarked feature ids gate like the most mature blocking status when they fail:
    # nobody declared them lesser.
    unmarked = gate.vocabulary.unmarked
    return tuple(FeatureOutcome(fid, gate.statuses.get(fid, unmarked), t["passed"], t["failed"], t["skipped"],
                                tuple(sorted(set(reasons.get((fid, "skipped"), [])))),
                                exists_here=fid in gate.present, not_run=t[NOT_RUN],
                                not_run_reasons=tuple(sorted(set(reasons.get((fid, NOT_RUN), [])))),
                                blocking=gate.vocabulary.blocking)
                 for fid, t in tally.items())


def listed_tests(features: Iterable[tuple[str, Sequence[str]]], tests_dir: Path, root: Path
                 ) -> dict[str, tuple[str, ...]]:
    """The YAML's test ids that fall under `tests_dir`, made relative to it, each with the
    features that list it; the tests folder itself (`tests/`, `tests`) is the empty id, which
    selects every test. `features` gives (feature id, test ids relative to `root`)."""
    prefix = tests_dir.resolve().relative_to(root.resolve()).as_posix().rstrip("/") + "/"
    out: dict[str, list[str]] = {}
    for fid, tests in features:
        for test_id in tests:
            if test_id.startswith(prefix) or test_id == prefix[:-1]:
                out.setdefault(test_id[len(prefix):], []).append(fid)
    return {k: tuple(sorted(set(v))) for k, v in sorted(out.items())}


def feature_gate(spec: Spec, component: str, platform: str, tests_dir: Path, root: Path) -> FeatureGate:
    """What `component`'s tests in `tests_dir` are held to on `platform` (FeatureGate). `root` is
    what the component's test ids are relative to (Component.test_id_root); only the features whose
    ids are relative to the same root can name its tests: two sdists' `tests/` are two folders."""
    components, own_root = spec.release.components, root.resolve()
    same_root = [f for f in spec.features.features
                 if f.component not in components or components[f.component].test_id_root(spec.root) == own_root]
    return FeatureGate(
        statuses=spec.gating_statuses(component, platform),
        present=frozenset(fid for fid, _, _ in spec.features_for(component, platform)),
        listed=listed_tests(((f.id, f.tests) for f in same_root), tests_dir, root),
        vocabulary=spec.statuses)
