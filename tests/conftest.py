"""Shared fixtures: a copy of the real release description that a test may break, and the
services the suite needs (a Docker engine), started here and stopped at the end, so that
`nox -s tests` needs nothing started by hand."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import docker_daemon, publish_servers
from support.checkout_guard import checkout_state, written_by_suite
from support.ember_images import EmberImages
from support.minirelease import changed_since_built, shared_build
from support.release_copy import SpecCopy
from support.suite_timing import SuiteTiming

from shipyard.conda.bootstrap import (
    BootstrapChannel,
    ensure_bootstrap_channel,
    release_requirements,
)
from shipyard.conda.bootstrap_plan import bootstrap_cuda_versions
from shipyard.host.toolchains.obtain import obtain_sysroot
from shipyard.release.build_routes import sysroot_recipes
from shipyard.release.validate import load_spec

REPO = Path(__file__).resolve().parent.parent


# `nox -s tests` runs the suite on every core with pytest-xdist (--dist loadgroup). The files
# that take minutes go first, so that no worker starts one at the end while the others idle
# (pytest_configure keeps xdist from reordering the groups by their number of tests).
SLOWEST_FIRST = ("test_pipeline_ember.py", "test_pipeline_fixture.py",
                 "test_release_build.py", "test_release_cuda.py", "test_conda_install.py", "test_ember_native.py",
                 "test_docker_image.py", "test_mobile_release.py", "test_manylinux_bullseye.py", "test_conda_build.py",
                 "test_publish_release.py", "test_publish_faults.py", "test_publish.py", "test_publish_images.py",
                 "test_wheel_pipeline.py", "test_thirdparty_build.py", "test_test_gating.py",
                 "test_container_build.py", "test_cuda_toolkit.py")
# The fast files that take longest (each 5-12 s; the rest of the fast tier is under 5 s a file):
# they go out first of the fast ones, so that the small files even out the workers' ends.
HEAVIEST_FAST_FIRST = ("test_ci_workflows.py", "test_wheel_variants.py", "test_thirdparty_spec.py",
                       "test_bad_input_files.py", "test_bad_input.py", "test_report.py", "test_conda_build.py",
                       "test_get_started.py", "test_report_browser.py")

# Session fixtures that build (not once per machine under a lock, as the toolchains and the
# conda bootstrap channel do): the tests using one share an xdist group, so it builds once.
SHARED_BUILDS = ("ember_images",)
# Files whose tests run whole workflows under `shipyard ci run`: runs on one engine take turns
# (act names containers by workflow and job), so they share a worker instead of one waiting idle.
ACT_RUNS = ("test_pipeline_ember.py", "test_pipeline_fixture.py")

# What a slow test needs beyond this machine's compilers, each a mark (pyproject.toml) that
# implies `slow`: `-m "not slow"` never starts dockerd or a server, nor downloads a toolkit.
# Told by the fixtures and the functions a test uses, so that the marks cannot drift; set by
# hand only where neither tells (a toolkit assembled or qemu run through the CLI).
NEEDS = ("docker", "cuda_toolkit", "network_servers", "qemu")
NEED_OF_FIXTURE = {"docker_engine": "docker"}
# The publish servers (publish_servers.py) a test, a fixture or a helper of tests/ starts.
SERVER_STARTERS = (publish_servers.devpi_server, publish_servers.static_server, publish_servers.docker_registry,
                   publish_servers.publish_site, publish_servers.pypi_server)


def _starts_a_server(function: object, seen: set[object]) -> bool:
    """Whether `function`, or a function of tests/ it calls by name (nested ones included),
    calls one of SERVER_STARTERS."""
    code = getattr(function, "__code__", None)
    if code is None or function in seen:
        return False
    seen.add(function)
    names = getattr(function, "__globals__", {})
    codes = [code]
    while codes:
        current = codes.pop()
        codes += [c for c in current.co_consts if isinstance(c, types.CodeType)]
        for name in current.co_names:
            called = names.get(name)
            if any(called is starter for starter in SERVER_STARTERS):
                return True
            called = getattr(called, "__wrapped__", called)  # a @contextmanager of tests/

            if (isinstance(called, types.FunctionType)
                    and Path(called.__code__.co_filename).is_relative_to(REPO / "tests")
                    and _starts_a_server(called, seen)):
                return True
    return False


def _needs(item: pytest.Item) -> set[str]:
    needs = {need for fixture, need in NEED_OF_FIXTURE.items() if fixture in getattr(item, "fixturenames", ())}
    needs |= {need for need in NEEDS if item.get_closest_marker(need) is not None}
    fixture_defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})  # pytest's, no public API
    fixture_functions = [d.func for defs in fixture_defs.values() for d in defs]
    seen: set[object] = set()
    if any(_starts_a_server(f, seen) for f in [getattr(item, "function", None), *fixture_functions]):
        needs.add("network_servers")
    return needs


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--image-variant", default=None,
                     help="test_docker_image.py: test this variant's images only (nox -s docker-<variant>); "
                          "default: the CPU images, plus the CUDA checks on the cuda11 runtime image")
    parser.addoption("--reverse-files", action="store_true",
                     help="run the test files in the reverse of the usual order (each file's own tests in "
                          "theirs): the tests that usually run last run first, to show that none depends "
                          "on what ran before it")


RUN_FOLDER = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    """The table of wall and CPU time per test module at the end of the run (suite_timing.py);
    on the process that runs the session, the run's folder its workers share (docker_daemon.py).
    xdist orders its groups by their number of tests unless told not to: ours go by cost."""
    config.pluginmanager.register(SuiteTiming(config), "shipyard-suite-timing")
    if not hasattr(config, "workerinput"):
        config.stash[RUN_FOLDER] = Path(tempfile.mkdtemp(prefix="shipyard-tests-"))
        if hasattr(config.option, "loadscopereorder"):
            config.option.loadscopereorder = False


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist, on the controller: each worker is handed the run's folder."""
    node.workerinput["shipyard_run_folder"] = str(node.config.stash[RUN_FOLDER])


