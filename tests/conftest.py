"""Shared fixtures: a copy of the real release description that a test may break, and the
services the suite needs (a Docker engine), started here and stopped at the end, so that
`nox -s tests` needs nothing started by hand."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ember_images import EmberImages
from suite_timing import SuiteTiming

from shipyard.conda.bootstrap import (
    BootstrapChannel,
    bootstrap_cuda_versions,
    ensure_bootstrap_channel,
    release_requirements,
)
from shipyard.host import docker_base
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
# that take minutes go first, so that no worker starts one at the end while the others idle.
SLOWEST_FIRST = ("test_release_build.py", "test_release_cuda.py", "test_conda_install.py", "test_ember_native.py",
                 "test_docker_image.py",
                 "test_mobile_release.py", "test_conda_build.py", "test_publish_release.py", "test_publish_faults.py",
                 "test_publish.py", "test_ci_steps.py",
                 "test_wheel_pipeline.py", "test_thirdparty_build.py", "test_test_gating.py", "test_container_build.py",
                 "test_cuda_toolkit.py")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--image-variant", default=None,
                     help="test_docker_image.py: test this variant's images only (nox -s docker-<variant>); "
                          "default: the CPU images, plus the CUDA checks on the cuda11 runtime image")


def pytest_configure(config: pytest.Config) -> None:
    """The table of wall and CPU time per test module at the end of the run (suite_timing.py)."""
    config.pluginmanager.register(SuiteTiming(config), "shipyard-suite-timing")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slowest files first; each file is one xdist group (its module fixtures build once, on
    one worker), except that every test using the Docker engine shares one group, so that a
    single worker starts and stops dockerd."""
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: file order kept otherwise
    for item in items:
        group = "docker" if "docker_engine" in getattr(item, "fixturenames", ()) else item.path.name
        item.add_marker(pytest.mark.xdist_group(group))


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
def docker_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A Docker engine for the session: the running one, else a dockerd started here and
    stopped at the end. A machine set up by ci/bootstrap.sh has docker.io; without it the
    tests that need an engine fail with the fix, they are not skipped."""
    if docker_base.ensure_docker_engine():
        yield
        return
    if shutil.which("dockerd") is None or shutil.which("docker") is None:
        pytest.fail(f"no Docker engine and no docker.io to start one: run ci/bootstrap.sh ({docker_base.ENGINE_FIX})")
    log = tmp_path_factory.mktemp("dockerd") / "dockerd.log"
    with log.open("w") as sink:
        # A daemon outlives any one command, so it cannot go through command.run.
        daemon = subprocess.Popen(["dockerd"], stdout=sink, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while not docker_base.ensure_docker_engine():
            if daemon.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"dockerd did not come up:\n{log.read_text()[-3000:]}")
            time.sleep(1)
        yield
    finally:
        daemon.terminate()
        try:
            daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait(timeout=30)


@pytest.fixture(scope="session")
def ember_images(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> EmberImages:
    """ember's images, each built once per session by shipyard's image pipeline: tested by
    test_docker_image.py, published end to end by test_publish_release.py."""
    return EmberImages(load_spec(REPO), tmp_path_factory)
