"""Shared fixtures: a copy of the real release description that a test may break, and the
services the suite needs (a Docker engine), started here and stopped at the end, so that
`nox -s tests` needs nothing started by hand."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import types
from pathlib import Path
from typing import Any

import docker_daemon
import publish_servers
import pytest
from ember_images import EmberImages
from suite_timing import SuiteTiming

from shipyard.conda.bootstrap import (
    BootstrapChannel,
    bootstrap_cuda_versions,
    ensure_bootstrap_channel,
    release_requirements,
)
from shipyard.host.toolchains.discover import discover, toolchain_cache
from shipyard.host.toolchains.sysroot import install_sysroot, sysroot_recipes
from shipyard.release.validate import load_spec

REPO = Path(__file__).resolve().parent.parent


class SpecCopy:
    """release.yaml + feature_status.yaml copied into a temp root, with empty component folders
    (and the empty tests folders release.yaml names: validate refuses a missing one)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for name in ("release.yaml", "feature_status.yaml"):
            shutil.copy(REPO / name, root / name)
        for component in ("ember", "embervision", "emberaudio", "emberelastic", "ember-lite"):
            (root / "library" / component).mkdir(parents=True, exist_ok=True)
            if component != "ember-lite":
                (root / "library" / component / "tests").mkdir(exist_ok=True)

    def edit(self, name: str, old: str, new: str) -> None:
        path = self.root / name
        text = path.read_text()
        assert old in text, f"fixture text {old!r} not found in {name}"
        path.write_text(text.replace(old, new, 1))


# `nox -s tests` runs the suite on every core with pytest-xdist (--dist loadgroup). The files
# that take minutes go first, so that no worker starts one at the end while the others idle
# (pytest_configure keeps xdist from reordering the groups by their number of tests).
SLOWEST_FIRST = ("test_release_build.py", "test_release_cuda.py", "test_conda_install.py", "test_ember_native.py",
                 "test_docker_image.py", "test_mobile_release.py", "test_manylinux_bullseye.py", "test_conda_build.py",
                 "test_publish_release.py", "test_publish_faults.py", "test_publish.py", "test_publish_images.py",
                 "test_ci_steps.py", "test_wheel_pipeline.py", "test_thirdparty_build.py", "test_test_gating.py",
                 "test_container_build.py", "test_cuda_toolkit.py")

# Session fixtures that build (not once per machine under a lock, as the toolchains and the
# conda bootstrap channel do): the tests using one share an xdist group, so it builds once.
SHARED_BUILDS = ("ember_images",)

# What a slow test needs beyond this machine's compilers, each a mark (pyproject.toml) that
# implies `slow`: `-m "not slow"` never starts dockerd or a server, nor downloads a toolkit.
# Told by the fixtures and the functions a test uses, so that the marks cannot drift; set by
# hand only where neither tells (a toolkit assembled or qemu run through the CLI).
NEEDS = ("docker", "cuda_toolkit", "network_servers", "qemu")
NEED_OF_FIXTURE = {"docker_engine": "docker"}
# The publish servers (publish_servers.py) a test, a fixture or a helper of tests/ starts.
SERVER_STARTERS = (publish_servers.devpi_server, publish_servers.static_server, publish_servers.docker_registry,
                   publish_servers.publish_site)


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
            if (isinstance(called, types.FunctionType) and Path(called.__code__.co_filename).parent == REPO / "tests"
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
    its own (`groups` is changed to say so), and the next slow group does not wait behind it."""
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
    fast = [g for g in members if g not in order]
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
    groups = {item: next((f for f in SHARED_BUILDS if f in getattr(item, "fixturenames", ())), item.path.name)
              for item in items}
    place = _deal(groups)
    items.sort(key=place.__getitem__)
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


@pytest.fixture
def spec_copy(tmp_path: Path) -> SpecCopy:
    return SpecCopy(tmp_path)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


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
        install_sysroot(recipe.name, toolchain_cache())
    discover.cache_clear()


@pytest.fixture(scope="session")
def glibc_sysroots() -> None:
    """For a fast test that needs them: the sysroots assembled, as on a machine where
    `shipyard toolchain install bullseye` ran (a bare machine has none)."""
    _glibc_sysroots()


@pytest.fixture(autouse=True, scope="session")
def glibc_sysroot(request: pytest.FixtureRequest) -> None:
    """Slow tests build Linux wheels, which compile against the bullseye sysroot (README, "The
    glibc promise"); the fast tier never downloads it. Session-scoped, so that it comes before
    a module's build fixture (test_supply_chain's signed_build) on a machine without it."""
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
def ember_images(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> EmberImages:
    """ember's images, each built once per session by shipyard's image pipeline: tested by
    test_docker_image.py, published end to end by test_publish_release.py."""
    return EmberImages(load_spec(REPO), tmp_path_factory)