def _run_folder(config: pytest.Config) -> Path:
    workerinput = getattr(config, "workerinput", None)
    return Path(workerinput["shipyard_run_folder"]) if workerinput else config.stash[RUN_FOLDER]


def pytest_unconfigure(config: pytest.Config) -> None:
    """Once every worker is done: stop a dockerd this run started, and drop the run's folder."""
    folder = config.stash.get(RUN_FOLDER, None)
    if folder is not None:
        docker_daemon.stop_started_engine(folder)
        shutil.rmtree(folder, ignore_errors=True)


def _deal(groups: dict[pytest.Item, str]) -> dict[pytest.Item, int]:
    """Each test's place in the order xdist hands out the groups: SLOWEST_FIRST's (a shared group
    with the slowest of its files), then the other slow ones, then the fast ones. xdist runs a
    worker's last test only once it holds the next one, so a worker left with two tests or fewer
    is handed the next group at once, which then waits behind them: a slow group of one or two
    tests (the main job, the bullseye build) takes in a fast file of three tests or more, after
    its own (`groups` is changed to say so), and the next slow group does not wait behind it.
    The fast groups go out HEAVIEST_FAST_FIRST's first."""
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    group_rank: dict[str, int] = {}
    members: dict[str, list[pytest.Item]] = {}
    slow: set[str] = set()
    for item, group in groups.items():
        group_rank[group] = min(group_rank.get(group, len(rank)), rank.get(item.path.name, len(rank)))
        members.setdefault(group, []).append(item)
        if item.get_closest_marker("slow") is not None:
            slow.add(group)
    ranked = sorted((g for g in members if group_rank[g] < len(rank)), key=group_rank.__getitem__)
    order = ranked + [g for g in members if g in slow and g not in ranked]
    heavy = {name: i for i, name in enumerate(HEAVIEST_FAST_FIRST)}
    fast = sorted((g for g in members if g not in order),
                  key=lambda g: min(heavy.get(item.path.name, len(heavy)) for item in members[g]))
    companions = [g for g in fast if len(members[g]) > 2]
    place: dict[pytest.Item, int] = {}
    for group in order + fast:
        if members[group][0] in place:
            continue  # a companion, placed after its slow group
        for item in members[group]:
            place[item] = len(place)
        if group in slow and len(members[group]) <= 2 and companions:
            for item in members[companions.pop(0)]:
                groups[item] = group
                place[item] = len(place)
    return place


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks what each slow test needs (NEEDS), and deals the tests to xdist's workers: each file
    is one group (its module fixtures build once, on one worker), but the tests of a session
    fixture that builds (SHARED_BUILDS) share one group; groups go out slowest first."""
    for item in items:
        needs = _needs(item)
        for need in sorted(needs):
            item.add_marker(need)
        if needs and item.get_closest_marker("slow") is None:
            item.add_marker("slow")
    groups = {item: next((f for f in SHARED_BUILDS if f in getattr(item, "fixturenames", ())),
                         "act-runs" if item.path.name in ACT_RUNS else item.path.name)
              for item in items}
    place = _deal(groups)
    items.sort(key=place.__getitem__)
    if config.getoption("reverse_files"):
        rank: dict[object, int] = {}  # first a group's, then a file's place in the usual order
        for item in items:
            rank.setdefault(groups[item], len(rank))
            rank.setdefault(item.path, len(rank))
        items.sort(key=lambda item: (-rank[groups[item]], -rank[item.path], place[item]))
    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[item]))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Refuse to run when xdist did not take the groups: each file's tests would then be spread
    over the workers and every session fixture (the conda release, dockerd) would be made on
    each of them. pytest 9.2 with xdist 3.8 did exactly that without a word."""
    if not session.config.getoption("loadgroup", default=False):
        return
    ungrouped = [item.nodeid for item in session.items if "@" not in item.nodeid]
    if ungrouped:
        message = (
            f"pytest-xdist --dist loadgroup did not group {len(ungrouped)} tests (first: {ungrouped[0]}): "
            "this pytest and pytest-xdist do not work together; install the versions pinned in "
            "pyproject.toml (pip install -e '.[test]')")
        os.write(2, f"\nERROR: {message}\n".encode())  # a worker's exception reaches nobody; its stderr does
        raise pytest.UsageError(message)


