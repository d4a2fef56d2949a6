"""Run a component's tests where a user has the package: a fresh venv with the project
installed by name from the variant's index (`run_component_tests`), or any environment an
installer makes (`run_installed_tests`: a conda prefix), then a copy of the tests with the
plugin that records what ran; verdict.py judges the record."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from packaging.utils import NormalizedName, canonicalize_name, parse_wheel_filename

from shipyard.errors import ToolError
from shipyard.host.toolchains.discover import Interpreter
from shipyard.plumbing import command
from shipyard.plumbing.wheel_metadata import requires_dist
from shipyard.release.pytest_selection import PytestSelection
from shipyard.testing.project_copy import copy_for_tests
from shipyard.testing.venv import ensure_wheelhouse, make_test_env
from shipyard.testing.verdict import (
    FeatureGate,
    FeatureOutcome,
    TestRun,
    feature_outcomes,
    fold_feature_report,
    slowest_tests,
    verdict_problems,
)


def component_test_requirements(tests_dir: Path) -> list[str]:
    file = tests_dir / "requirements.txt"
    lines = file.read_text().splitlines() if file.is_file() else []
    reqs = [ln.split("#", 1)[0].strip() for ln in lines]
    return ["pytest>=7"] + [r for r in reqs if r]


def ensure_test_wheelhouse(wheel: Path, interpreter: Interpreter, *, tests_dir: Path,
                           local_projects: set[NormalizedName], test_requires: Sequence[str], state: Path) -> Path:
    """The wheelhouse the tests of `wheel` install their third-party packages from: its
    dependencies outside the release and the tests' requirements, downloaded once per Python."""
    runtime_deps = [str(r) for r in requires_dist(wheel)
                    if canonicalize_name(r.name) not in local_projects
                    and (r.marker is None or "extra" not in str(r.marker))]
    return ensure_wheelhouse(interpreter, [*runtime_deps, *component_test_requirements(tests_dir), *test_requires],
                             state)


def run_component_tests(*, wheel: Path, variant_index: Path, interpreter: Interpreter, tests_dir: Path,
                        gate: FeatureGate, other_features: Sequence[str] = (), source_dir: Path,
                        state: Path, work: Path, local_projects: set[NormalizedName],
                        installer: str = "uv", ports: range | None = None, timeout: float = 1800,
                        test_requires: Sequence[str] = (), selection: PytestSelection | None = None,
                        by_file: bool = False, extra_env: Mapping[str, str] | None = None) -> TestRun:
    """Install the wheel's project by name from `variant_index` into a fresh venv of
    `interpreter` (with `installer`), run `tests_dir` against it, and judge the run by `gate`.
    The tests' requirements are pytest, `tests_dir/requirements.txt` and `test_requires`
    (release.yaml's, for a project whose tests folder it does not own). `by_file`: install `wheel`
    itself, its dependencies from the index (a wheel that resolution by name does not pick on this
    host: a manylinux2014 wheel beside the manylinux_2_31 one). `extra_env`: more of the tests'
    environment (the compilers the cell was built with, SHIPYARD_CC/SHIPYARD_CXX).

    Everything the run writes stays under `work` (its TMPDIR too); `ports`, when given, is the
    range the tests pick fixed ports from (SHIPYARD_PORT_RANGE), so cells run side by side."""
    name, version, _, _ = parse_wheel_filename(wheel.name)
    expected = str(version)
    requirements = [*component_test_requirements(tests_dir), *test_requires]

    def install() -> Installed:
        house = ensure_test_wheelhouse(wheel, interpreter, tests_dir=tests_dir, local_projects=local_projects,
                                       test_requires=test_requires, state=state)
        python = make_test_env(installer, interpreter=interpreter, venv=work / "venv", wheelhouse=house,
                               requirements=requirements, index=variant_index,
                               project=str(wheel.resolve()) if by_file else str(name), state=state)
        installed = command.run([python, "-c", f"import importlib.metadata as m; print(m.version({str(name)!r}))"]
                                ).stdout.strip()
        if installed != expected:
            return Installed(python, installed, (f"{installer} resolved {name} {installed} from {variant_index}, "
                                                 f"expected {expected}: the wrong variant would reach users",))
        return Installed(python, installed)

    return run_installed_tests(install, installer, tests_dir=tests_dir, gate=gate, other_features=other_features,
                               source_dir=source_dir, state=state, work=work, ports=ports, timeout=timeout,
                               selection=selection, extra_env=extra_env)


@dataclass(frozen=True)
class Installed:
    """What installing a package for its tests gave: the Python to run them with (None when the
    install failed, and `problems` say why), the version found installed, and problems found."""

    python: Path | None
    version: str
    problems: tuple[str, ...] = ()


