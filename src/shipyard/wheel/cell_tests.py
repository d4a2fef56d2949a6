"""The test stage of `shipyard build`: every built cell tested from the variant index, each in a
venv of its own (TMPDIR and ports its own too), cached verdicts at once, the rest side by side;
pip's resolution checked on some cells where uv installs the rest (test_env.py says why)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import NormalizedName, canonicalize_name

from shipyard.errors import ShipyardError
from shipyard.host.source_tree import hash_tree
from shipyard.host.toolchains.discover import Compiler, Interpreter
from shipyard.host.toolchains.resolve import Toolchain
from shipyard.plumbing.build_cache import cache_key
from shipyard.plumbing.port_ranges import claimed_port_range
from shipyard.plumbing.progress import running
from shipyard.plumbing.wheel_metadata import requires_dist
from shipyard.release.pytest_selection import selection_of
from shipyard.testing.runner import console_script_problems, ensure_test_wheelhouse, run_component_tests
from shipyard.testing.verdict import FeatureGate, feature_gate, judge_identity
from shipyard.wheel.build_request import BuildContext, CellOutcome, dependency_detail, untested_detail
from shipyard.wheel.index import content_identity

# --- test -----------------------------------------------------------------------------------

@dataclass
class _TestTask:
    outcome: CellOutcome
    interpreter: Interpreter
    tests_dir: Path
    gate: FeatureGate
    others: list[str]
    installer: str
    local_deps: list[Path]  # the wheels of the variant index its install can pull in
    compiler: Compiler | None  # what the cell's native code was built with (None: a pure wheel)
    by_file: bool  # installed from its file, not by name (resolution here picks another platform's wheel)
    key: str = ""
    test_json: dict[str, Any] | None = None  # its run's verdict (TestRun.to_json), once it ran

    @property
    def wheel(self) -> Path:
        assert self.outcome.wheel is not None  # only built cells are tested
        return self.outcome.wheel


def run_cell_tests(ctx: BuildContext, outcomes: list[CellOutcome], resolved: dict[str, Toolchain],
                   variant_dir: Path) -> None:
    """Test every built cell from the variant index: cached verdicts at once, the rest side by
    side (ctx.request.test_jobs at a time), each cell with its own venv, TMPDIR and ports. An abi3
    cell's one wheel is tested on each of its Pythons, and their verdicts make its one verdict."""
    local = {canonicalize_name(n) for n in ctx.spec.release.components}
    tasks: list[_TestTask] = []
    for outcome in outcomes:
        if outcome.wheel is None or outcome.result == "failed":
            continue
        component = ctx.spec.release.components[outcome.cell.component]
        if (dependent := ctx.dependencies.get(component.name)) is not None:
            outcome.result, outcome.detail = "not tested", dependency_detail(component.name, dependent)
            continue
        if not component.tests:
            outcome.detail = "no tests declared"
            continue
        interpreters = _test_interpreters(ctx, outcome, resolved)
        if not interpreters:
            # Built, repaired and arch-checked like every cell; only its suite is left out, and it
            # says so: a cell that did not run its tests never reads as passed (nor as cached).
            outcome.result, outcome.detail = "not tested", untested_detail(ctx.request.test_pythons)
            continue
        tests_dir = component.tests_folder(ctx.root)
        # A pure wheel is tested here, so this host's platform gates it.
        platform = ctx.inventory.host_platform if outcome.cell.is_pure else outcome.cell.platform
        gate = feature_gate(ctx.spec, component.name, platform, tests_dir, component.test_id_root(ctx.root))
        others = sorted(f.id for f in ctx.spec.features.features if f.component != component.name)
        deps = _local_dependency_wheels(outcome.wheel, variant_dir, local)
        # pip and uv pick the host's own platform's wheel by name (manylinux_2_31 over manylinux2014):
        # a second platform's cell is tested with its own wheel, installed from its file.
        by_file = not outcome.cell.is_pure and outcome.cell.platform != ctx.inventory.host_platform
        compiler = resolved[outcome.cell.id].compiler
        tasks += [_TestTask(outcome, interpreter, tests_dir, gate, others, installer=ctx.request.test_installer,
                            local_deps=deps, compiler=compiler, by_file=by_file) for interpreter in interpreters]
    if ctx.request.test_installer == "uv":
        _choose_pip_cells(tasks)
    pending = []
    for task in tasks:
        task.key = _test_key(ctx, task)
        entry = ctx.cache.get(task.key)
        if entry is None:
            pending.append(task)
        else:
            task.test_json = entry.metadata()["tests"]
    errors: dict[int, str] = {}
    if pending:
        with ThreadPoolExecutor(max_workers=max(1, min(ctx.request.test_jobs, len(pending)))) as pool:
            for task, error in zip(pending, pool.map(lambda t: _run_tests(ctx, t, variant_dir, local), pending),
                                   strict=True):
                if error:
                    errors[id(task.outcome)] = errors.get(id(task.outcome), "") or _on_python(task, error)
    by_outcome: dict[int, list[_TestTask]] = {}
    for task in tasks:
        by_outcome.setdefault(id(task.outcome), []).append(task)
    for group in by_outcome.values():
        outcome = group[0].outcome
        if id(outcome) in errors:
            outcome.result, outcome.detail = "failed", f"test: {errors[id(outcome)]}"
            continue
        runs = {task.interpreter.version: task.test_json for task in group if task.test_json is not None}
        if outcome.cell.is_abi3:
            outcome.tested_pythons = tuple(runs)
            outcome.test_json = merged_runs(runs)
        else:
            outcome.test_json = next(iter(runs.values()))
        _judge(group[0], cached=all(task not in pending for task in group))