# --- the checkout stays as the suite found it ------------------------------------------------
# Every test keeps its state under pytest's temporary folders (or the suite's session folder
# below); support/checkout_guard.py says what the suite wrote into the checkout, and what it
# leaves out (the run's own log, `nox -s tests > run.log`). The controller compares before and
# after the run; xdist workers share its checkout.
_checkout_key = pytest.StashKey[dict[str, tuple[str, int, int]] | None]()
_checkout_problem = pytest.StashKey[str]()


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):
        session.config.stash[_checkout_key] = checkout_state(REPO)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Fail the run, naming the paths, when the suite wrote into the checkout."""
    before = session.config.stash.get(_checkout_key, None)
    if before is None or hasattr(session.config, "workerinput"):
        return
    changed = written_by_suite(REPO, before, checkout_state(REPO) or {})
    if os.environ.get("SHIPYARD_IMAGE_TESTED_WHEELS"):
        # `nox -s docker-<variant>` built the wheels into dist/ and asks its tests to record the
        # images there (ember_images.py): the one write into the checkout that was asked for.
        changed = [p for p in changed if not p.startswith("dist/")]
    if not changed:
        return
    # One line per top-level folder (a build writes thousands of files under dist/ and .shipyard/).
    by_top: dict[str, list[str]] = {}
    for path in changed:
        by_top.setdefault(path.split("/", 1)[0] + ("/" if "/" in path else ""), []).append(path)
    shown = "\n  ".join(paths[0] if len(paths) == 1 else f"{top} ({len(paths)} paths, e.g. {paths[0]})"
                        for top, paths in by_top.items())
    session.config.stash[_checkout_problem] = (
        f"the suite wrote into the checkout {REPO} ({len(changed)} paths):\n  {shown}\n"
        "a test keeps its state under tmp_path or the suite's session folder (fixture suite_state), "
        "never in the checkout: pass --dist/--state (or a copy of the checkout) to the commands it runs")
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    problem = config.stash.get(_checkout_problem, "")
    if problem:
        terminalreporter.section("checkout written", sep="=", red=True, bold=True)
        terminalreporter.write_line(f"ERROR: {problem}", red=True)


@pytest.fixture(scope="session")
def suite_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `--state` folder the suite's release builds share (build cache, work folders), in
    place of the checkout's .shipyard: one per run, the same for every xdist worker (their
    temporary folders share a parent), so that each cell builds once per run. The cache takes
    file locks, as it does for builds that share a machine."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    state = base / "shipyard-state"
    state.mkdir(exist_ok=True)
    return state


@pytest.fixture
def spec_copy(tmp_path: Path) -> SpecCopy:
    return SpecCopy(tmp_path)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def minirelease_build(tmp_path_factory: pytest.TempPathFactory, glibc_sysroots: None) -> Iterator[Path]:
    """The fixture release built once per suite run (minirelease.shared_build), read by every test
    that does not change it; a test that does works in minirelease.own_copy of it. Under
    pytest-xdist it lives in the folder the workers' temp folders share, so that one worker
    builds it and the others reuse it; alone, in this run's temp folder. At the end, a test that
    wrote into it anyway is an error: the tests after it would have read its changes."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    root = shared_build(shared / "minirelease-cpu")
    yield root
    changed = changed_since_built(root)
    assert not changed, (f"a test changed the shared build of the fixture release ({root}): "
                         f"{', '.join(changed[:10])}; a test that changes state works in minirelease.own_copy")