def run_installed_tests(install: Callable[[], Installed], installer: str, *, tests_dir: Path, gate: FeatureGate,
                        other_features: Sequence[str] = (), source_dir: Path, state: Path, work: Path,
                        ports: range | None = None, timeout: float = 1800,
                        selection: PytestSelection | None = None,
                        extra_env: Mapping[str, str] | None = None) -> TestRun:
    """The one shape of every package test: a fresh `work` folder (with its TMPDIR), `install` the
    package into an environment there (a venv, a conda prefix), run the tests with its Python and
    judge them by `gate`; the TestRun says what was installed by `installer`, and how long it took."""
    start, started_at = time.monotonic(), time.time()
    if work.exists():
        shutil.rmtree(work)
    (work / "tmp").mkdir(parents=True)
    installed = install()
    if installed.python is None:
        return TestRun("", (), time.monotonic() - start, "", installed.problems, installer,
                       span=(started_at, time.time()))
    judged = run_and_judge_tests(installed.python, tests_dir=tests_dir, gate=gate, other_features=other_features,
                                 source_dir=source_dir, state=state, work=work, ports=ports, timeout=timeout,
                                 selection=selection, extra_env=extra_env)
    return TestRun(installed.version, judged.features, time.monotonic() - start, judged.log_tail,
                   installed.problems + judged.problems, installer, judged.slowest, (started_at, time.time()),
                   judged.left_out)


@dataclass(frozen=True)
class JudgedTests:
    """One run of a component's tests with one interpreter, judged by the feature gate."""

    features: tuple[FeatureOutcome, ...]
    log_tail: str
    problems: tuple[str, ...]
    slowest: tuple[tuple[str, float], ...] = ()
    left_out: Mapping[str, Any] | None = None  # what `selection` left out, when one was given


def run_and_judge_tests(python: Path, *, tests_dir: Path, gate: FeatureGate, other_features: Sequence[str] = (),
                        source_dir: Path, state: Path, work: Path, ports: range | None = None,
                        timeout: float = 1800, selection: PytestSelection | None = None,
                        extra_env: Mapping[str, str] | None = None) -> JudgedTests:
    """Run `tests_dir` in a copy of the project `source_dir` with `python` (whose environment
    holds the installed package: a venv for wheels, a conda prefix for conda packages) and judge
    the run by `gate`.

    Everything the run writes stays under `work`, which must exist with a `tmp` folder (TMPDIR)."""
    plugin_dir = resources.files("shipyard.resources").joinpath("pytest_plugin")
    run = pytest_invocation(work, tests_dir=tests_dir, project_dir=source_dir, gate=gate,
                            other_features=other_features, selection=selection, plugin_dir=str(plugin_dir), inside=str)
    env = run.env
    # For tests that build native code from sources (e.g. Windows executables under wine), and where
    # they keep what depends on neither the Python nor the wheel (a cross-built executable, say),
    # keyed by its inputs: one build for every cell.
    env |= {"SHIPYARD_COMPONENT_SOURCE": str(source_dir), "SHIPYARD_TEST_CACHE": str(state / "test-cache"),
            **(extra_env or {})}
    if ports is not None:
        env["SHIPYARD_PORT_RANGE"] = f"{ports.start}-{ports.stop - 1}"
    exit_status: int | None = None
    try:
        result = command.run([python, *run.argv], cwd=Path(run.cwd), extra_env=env, timeout=timeout, check=False,
                             what="component tests")
        exit_status = result.returncode
        log_tail = "\n".join(result.output.splitlines()[-30:])
    except ToolError as exc:
        log_tail = str(exc)
    return judge_run(work, exit_status, log_tail, gate, selection)


@dataclass(frozen=True)
class PytestRun:
    """How the component's tests are started: what follows the Python (`-m pytest …`), the
    plugins' environment and the folder to run in, each path as that Python sees it."""

    argv: list[str]
    env: dict[str, str]
    cwd: str


