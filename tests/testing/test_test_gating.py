"""What a component's test run proves, judged as a release manager would: pytest's own exit
status first, then each feature by its status, with skipped tests shown for what they are.

The fixture's fixcext is the suite's one build of the fixture release (conftest's
minirelease_build), copied for this module; each scenario re-runs only its tests (with a switch
that the fixture's tests read from the environment)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from support.minirelease import forget_test_results, own_copy, request

from shipyard.cli import main
from shipyard.release.validate import load_spec
from shipyard.testing import verdict as judge
from shipyard.testing.runner import run_and_judge_tests
from shipyard.testing.verdict import FeatureGate, FeatureOutcome, verdict_problems
from shipyard.wheel.build_request import CellOutcome
from shipyard.wheel.variant_wheels import build_variant

CELL = "fixcext-cpu-linux-x86_64-cp313-wheel"
SWITCHES = ("FIXTURE_BREAK_IMPORT", "FIXTURE_SKIP_STABLE", "FIXTURE_DROP_SUMSQ", "FIXTURE_BREAK_BETA",
            "FIXTURE_BREAK_STABLE", "FIXTURE_HAS_DEVICE", "FIXTURE_EXIT_AT", "FIXTURE_KILL_STABLE",
            "PYTEST_ADDOPTS")


@pytest.fixture(scope="module")
def checkout(minirelease_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the built fixture release: every scenario forgets the test verdicts and runs again."""
    return own_copy(minirelease_build, tmp_path_factory.mktemp("gating") / "release")


def _retest(root: Path, monkeypatch: pytest.MonkeyPatch, **switches: str) -> CellOutcome:
    for name in SWITCHES:
        monkeypatch.delenv(name, raising=False)
    for name, value in switches.items():
        monkeypatch.setenv(name, value)
    forget_test_results(root)
    [outcome] = build_variant(load_spec(root), request(root, pythons=("3.13",), components=("fixcext",)))
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
    # feature_status.yaml lists both of its tests by id: each is named as not run.
    missing = "feature_status.yaml lists it, but no collected test has this id"
    assert (f"stable feature fix.sumsq not proven: 2 of 2 tests not run: {missing} "
            f"(test_fixcext.py::test_stable_feature_may_be_broken); {missing} (test_fixcext.py::test_sumsq)"
            ) in outcome.detail
    assert outcome.test_json is not None
    assert outcome.test_json["features"]["fix.sumsq"]["result"] == "not-run"


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
    code = main(["--root", str(checkout), "build", "--variant", "cpu", "--python", "3.13", "--component", "fixcext"])
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
                                            (5, "no tests collected"), (-9, "killed by signal SIGKILL"),
                                            (7, "exit status 7")])
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


def test_builds_exit_status_tells_a_failing_stable_feature_from_a_cell_that_did_not_build() -> None:
    """CI uploads a lane's fragment on exit 1 (the tests said no: the gate decides per channel) and
    fails the job at once on any other status: a cell that did not build, failed its checks or
    whose tests could not run must never be uploaded as "a stable feature failed"."""
    from shipyard.errors import CRASHED, STABLE_FEATURE_FAILED, BuildError
    from shipyard.release.matrix import Cell
    from shipyard.wheel.build_request import CELL_NOT_BUILT, build_exit_status

    cell = Cell(component="fixcext", variant="cpu", variant_tag="cpu", platform="linux-x86_64", python="3.13",
                package_type="wheel")
    judged = CellOutcome(cell, "failed", detail="fix.sumsq (stable) failed",
                         test_json={"result": "failed", "problems": ["fix.sumsq (stable) failed"]})
    not_built = CellOutcome(cell, "failed", detail="build: CMake build failed")
    ok = CellOutcome(cell, "passed", test_json={"result": "passed", "problems": []})
    assert build_exit_status([ok]) == 0
    assert build_exit_status([ok, judged]) == STABLE_FEATURE_FAILED != CRASHED  # never a crash's status
    assert build_exit_status([ok, not_built]) == CELL_NOT_BUILT == BuildError.exit_code
    assert build_exit_status([judged, not_built]) == CELL_NOT_BUILT


# --- what ran, and only that (issue 26, item 1) ------------------------------------------------
# Each of these passed the cell, or recorded tests that never ran as passed, before a test's
# outcome came from its own reports.

def _features(outcome: CellOutcome) -> dict[str, dict]:
    assert outcome.test_json is not None, outcome.detail
    return outcome.test_json["features"]


