"""What `shipyard build` is asked (BuildRequest), what happened to each cell (CellOutcome), and
what every stage of one variant's run shares (BuildContext): the build (variant_wheels.py) and the test
stage (cell_tests.py) both take them."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from shipyard.errors import STABLE_FEATURE_FAILED, BuildError
from shipyard.host.source_tree import GitInfo
from shipyard.host.toolchains.discover import Inventory
from shipyard.plumbing.build_cache import BuildCache
from shipyard.plumbing.progress import Progress
from shipyard.record.manifest import CudaArchs
from shipyard.release.channel_version import build_version
from shipyard.release.matrix import Cell
from shipyard.release.spec import Spec, Variant
from shipyard.wheel.auditwheel_worker import AuditwheelWorkers


def default_test_jobs() -> int:
    """How many cells' tests run side by side unless told: one per core, and no more than
    memory allows at about 1.5 GiB a cell (a cell's suite starts several processes)."""
    cores = os.cpu_count() or 1
    try:
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return cores
    return max(1, min(cores, int(available / (1.5 * 2**30))))


@dataclass(frozen=True)
class BuildRequest:
    variant: str
    pythons: tuple[str, ...] = ()
    components: tuple[str, ...] = ()
    # Only these of the platforms this host builds (a CI job's one); empty: every one of them.
    platforms: tuple[str, ...] = ()
    skip_unavailable: bool = False
    container: bool = False
    run_tests: bool = True
    # Test only the cells of these Pythons (every selected Python is still built and checked);
    # empty: test every cell. The others are recorded as "not tested", never as passed.
    test_pythons: tuple[str, ...] = ()
    dist: Path = Path("dist")
    state: Path = Path(".shipyard")
    jobs: int = max(1, os.cpu_count() or 1)
    test_jobs: int = field(default_factory=default_test_jobs)  # cells tested side by side
    test_installer: str = "uv"  # uv (one real pip resolution per Python) or pip (every cell)
    nightly: bool = False  # development versions dated by the commit (release/channel_version.py)
    # Repaired wheels built elsewhere (cibuildwheel's wheelhouse on a Windows or macOS runner) that
    # the native cells take instead of building: labelled, checked, tested and recorded the same way.
    wheelhouse: Path | None = None


@dataclass
class CellOutcome:
    """What happened to one cell; `result` is passed, failed, cached, skipped, unavailable,
    not applicable (its project's requires-python excludes its Python; `detail` says so), or
    not tested (built and checked, outside --test-python or only for a selection that depends on
    it; `detail` says so)."""

    cell: Cell
    result: str
    seconds: float = 0.0
    wheel: Path | None = None
    detail: str = ""
    build: dict[str, object] = field(default_factory=dict)
    test_json: dict[str, object] | None = None
    cuda_archs: CudaArchs | None = None  # what its binaries verifiably carry (None: no kernels)
    tested_pythons: tuple[str, ...] = ()  # an abi3 cell's: the Pythons whose tests ran on its one wheel
    file: Path | None = None  # the artifact of a cell that makes no wheel (a component's sdist)

    @property
    def size(self) -> int | None:
        made = self.wheel or self.file
        return made.stat().st_size if made and made.exists() else None


# `shipyard build`'s exit status: STABLE_FEATURE_FAILED when a tested cell's tests said no (its
# artifacts are built and the manifest records the failure, so CI uploads the fragment and the
# gate decides per channel); BuildError's status when a cell did not build, failed its checks, or
# its tests could not run (nothing trustworthy to upload).
CELL_NOT_BUILT = BuildError.exit_code


def build_exit_status(outcomes: Sequence[CellOutcome]) -> int:
    """0, STABLE_FEATURE_FAILED or CELL_NOT_BUILT for the outcomes of one `shipyard build`."""
    failed = [o for o in outcomes if o.result == "failed"]
    if any(o.test_json is None for o in failed):
        return CELL_NOT_BUILT
    return STABLE_FEATURE_FAILED if failed else 0


def dependency_detail(component: str, dependent: str) -> str:
    """What a cell a narrowed build added (build_request.BuildContext.dependencies) records and
    shows instead of a test verdict."""
    return (f"not tested: built because {dependent} depends on it (--component); select {component} "
            f"to run its tests")


def untested_detail(test_pythons: tuple[str, ...]) -> str:
    """What a cell left out by --test-python records and shows instead of a test verdict."""
    listed = ", ".join(test_pythons)
    return (f"not tested (--test-python {listed}): built and checked; its component's tests ran on "
            f"Python {listed} only")


@dataclass(frozen=True)
class BuildContext:
    spec: Spec
    request: BuildRequest
    variant: Variant
    inventory: Inventory
    git: GitInfo
    cache: BuildCache
    progress: Progress
    # The build's auditwheel processes (repair.py): none, one process per repair.
    auditwheel: AuditwheelWorkers | None = None
    # The components a narrowed build (--component) also builds, each with the selected one that
    # depends on it: built, checked and indexed for the selection's tests, not tested themselves.
    dependencies: Mapping[str, str] = field(default_factory=dict)
    # The folder each component's wheels build from where it is not its sources: its sdist,
    # unpacked (wheel/sdist.py), when the release makes one.
    projects: Mapping[str, Path] = field(default_factory=dict)

    @property
    def root(self) -> Path:
        return self.spec.root

    def project(self, component: str) -> Path:
        """The folder `component`'s wheels build from: its unpacked sdist, else its sources."""
        return self.projects.get(component) or self.spec.component_dir(component)

    def version(self, version: str) -> str:
        """`version` as this build gives it: its nightly version when built for nightly, else itself."""
        return build_version(version, nightly=self.request.nightly, commit_time=self.git.commit_time)