def pytest_invocation(work: Path, *, tests_dir: Path, project_dir: Path | None, gate: FeatureGate,
                      other_features: Sequence[str], selection: PytestSelection | None, plugin_dir: str,
                      inside: Callable[[Path], str]) -> PytestRun:
    """Copy `project_dir` with its `tests_dir` into `work` (project_copy.py; the tests alone when
    they lie outside it) and write the YAML's test ids beside it; return how to run pytest there,
    each path as the Python that runs it sees it (`inside`: this host's path, or the path a
    container mounts it at).

    pytest runs in the project's copy as in the project's own runs: its rootdir's configuration
    (pytest.ini, pyproject.toml, tox.ini, setup.cfg, as pytest chooses), its root conftest.py and
    the files beside the tests all apply. What shipyard overrides, each because it would hide
    results, is said where it is set below."""
    copy = copy_for_tests(tests_dir, project_dir, work / "project", keep_out=work)
    # pytest looks for its configuration from the tests upwards, past the copy: without this
    # (empty) one in the run's folder, a project with no configuration of its own would take that of
    # whatever folder holds the run (the release's own checkout, say). An empty file sets nothing.
    (work / "pytest.ini").write_text("")
    report = work / "feature-report.jsonl"
    report.unlink(missing_ok=True)  # the plugin appends
    listed = work / "feature-tests.json"
    # A listed id that pytest_args' --ignore leaves out is left out, not unmatched (it is in the
    # record's left_out); -k, -m and --deselect are seen as deselection by the plugin itself.
    kept = {k: list(v) for k, v in gate.listed.items() if not (selection and selection.ignores(k))}
    listed.write_text(json.dumps(kept, sort_keys=True))
    # Bytecode goes into the run's folder, never beside the venv's or the copied tests' sources; every
    # Python of the run reads it there (the worker processes a distributed test starts imported the
    # package and numpy from source each, where PYTHONDONTWRITEBYTECODE was set, as it was here).
    env = {"PYTHONPATH": plugin_dir, "SHIPYARD_FEATURE_REPORT": inside(report),
           "PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": inside(work / "pycache"),
           "SHIPYARD_OTHER_FEATURES": ",".join(sorted(other_features)),
           "SHIPYARD_FEATURE_TESTS": inside(listed), "SHIPYARD_TESTS_ROOT": inside(copy.tests),
           "TMPDIR": inside(work / "tmp")}
    # release.yaml's pytest_args: the plugin that applies --deselect and records what was left out
    # is registered first, so that it sees the feature report plugin's own deselection as done.
    selecting = ["-p", "shipyard_selection", *selection.pytest_argv(Path(inside(copy.tests)))] if selection else []
    if selection:
        env |= {name: inside(Path(value)) for name, value in selection.plugin_env(work).items()}
    # What shipyard sets over the project's configuration (pytest reads its addopts first, so these win):
    # - its plugins: shipyard_test_paths makes the helpers beside the tests importable and takes the
    #   run's folder off sys.path (the sources must never shadow the installed package);
    #   shipyard_feature_report records what ran and turns off what would stop the run early or move
    #   it into other processes (-x, --maxfail, --sw, xdist's -n): every test must get its verdict.
    # - --import-mode=importlib: the default mode puts the folder of every conftest.py and test
    #   file outside a package first on sys.path, which would put the project's copy before
    #   site-packages; test_paths appends those folders after it instead.
    # - --rootdir: the project's copy, as in its own runs from its root (an empty pytest.ini above
    #   it would otherwise be taken as the rootdir); node ids are made relative to the tests folder
    #   by the plugins, which is what feature_status.yaml and pytest_args name.
    # - cache_dir: a fresh one in the run's folder. The project's --lf/--ff/--nf/--sw then work as on
    #   a first run (every test runs), and no verdict depends on an earlier run.
    # What the project's configuration sets otherwise holds (filterwarnings = error, markers,
    # --strict-markers, -p no:…, --doctest-modules, addopts that need a plugin: list that plugin
    # in the tests' requirements, or the run ends with pytest's usage error in the cell's problems).
    argv = ["-m", "pytest", inside(copy.tests), "-p", "shipyard_test_paths", *selecting,
            "-p", "shipyard_feature_report", "--import-mode=importlib", "--rootdir", inside(copy.root),
            "-o", f"cache_dir={inside(work / 'pytest-cache')}", "-q", "-rs"]
    return PytestRun(argv, env, inside(copy.root))


def judge_run(work: Path, exit_status: int | None, log_tail: str, gate: FeatureGate,
              selection: PytestSelection | None = None) -> JudgedTests:
    """The verdict of the run whose record the plugin wrote into `work` (pytest_invocation), by
    `gate`: a run with no exit status or no record did not run to completion."""
    report = work / "feature-report.jsonl"
    folded = fold_feature_report(report.read_text(encoding="utf-8", errors="replace"), exit_status) \
        if exit_status is not None and report.is_file() else None
    if exit_status is None or folded is None:
        return JudgedTests((), log_tail, (f"the tests did not run to completion: {log_tail[-1500:]}",))
    outcomes = feature_outcomes(folded, gate)
    problems = verdict_problems(exit_status, folded, outcomes, log_tail)
    return JudgedTests(outcomes, log_tail, tuple(problems), slowest_tests(folded),
                       selection.left_out(work) if selection else None)


def console_script_problems(venv: Path, scripts: Sequence[str], timeout: float = 120) -> list[str]:
    """Each declared console script is installed in `venv` and `<script> --help` exits 0; what
    is wrong otherwise, one line per script."""
    problems = []
    for script in scripts:
        exe = venv / "bin" / script
        if not exe.is_file():
            problems.append(f"console script {script} is not installed (release.yaml declares it)")
            continue
        result = command.run([exe, "--help"], check=False, timeout=timeout, what=f"{script} --help")
        if result.returncode != 0:
            tail = "\n".join(result.output.strip().splitlines()[-5:])
            problems.append(f"console script {script}: `{script} --help` exited {result.returncode}: {tail}")
    return problems