def built_with_compilers(compiler: Compiler | None) -> dict[str, str]:
    """SHIPYARD_CC and SHIPYARD_CXX for a cell's tests: the compilers its native code was built with
    (the bullseye sysroot's gcc, zig's clang for manylinux2014), so that a test compiling a program
    against the installed package (ember's C++ API) links the same C++ library as the package; nothing
    for a cell built without one (a pure wheel). Not CC/CXX: the tests' own builds of other things
    (ember-lite's host build, shared between cells) keep the host's compilers."""
    if compiler is None:
        return {}
    return {"SHIPYARD_CC": str(compiler.cc), "SHIPYARD_CXX": str(compiler.cxx)}


def _test_interpreters(ctx: BuildContext, outcome: CellOutcome, resolved: dict[str, Toolchain]) -> list[Interpreter]:
    """The interpreters `outcome`'s cell is tested with: its own; each of an abi3 cell's Pythons
    (those the build selected, --python and --test-python) found here. Empty: none to test with."""
    cell, request = outcome.cell, ctx.request
    if not cell.is_abi3:
        interpreter = resolved[cell.id].interpreter
        assert interpreter is not None
        left_out = request.test_pythons and not cell.is_pure and cell.python not in request.test_pythons
        return [] if left_out else [interpreter]
    wanted = [p for p in cell.pythons if (not request.pythons or p in request.pythons)
              and (not request.test_pythons or p in request.test_pythons)]
    found = [i for p in wanted if (i := ctx.inventory.interpreter(p)) is not None]
    if missing := [p for p in wanted if ctx.inventory.interpreter(p) is None]:
        ctx.progress(f"{cell.id}: not tested on Python {', '.join(missing)}: no interpreter here "
                     f"(the manifest lists the Pythons it was tested on)")
    return found


def _on_python(task: _TestTask, error: str) -> str:
    """`error` of an abi3 cell's test run, naming the Python it ran on."""
    return f"Python {task.interpreter.version}: {error}" if task.outcome.cell.is_abi3 else error