@pytest.fixture(scope="session")
def conda_cuda_versions() -> tuple[str, ...]:
    """The release's CUDA versions whose runtime the bootstrap channel can repack."""
    return bootstrap_cuda_versions(v.cuda for v in load_spec(REPO).release.variants.values() if v.cuda)


@pytest.fixture(scope="session")
def conda_bootstrap(conda_cuda_versions: tuple[str, ...]) -> BootstrapChannel:
    """The bootstrap channel the conda tests build and install against: Python 3.11, every CUDA
    runtime of the release this machine can repack, what the release's recipes and tests need.
    Built once per machine (shipyard's cache), shared by every test and worker."""
    return ensure_bootstrap_channel(pythons=["3.11"], cuda_versions=conda_cuda_versions,
                                    requirements=release_requirements(load_spec(REPO)))


@functools.cache
def _glibc_sysroots() -> None:
    """Assemble, once per machine, the sysroots the release and the fixture releases promise
    (manylinux_2_31: bullseye), as `nox -s build-cpu` does with --install-toolchain."""
    for recipe in sysroot_recipes():
        obtain_sysroot(recipe.name, progress=lambda _: None)


@pytest.fixture(scope="session")
def glibc_sysroots() -> None:
    """For a fast test that needs them: the sysroots assembled, as on a machine where
    `shipyard toolchain install bullseye` ran (a bare machine has none)."""
    _glibc_sysroots()


@pytest.fixture(autouse=True, scope="session")
def glibc_sysroot(request: pytest.FixtureRequest) -> None:
    """Slow tests build Linux wheels, which compile against the bullseye sysroot (docs/glibc.md, "The
    glibc promise"); the fast tier never downloads it. Session-scoped, so that it comes before
    a module's build fixture (test_thirdparty_build's built) on a machine without it."""
    if any(item.get_closest_marker("slow") is not None for item in request.session.items):
        _glibc_sysroots()


@pytest.fixture(scope="session")
def docker_engine(request: pytest.FixtureRequest) -> None:
    """A Docker engine: the running one, else the one dockerd of this run, which the first test
    that needs it starts (on whichever worker) and the session's end stops (docker_daemon.py).
    A machine set up by ci/bootstrap.sh has docker.io; without it the tests that need an
    engine fail with the fix, they are not skipped."""
    docker_daemon.ensure_engine(_run_folder(request.config))


@pytest.fixture(scope="session")
def ember_images(docker_engine: None, tmp_path_factory: pytest.TempPathFactory, suite_state: Path) -> EmberImages:
    """ember's images, each built once per session by shipyard's image pipeline: tested by
    test_docker_image.py, published end to end by test_publish_release.py."""
    return EmberImages(load_spec(REPO), tmp_path_factory, suite_state)