@pytest.mark.slow
def test_a_components_addopts_x_cannot_hide_a_stable_failure(checkout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's reproduction: the tests folder's own pytest.ini says `-x`, the beta test fails
    first, the stable test after it does `assert False`."""
    tests = checkout / "library" / "fixcext" / "tests"
    # Not part of the sources' identity (git ignores it), so the wheel is not rebuilt; the tests'
    # copy still carries it, as a component's own pytest.ini would be.
    with (checkout / ".git" / "info" / "exclude").open("a") as fh:
        fh.write("pytest.ini\n")
    (tests / "pytest.ini").write_text("[pytest]\naddopts = -x\n")
    try:
        outcome = _retest(checkout, monkeypatch, FIXTURE_BREAK_BETA="1", FIXTURE_BREAK_STABLE="1")
    finally:
        (tests / "pytest.ini").unlink()
    assert outcome.result == "failed"
    assert "stable feature fix.sumsq failed (1 test)" in outcome.detail
    sumsq = _features(outcome)["fix.sumsq"]
    assert (sumsq["result"], sumsq["passed"], sumsq["failed"]) == ("failed", 1, 1)
    # -x is overridden: the tests after the first failure ran too.
    assert _features(outcome)["fix.png"]["summary"] == "passed (1 of 3 skipped: no fixture device on this host)"


@pytest.mark.slow
def test_maxfail_cannot_hide_a_stable_failure(checkout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outcome = _retest(checkout, monkeypatch, PYTEST_ADDOPTS="--maxfail=1", FIXTURE_BREAK_BETA="1",
                      FIXTURE_BREAK_STABLE="1")
    assert outcome.result == "failed"
    assert "stable feature fix.sumsq failed (1 test)" in outcome.detail
    assert _features(outcome)["fix.sumsq"]["result"] == "failed"


@pytest.mark.slow
def test_pytest_exit_from_a_fixture_leaves_the_rest_not_run(checkout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The fixture exits with status 0, as the stable test is set up: pytest itself says "success".
    outcome = _retest(checkout, monkeypatch, FIXTURE_EXIT_AT="test_stable_feature_may_be_broken")
    assert outcome.result == "failed"
    reason = ("the run was interrupted by pytest.exit(): fixture stops the run while "
              "test_fixcext.py::test_stable_feature_may_be_broken ran")
    assert f"stable feature fix.sumsq not proven: 1 of 2 tests not run: {reason}" in outcome.detail
    features = _features(outcome)
    assert (features["fix.sumsq"]["result"], features["fix.sumsq"]["passed"]) == ("not-run", 1)
    assert features["fix.sumsq"]["not_run_reasons"] == [reason]
    # test_fixcext_more.py comes after: fix.png's two tests there never ran either.
    assert (features["fix.png"]["passed"], features["fix.png"]["not_run"]) == (1, 2)
    assert features["fix.flaky-beta"]["result"] == "passed"


@pytest.mark.slow
def test_a_test_that_kills_its_interpreter_leaves_a_record(checkout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outcome = _retest(checkout, monkeypatch, FIXTURE_KILL_STABLE="1")
    assert outcome.result == "failed"
    assert "pytest exited -9 (killed by signal SIGKILL)" in outcome.detail
    reason = ("the interpreter died (killed by signal SIGKILL) while "
              "test_fixcext.py::test_stable_feature_may_be_broken ran")
    assert f"stable feature fix.sumsq not proven: 1 of 2 tests not run: {reason}" in outcome.detail
    features = _features(outcome)
    # What finished before the signal is on record; what came after it is not run.
    assert (features["fix.sumsq"]["passed"], features["fix.sumsq"]["not_run"]) == (1, 1)
    assert (features["fix.flaky-beta"]["result"], features["fix.flaky-beta"]["passed"]) == ("passed", 1)
    assert (features["fix.png"]["passed"], features["fix.png"]["not_run"]) == (1, 2)


@pytest.mark.slow
def test_tests_beside_a_collection_error_are_not_run(checkout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """test_fixcext_more.py fails to import; test_fixcext.py would pass, its two fix.sumsq tests
    skip-marked. pytest runs nothing: none of them is passed, or skipped."""
    outcome = _retest(checkout, monkeypatch, FIXTURE_BREAK_IMPORT="more", FIXTURE_SKIP_STABLE="1")
    assert outcome.result == "failed"
    features = _features(outcome)
    sumsq = features["fix.sumsq"]
    assert sumsq["result"] == "not-run", sumsq["summary"]
    assert (sumsq["result"], sumsq["passed"], sumsq["skipped"], sumsq["not_run"]) == ("not-run", 0, 0, 2)
    [reason] = sumsq["not_run_reasons"]
    assert reason.startswith("a collection error stopped the run (test_fixcext_more.py: ")
    assert "not proven: 2 of 2 tests not run: a collection error stopped the run" in outcome.detail
    assert (features["fix.flaky-beta"]["result"], features["fix.flaky-beta"]["not_run"]) == ("not-run", 1)


def _judge_folder(tmp_path: Path, files: dict[str, str], statuses: dict[str, str],
                  listed: dict[str, tuple[str, ...]]):
    """Run a tests folder of `files` with this interpreter's pytest (and its xdist) through the
    plugin, and judge it: no build, a second or two."""
    tests = tmp_path / "tests"
    for name, text in files.items():
        (tests / name).parent.mkdir(parents=True, exist_ok=True)
        (tests / name).write_text(textwrap.dedent(text))
    (tmp_path / "work" / "tmp").mkdir(parents=True)
    gate = FeatureGate(statuses=statuses, present=frozenset(statuses), listed=listed)
    return run_and_judge_tests(Path(sys.executable), tests_dir=tests, gate=gate, source_dir=tmp_path,
                               state=tmp_path / "state", work=tmp_path / "work", timeout=120)


FAIL_BETA_THEN_STABLE = """
    import pytest

    @pytest.mark.feature("b.beta")
    def test_1_beta():
        assert False

    @pytest.mark.feature("s.stable")
    def test_2_stable():
        assert False

    @pytest.mark.feature("s.stable")
    def test_3_stable():
        pass
"""


def test_xdist_and_x_in_addopts_change_nothing(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    judged = _judge_folder(tmp_path, {"pytest.ini": "[pytest]\naddopts = -n 2 -x -p no:randomly\n",
                                      "test_a.py": FAIL_BETA_THEN_STABLE},
                           {"b.beta": "beta", "s.stable": "stable"}, {})
    assert judged.problems == ("stable feature s.stable failed (1 test)",)
    by_id = {f.id: f for f in judged.features}
    assert (by_id["s.stable"].passed, by_id["s.stable"].failed, by_id["s.stable"].not_run) == (1, 1, 0)
    assert by_id["b.beta"].result == "failed"


def test_a_listed_parametrised_case_counts_and_a_missing_one_is_not_run(tmp_path: Path) -> None:
    files = {"test_p.py": """
        import pytest

        @pytest.mark.parametrize("n", [1, 2])
        def test_case(n):
            assert n in (1, 2)
    """}
    listed = {"test_p.py::test_case[2]": ("s.two",), "test_p.py::test_case[9]": ("s.nine",),
              "test_p.py::test_case": ("s.all",)}
    judged = _judge_folder(tmp_path, files, {"s.two": "stable", "s.nine": "stable", "s.all": "stable"}, listed)
    by_id = {f.id: f for f in judged.features}
    assert (by_id["s.two"].passed, by_id["s.two"].result) == (1, "passed")
    assert (by_id["s.all"].passed, by_id["s.all"].result) == (2, "passed")
    assert (by_id["s.nine"].not_run, by_id["s.nine"].result) == (1, "not-run")
    assert judged.problems == ("stable feature s.nine not proven: 1 of 1 test not run: feature_status.yaml "
                               "lists it, but no collected test has this id (test_p.py::test_case[9])",)


def test_a_module_that_skips_itself_is_skipped_not_unrun(tmp_path: Path) -> None:
    files = {"test_here.py": "def test_works():\n    pass\n",
             "test_elsewhere.py": "import pytest\n\npytest.skip('needs a GPU', allow_module_level=True)\n"}
    judged = _judge_folder(tmp_path, files, {"s.feature": "stable"},
                           {"test_here.py": ("s.feature",), "test_elsewhere.py": ("s.feature",)})
    [feature] = judged.features
    assert feature.summary == "passed (1 of 2 skipped: needs a GPU)"
    assert judged.problems == ()


def test_a_verdict_recorded_before_not_run_was_counted_still_reads() -> None:
    older = {"result": "passed", "installed": "0.3.0+cpu", "installer": "uv", "seconds": 3.2, "problems": [],
             "features": {"fix.sumsq": {"status": "stable", "result": "passed", "summary": "passed (2 of 2)",
                                        "passed": 2, "failed": 0, "skipped": 0, "skip_reasons": []}}}
    [feature] = judge.TestRun.from_json(older).features
    assert (feature.summary, feature.not_run) == ("passed (2 of 2)", 0)
    # Written again, it says how many did not run. (Its cache key was another judge's: the test
    # cache key holds the plugin's bytes, so such a verdict is not reused but judged again.)
    assert judge.TestRun.from_json(older).to_json()["features"]["fix.sumsq"]["not_run"] == 0


def test_a_stop_that_cannot_be_overridden_is_judged_as_not_run(tmp_path: Path) -> None:
    # A conftest that sets maxfail itself, after the plugin turned it off: the run stops at the
    # beta failure, and the stable tests after it are not run, not passed.
    conftest = "def pytest_configure(config):\n    config.option.maxfail = 1\n"
    judged = _judge_folder(tmp_path, {"conftest.py": conftest, "test_a.py": FAIL_BETA_THEN_STABLE,
                                      "pytest.ini": "[pytest]\naddopts = -p no:randomly\n"},
                           {"b.beta": "beta", "s.stable": "stable"}, {})
    assert judged.problems == ("stable feature s.stable not proven: 2 of 2 tests not run: the run stopped early "
                               "(stopping after 1 failures)",)


def test_a_test_runs_pythons_keep_their_bytecode_in_the_run_folder_only(tmp_path: Path) -> None:
    # A worker process a test starts reads the bytecode its first import wrote (where the caller's
    # environment sets PYTHONDONTWRITEBYTECODE, as CI does); nothing is written beside the copied tests.
    files = {"helper_mod.py": "VALUE = 42\n",
             "test_spawns.py": """
        import os
        import subprocess
        import sys
        from pathlib import Path

        def test_worker_imports_the_helper():
            here = str(Path(__file__).parent)
            done = subprocess.run([sys.executable, "-c", "import helper_mod; print(helper_mod.VALUE)"],
                                  cwd=here, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": here})
            assert done.stdout.strip() == "42", done.stderr
    """}
    judged = _judge_folder(tmp_path, files, {"s.feature": "stable"}, {"test_spawns.py": ("s.feature",)})
    assert judged.problems == () and judged.features[0].result == "passed", judged
    work = tmp_path / "work"
    assert [p.name for p in (work / "pycache").rglob("helper_mod*.pyc")], sorted((work).rglob("*.pyc"))
    assert not list((work / "tests").rglob("__pycache__")), sorted((work / "tests").rglob("__pycache__"))


def test_a_feature_proved_by_its_whole_tests_folder_counts_every_test(tmp_path: Path) -> None:
    # `shipyard init` writes `tests: [tests/]`: the folder itself, which is the empty id once made
    # relative to the tests folder; it names every test, it is not one that nothing matches.
    listed = judge.listed_tests([("s.all", ("tests/",)), ("s.bare", ("tests",))], tmp_path / "tests", tmp_path)
    assert listed == {"": ("s.all", "s.bare")}
    files = {"test_a.py": "def test_one():\n    pass\n", "sub/test_b.py": "def test_two():\n    pass\n"}
    judged = _judge_folder(tmp_path, files, {"s.all": "stable", "s.bare": "stable"}, listed)
    assert {f.id: (f.passed, f.result) for f in judged.features} == {"s.all": (2, "passed"), "s.bare": (2, "passed")}
    assert judged.problems == ()


def test_two_projects_tests_folders_of_the_same_name_prove_each_its_own_features(tmp_path: Path, capsys,
                                                                                monkeypatch) -> None:
    # Projects outside the release (or pinned sdists) name their tests as their own runs do:
    # both say `tests/`, and each folder is its own project's, never the other's.
    monkeypatch.setenv("SHIPYARD_CACHE", str(tmp_path / "cache"))
    for name in ("alpha", "beta"):
        project = tmp_path / name
        (project / "src" / name).mkdir(parents=True)
        (project / "src" / name / "__init__.py").write_text("")
        (project / "tests").mkdir()
        (project / "tests" / f"test_{name}.py").write_text("def test_it():\n    pass\n")
        (project / "pyproject.toml").write_text(f'[project]\nname = "{name}"\nversion = "1.0"\n'
                                                'requires-python = ">=3.9"\n')
    root = tmp_path / "release"
    root.mkdir()
    assert main(["init", "--root", str(root), str(tmp_path / "alpha"), str(tmp_path / "beta")]) == 0, \
        capsys.readouterr().err
    spec = load_spec(root)
    alpha = spec.release.components["alpha"]
    gate = judge.feature_gate(spec, "alpha", "linux-x86_64", alpha.tests_folder(root), alpha.test_id_root(root))
    assert dict(gate.listed) == {"": ("alpha.tests",)}