def merged_runs(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One verdict for a wheel tested on several Pythons (an abi3 cell), by Python: failed when any
    run failed, each problem and each failed feature naming its Python; every feature's entry is
    that of a run where it failed, else of the first run; `pythons` holds each run's result."""
    failing = [python for python, run in runs.items() if run["result"] != "passed"]
    merged = dict(runs[failing[0] if failing else next(iter(runs))])
    features: dict[str, dict[str, Any]] = {}
    for python, run in runs.items():
        for fid, feature in run["features"].items():
            if fid not in features or (feature["result"] == "failed" and features[fid]["result"] != "failed"):
                summary = feature.get("summary")
                failed = feature["result"] == "failed"
                features[fid] = {**feature, "summary": f"Python {python}: {summary}" if failed else summary}
    merged |= {"result": "failed" if failing else "passed", "features": features,
               "problems": [f"Python {python}: {p}" for python, run in runs.items() for p in run["problems"]],
               "seconds": round(sum(run["seconds"] for run in runs.values()), 2),
               "pythons": {python: run["result"] for python, run in runs.items()}}
    return merged


def prefetch_test_wheelhouse(ctx: BuildContext, outcome: CellOutcome, interpreter: Interpreter) -> None:
    """Download a just-built cell's test dependencies now, while other cells still compile (the
    download waits on the network, not the cores); the test stage finds them there. A failure
    is left for the test stage, which meets it again and records it."""
    component = ctx.spec.release.components[outcome.cell.component]
    if not ctx.request.run_tests or not component.tests or outcome.wheel is None or outcome.result == "failed":
        return
    try:
        ensure_test_wheelhouse(outcome.wheel, interpreter, tests_dir=component.tests_folder(ctx.root),
                               local_projects={canonicalize_name(n) for n in ctx.spec.release.components},
                               test_requires=component.test_requires, state=ctx.request.state)
    except ShipyardError:
        pass


def _choose_pip_cells(tasks: list[_TestTask]) -> None:
    """uv makes the test environments; pip, what users run, keeps one real resolution by name
    from the variant's index per Python: the cell whose install pulls in most of the release's
    own packages (emberelastic brings ember), the first of them on a tie."""
    by_python: dict[str, list[_TestTask]] = {}
    for task in tasks:
        by_python.setdefault(task.interpreter.version, []).append(task)
    for group in by_python.values():
        chosen = max(group, key=lambda t: len(t.local_deps))
        chosen.installer = "pip"


def _test_key(ctx: BuildContext, task: _TestTask) -> str:
    component = ctx.spec.release.components[task.outcome.cell.component]
    # Content identities, not file hashes: a new commit re-labels every wheel (git sha,
    # timestamps) without changing what the tests exercise.
    index_state = sorted(content_identity(w) for w in task.local_deps)
    gate = task.gate
    test_inputs = {"wheel": content_identity(task.wheel), "index": index_state, "installer": task.installer,
                   "gating": dict(gate.statuses), "blocking": sorted(gate.vocabulary.blocking),
                   "present": sorted(gate.present),
                   "listed": {k: list(v) for k, v in gate.listed.items()}, "others": task.others,
                   "console_scripts": list(component.console_scripts),
                   "test_requires": list(component.test_requires), "judge": judge_identity(),
                   "pytest_args": list(component.pytest_args),
                   # The compilers a test builds consumers with, and how the wheel was installed.
                   "compiler": task.compiler.identity if task.compiler else "", "by_file": task.by_file,
                   # The tests run in a copy of the project: its pytest configuration, root conftest.py
                   # and the files beside the tests change the verdict as the tests do.
                   "project": hash_tree(component.source_dir(ctx.root))}
    return cache_key(kind="test", sources=hash_tree(task.tests_dir), spec_section=test_inputs,
                     toolchain=task.interpreter.identity, python=task.interpreter.version)


def _run_tests(ctx: BuildContext, task: _TestTask, variant_dir: Path, local: set[NormalizedName]) -> str:
    """Run one cell's tests; record the verdict (cached when it passed). An error in words, or ''."""
    outcome = task.outcome
    component = ctx.spec.release.components[outcome.cell.component]
    # An abi3 cell's Pythons each test the one wheel in a folder of their own.
    run_id = f"{outcome.cell.id}-py{task.interpreter.version}" if outcome.cell.is_abi3 else outcome.cell.id
    label = f"test {run_id} ({task.installer})"
    ctx.progress(label)
    work = ctx.request.state / "test" / run_id
    try:
        with claimed_port_range() as ports, running(ctx.progress, label):
            run = run_component_tests(
                wheel=task.wheel, variant_index=variant_dir, interpreter=task.interpreter,
                tests_dir=task.tests_dir, gate=task.gate, other_features=task.others,
                source_dir=component.source_dir(ctx.root), state=ctx.request.state, work=work,
                local_projects=local, installer=task.installer, ports=ports,
                test_requires=component.test_requires, selection=selection_of(component.pytest_args),
                by_file=task.by_file, extra_env=built_with_compilers(task.compiler))
            # In the venv the tests ran in: each declared console script is there and runs.
            scripts = console_script_problems(work / "venv", component.console_scripts)
    except ShipyardError as exc:
        return str(exc)
    task.test_json = run.to_json()
    if scripts:
        task.test_json |= {"result": "failed", "problems": [*run.problems, *scripts]}
    outcome.seconds += run.seconds
    if run.passed and not scripts:
        ctx.cache.put(task.key, [], {"kind": "test", "tests": task.test_json})
    return ""


def _judge(task: _TestTask, *, cached: bool) -> None:
    outcome = task.outcome
    assert outcome.test_json is not None
    report: dict[str, Any] = outcome.test_json
    problems = list(report.get("problems") or [])
    if problems:
        outcome.result = "failed"
        outcome.detail = "; ".join(str(p) for p in problems)
        return
    # What did not fully prove itself, in words: failures that do not block, and
    # features whose tests were partly or wholly skipped.
    soft = [f"{fid} ({f['status']}) {f.get('summary') or f['result']}"
            for fid, f in report["features"].items()
            if f["result"] not in ("passed", "not-run")
            or (f["result"] == "not-run" and (fid in task.gate.present or f.get("not_run")))]
    outcome.result = "cached" if (cached and outcome.result == "cached") else "passed"
    outcome.detail = "; ".join(soft)


def _local_dependency_wheels(wheel: Path, variant_dir: Path, local: set[NormalizedName]) -> list[Path]:
    """Wheels in the variant index that `wheel` can pull in (its local dependencies, transitively):
    a change in them must re-run its tests, a change elsewhere need not."""
    seen: set[str] = set()
    todo = [wheel]
    found: list[Path] = []
    while todo:
        current = todo.pop()
        for requirement in requires_dist(current):
            name = canonicalize_name(requirement.name)
            if name in local and name not in seen:
                seen.add(name)
                deps = sorted((variant_dir / name).glob("*.whl"))
                found += deps
                todo += deps
    return found
