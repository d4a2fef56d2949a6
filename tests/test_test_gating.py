"""What a component's test run proves, judged as a release manager would: pytest's own exit
status first, then each feature by its status, with skipped tests shown for what they are.

The fixture's fixcext is built once; each scenario re-runs only its tests (with a switch
that the fixture's tests read from the environment)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from minirelease import forget_test_results, make_checkout, request

from shipyard.cli import main
from shipyard.validate import load_spec
from shipyard.wheel.pipeline import CellOutcome, build_variant
from shipyard.wheel.testing import FeatureOutcome, verdict_problems

CELL = "fixcext-cpu-linux-x86_64-cp311-wheel"
SWITCHES = ("FIXTURE_BREAK_IMPORT", "FIXTURE_SKIP_STABLE", "FIXTURE_DROP_SUMSQ", "FIXTURE_BREAK_BETA",
            "FIXTURE_BREAK_STABLE", "FIXTURE_HAS_DEVICE")


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_checkout(tmp_path_factory.mktemp("gating") / "release")
    [outcome] = build_variant(load_spec(root), request(root, pythons=("3.11",), components=("fixcext",),
                                                       run_tests=False))
    assert outcome.result == "built", outcome.detail
    return root


def _retest(root: Path, monkeypatch: pytest.MonkeyPatch, **switches: str) -> CellOutcome:
    for name in SWITCHES:
        monkeypatch.delenv(name, raising=False)
    for name, value in switches.items():
        monkeypatch.setenv(name, value)
    forget_test_results(root)
    [outcome] = build_variant(load_spec(root), request(root, pythons=("3.11",), components=("fixcext",)))
    return outcome


@pytest.mark.slow
def test_a_module_that_fails_to_import_fails_the_cell(checkout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outcome = _retest(checkout, monkeypatch, FIXTURE_BREAK_IMPORT="more")
    assert outcome.result == "failed"
    assert "pytest exited 2 (interrupted (a collection error))" in outcome.detail
    assert "test_fixcext_more.py" in outcome.detail and "fixture_module_that_does_not_exist" in outcome.detail
    # The module's YAML feature is charged with the error, even though its tests carry no marker.
    assert outcome.test_json is not None and outcome.test_json["features"]["fix.png"]["result"] == "failed"


@pytest.mark.slow
def test_no_module_importing_fails_the_cell(checkout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outcome = _retest(checkout, monkeypatch, FIXTURE_BREAK_IMPORT="all")
    assert outcome.result == "failed"
    assert "pytest exited 2" in outcome.detail
    assert outcome.test_json is not None
    assert {f["passed"] for f in outcome.test_json["features"].values()} == {0}


@pytest.mark.slow
def test_a_stable_feature_whose_tests_all_skip_fails_the_cell(checkout: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    outcome = _retest(checkout, monkeypatch, FIXTURE_SKIP_STABLE="1")
    assert outcome.result == "failed"
    assert "stable feature fix.sumsq ran no test: skipped (all 2: fixture told to skip)" in outcome.detail


@pytest.mark.slow
def test_a_stable_feature_with_no_test_collected_fails_the_cell(checkout: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    outcome = _retest(checkout, monkeypatch, FIXTURE_DROP_SUMSQ="1")
    assert outcome.result == "failed"
    assert "stable feature fix.sumsq ran no test: not-run (no test collected)" in outcome.detail


@pytest.mark.slow
def test_beta_failure_is_recorded_and_stable_failure_blocks(checkout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outcome = _retest(checkout, monkeypatch, FIXTURE_BREAK_BETA="1")
    assert outcome.result == "passed", outcome.detail  # pytest exits 1, for a beta failure only
    assert "fix.flaky-beta (beta) failed (1 of 1)" in outcome.detail
    assert outcome.test_json is not None and outcome.test_json["features"]["fix.flaky-beta"]["result"] == "failed"
    outcome = _retest(checkout, monkeypatch, FIXTURE_BREAK_STABLE="1")
    assert outcome.result == "failed"
    assert "stable feature fix.sumsq failed (1 test)" in outcome.detail


@pytest.mark.slow
def test_partly_skipped_features_say_so_everywhere(checkout: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    for name in SWITCHES:
        monkeypatch.delenv(name, raising=False)
    forget_test_results(checkout)
    code = main(["--root", str(checkout), "build", "--variant", "cpu", "--python", "3.11", "--component", "fixcext"])
    shown = " ".join(capsys.readouterr().out.split())  # the summary table, unwrapped
    assert code == 0
    proven = "fix.png (stable) passed (1 of 3 skipped: no fixture device on this host)"
    assert proven in shown
    manifest = json.loads((checkout / "dist" / "manifest.json").read_text())
    [record] = [a for a in manifest["artifacts"] if a["cell_id"] == CELL]
    png = record["tests"]["features"]["fix.png"]
    assert (png["result"], png["summary"]) == ("partial", "passed (1 of 3 skipped: no fixture device on this host)")
    # feature_status.yaml lists test_fixcext_more.py under fix.png; its tests carry no marker.
    assert (png["passed"], png["skipped"]) == (2, 1)
    assert "(unmarked)" not in record["tests"]["features"]
    assert record["tests"]["features"]["fix.sumsq"]["summary"] == "passed (2 of 2)"


def _outcome(fid: str, status: str, passed: int = 0, failed: int = 0, skipped: int = 0) -> FeatureOutcome:
    return FeatureOutcome(fid, status, passed, failed, skipped, exists_here=True)


@pytest.mark.parametrize("status,meaning", [(2, "interrupted"), (3, "internal error"), (4, "usage error"),
                                            (5, "no tests collected"), (-9, "unknown status")])
def test_any_exit_status_but_success_or_judged_failures_fails(status: int, meaning: str) -> None:
    fine = [_outcome("a", "stable", passed=3)]
    problems = verdict_problems(status, {"tests": {"t": {"outcome": "passed"}}}, fine, "tail of the log")
    assert problems == [f"pytest exited {status} ({meaning}" + problems[0].split(meaning, 1)[1]]
    assert problems[0].endswith("tail of the log")


def test_exit_status_1_is_judged_by_the_failed_tests_features() -> None:
    beta_failed = [_outcome("a", "stable", passed=3), _outcome("b", "beta", failed=1)]
    assert verdict_problems(1, {"tests": {"t": {"outcome": "failed"}}}, beta_failed, "") == []
    # Exit 1 with no failed test on record: something failed that no test reported.
    assert verdict_problems(1, {"tests": {"t": {"outcome": "passed"}}}, beta_failed[:1], "x")[0].startswith(
        "pytest exited 1")
