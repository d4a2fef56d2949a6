"""`shipyard build --variant V`: every wheel cell of a variant on this host, built, repaired,
labelled, checked, indexed, tested from the index, and recorded in dist/manifest.json.
The request and outcome shapes live in build_request.py, the test stage in cell_tests.py."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename

from shipyard.errors import BuildError, ShipyardError, ToolchainMissing, UsageError
from shipyard.host.source_tree import git_info, hash_tree
from shipyard.host.toolchains.discover import Inventory, discover
from shipyard.host.toolchains.resolve import Missing, Toolchain, resolve
from shipyard.plumbing.build_cache import BuildCache, cache_key
from shipyard.plumbing.command import PrestartedPython
from shipyard.plumbing.hashing import sha256_of
from shipyard.plumbing.progress import Progress
from shipyard.plumbing.wheel_metadata import public_wheel_version, requires_python_problem
from shipyard.record.manifest import (
    ArtifactRecord,
    CudaArchs,
    FeatureRecord,
    NotApplicableRecord,
    merge_artifacts,
)
from shipyard.release.channel_version import nightly_requirement
from shipyard.release.matrix import Cell, NotApplicable, builder_platform
from shipyard.release.project_declaration import (
    SCIKIT_BUILD_CORE,
    build_backend,
    uses_vcs_version,
    vcs_state,
    writes_into_sources,
)
from shipyard.release.spec import Component, Release, Spec
from shipyard.supply.sbom import sbom_toolchain, wheel_sbom_files
from shipyard.wheel import checks, limited_api
from shipyard.wheel.auditwheel_worker import AuditwheelWorkers
from shipyard.wheel.build_env import BuildEnv, copy_project, ensure_build_env
from shipyard.wheel.build_request import BuildContext, BuildRequest, CellOutcome
from shipyard.wheel.cell_selection import dependency_cells, selected_cells
from shipyard.wheel.cell_tests import prefetch_test_wheelhouse, run_cell_tests
from shipyard.wheel.glibc_verdict import glibc_verdict
from shipyard.wheel.index import add_wheel, write_index
from shipyard.wheel.labels import package_files
from shipyard.wheel.native_core import (
    REPRODUCIBLE_CMAKE_DEFINES,
    build_native_core,
    cmake_platform,
    python_header_flags,
    reproducible_env,
    seed_cmake_platform,
    shipyard_cmake_defines,
    toolchain_probes,
)
from shipyard.wheel.pep517 import build_wheel, prestart_build_hook
from shipyard.wheel.repair import local_version, relabel_wheel, repair_wheel
from shipyard.wheel.sdist import ComponentSdist, make_component_sdist, sdist_cells, sdist_record


def _pure_interpreter(request: BuildRequest, inventory: Inventory, toolchain: Toolchain,
                      component: Component, pythons: tuple[str, ...]) -> Toolchain:
    """A pure wheel is built and tested once, with the first Python to test (--test-python), else
    the first requested, found here that its project admits (the oldest of the release's it admits otherwise)."""
    candidates = [p for p in (*request.test_pythons, *request.pythons, *pythons) if component.admits_python(p)]
    chosen = next((i for p in candidates if (i := inventory.interpreter(p))), toolchain.interpreter)
    return Toolchain(chosen, None, None, None)


def _taken_toolchain(cell: Cell, release: Release, inventory: Inventory) -> Toolchain | Missing:
    """A native cell whose wheel comes from the wheelhouse compiles nothing here: it needs only the
    Python its tests run with (a pure cell builds as ever)."""
    if cell.is_pure or cell.python is None:
        return resolve(cell, release, inventory)
    interpreter = inventory.interpreter(cell.python)
    if interpreter is None:
        return Missing(f"no Python {cell.python} interpreter to test the wheelhouse's wheel with",
                       f"shipyard ci pythons {cell.python}")
    return Toolchain(interpreter, None, None, None)


def build_variant(spec: Spec, request: BuildRequest, progress: Progress = lambda _: None) -> list[CellOutcome]:
    """Build and test every selected wheel cell of one variant; merge the manifest."""
    release = spec.release
    variant = release.find_variant(request.variant)
    if variant is None:
        raise UsageError(f"no variant {request.variant!r} in release.yaml (variants: "
                            f"{', '.join(release.variants)})")
    if variant.name != request.variant:
        request = replace(request, variant=variant.name)
    inventory = discover()
    here = inventory.platforms_built_here(release)
    for name in request.platforms:
        if name in release.platforms and name not in here:
            other = release.platforms[name]
            raise UsageError(f"--platform {name}: its cells build on a {other.os}-{other.arch} host, this is "
                             f"{inventory.host_platform}; build them there")
    cells, ruled_out = selected_cells(spec, request, inventory)
    if not cells:
        raise UsageError(f"no wheel cells of variant {request.variant} for {inventory.host_platform} "
                            f"match the selection")
    also, dependencies = dependency_cells(spec, request, inventory, progress)
    cells += also
    if note := checks.size_budget_note(release, variant):
        progress(note)
    resolved: dict[str, Toolchain] = {}
    # Cells the project itself rules out: shown and recorded as such, never built, never failures.
    outcomes: list[CellOutcome] = [CellOutcome(n.cell, "not applicable", detail=n.reason) for n in ruled_out]
    missing: list[str] = []
    for cell in cells:
        result = _taken_toolchain(cell, release, inventory) if request.wheelhouse else resolve(cell, release, inventory)
        if isinstance(result, Missing):
            missing.append(f"{cell.id}: {result}")
            outcomes.append(CellOutcome(cell, "unavailable", detail=str(result)))
        else:
            resolved[cell.id] = (_pure_interpreter(request, inventory, result, release.components[cell.component],
                                                   release.pythons) if cell.is_pure else result)
    if missing and not request.skip_unavailable:
        raise ToolchainMissing("cannot build these cells on this host:\n  " + "\n  ".join(missing)
                               + "\n(run `shipyard doctor`; pass --skip-unavailable to skip them)")
    buildable = [c for c in cells if c.id in resolved]
    # auditwheel processes that every wheel of the run shares (one per core), not one per wheel;
    # as many started ahead as may repair at once (none for pure wheels: they pass repair untouched).
    platform_cells = sum(1 for c in buildable if not c.is_pure)
    with AuditwheelWorkers(limit=request.jobs, ahead=platform_cells) as auditwheel:
        ctx = BuildContext(spec, request, release.variants[request.variant], inventory, git_info(spec.root),
                           BuildCache(request.state / "cache"), progress, auditwheel, dependencies)
        sdists, unbuilt, sdist_outcomes = _make_sdists(ctx, buildable, resolved)
        ctx = replace(ctx, projects={name: made.project for name, made in sdists.items()})
        unbuilt_components = {o.cell.component for o in unbuilt}
        built = unbuilt + _build_all(ctx, [c for c in buildable if c.component not in unbuilt_components], resolved)
    variant_dir = request.dist / "whl" / ctx.variant.tag
    touched = {variant_dir}
    for outcome in built:
        if outcome.wheel is not None and outcome.result != "failed":
            # A pure wheel goes, the same bytes, into the index of every variant it stands for.
            for tag in outcome.cell.variant_tags:
                touched.add(request.dist / "whl" / tag)
                add_wheel(outcome.wheel, request.dist / "whl" / tag)
            outcome.wheel = add_wheel(outcome.wheel, variant_dir)
    for folder in sorted(touched):
        write_index(folder)
    if request.run_tests:
        run_cell_tests(ctx, built, resolved, variant_dir)
    outcomes += built
    _record(ctx, built, ruled_out, sdists)
    order = {c.id: i for i, c in enumerate([*cells, *(n.cell for n in ruled_out)])}
    # Each sdist first, as it was made first: the summary shows it beside the wheels built from it.
    return sdist_outcomes + sorted(outcomes, key=lambda o: order[o.cell.id])


# --- build ----------------------------------------------------------------------------------

def _make_sdists(ctx: BuildContext, cells: list[Cell], resolved: dict[str, Toolchain]
                 ) -> tuple[dict[str, ComponentSdist], list[CellOutcome], list[CellOutcome]]:
    """The sdist of each component of `cells` that the release makes one for, built with the
    interpreter of its first cell; the wheel cells of a component whose sdist failed, failed with
    the reason (a broken sdist fails the release, as `python -m build` would); and each sdist
    cell's own outcome, for the summary."""
    components = list(dict.fromkeys(c.component for c in cells))
    made: dict[str, ComponentSdist] = {}
    failed: list[CellOutcome] = []
    own: list[CellOutcome] = []
    for name, sdist_cell in sdist_cells(ctx, components).items():
        first = next(c for c in cells if c.component == name)
        interpreter = resolved[first.id].interpreter
        assert interpreter is not None
        start = time.monotonic()
        try:
            made[name] = make_component_sdist(ctx, sdist_cell, ctx.spec.release.components[name], interpreter)
        except ShipyardError as exc:
            seconds = time.monotonic() - start
            own.append(CellOutcome(sdist_cell, "failed", seconds, detail=str(exc)))
            failed += [CellOutcome(c, "failed", seconds, detail=f"sdist: {exc}") for c in cells if c.component == name]
            continue
        sdist = made[name]
        own.append(CellOutcome(sdist_cell, str(sdist.build["result"]), time.monotonic() - start, file=sdist.sdist,
                               detail="its wheels build from it"))
    return made, failed, own


def _spec_section(ctx: BuildContext, component: Component, platform_name: str) -> dict[str, object]:
    release = ctx.spec.release
    # What the checks and tests hold a wheel to does not change its bytes: no rebuild for it.
    section = component.model_dump(mode="json", exclude={"vendored_libraries", "console_scripts", "test_requires"})
    if component.kind == "python-pure":  # one build for every variant and platform
        return {"component": section, "version": release.release.version}
    platform = release.platforms[platform_name]
    return {"component": section, "variant": ctx.variant.model_dump(mode="json"),
            "platform": platform.model_dump(mode="json"), "version": release.release.version}


def _build_all(ctx: BuildContext, cells: list[Cell], resolved: dict[str, Toolchain]) -> list[CellOutcome]:
    """Every cell, on every core: one component's per-Python builds run in the pool while the next
    component's core compiles, and the build venvs are made while the first core compiles."""
    # A native core per platform: a second Linux platform's promise takes another compiler (zig's).
    by_component: dict[tuple[str, str], list[Cell]] = {}
    for cell in cells:
        by_component.setdefault((cell.component, cell.platform), []).append(cell)
    # One build more than there are cores: every build has serial stretches (interpreter
    # start-up, CMake's configure, auditwheel) that another build's compiler can fill.
    workers = max(1, min(ctx.request.jobs + 1, len(cells)))
    jobs_each = max(1, ctx.request.jobs // workers)
    results: list[CellOutcome | Future[CellOutcome]] = []
    # A built cell's test dependencies download beside the builds, never in a build's place; the
    # test stage waits for a download still running (the wheelhouse's lock) or makes its own.
    downloads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="test-downloads")

    def prefetch(future: Future[CellOutcome]) -> None:
        if future.exception() is not None:
            return  # raised again where the outcomes are collected
        outcome = future.result()
        interpreter = resolved[outcome.cell.id].interpreter
        # A component built only for the selection's tests is not tested: nothing to download for it.
        if interpreter is not None and outcome.cell.component not in ctx.dependencies:
            downloads.submit(prefetch_test_wheelhouse, ctx, outcome, interpreter)

    prestarts: list[Future[PrestartedPython | None]] = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        try:
            _prepare_build_envs(ctx, pool, cells, resolved)
            for (name, platform), component_cells in by_component.items():
                component = ctx.spec.release.components[name]
                core: NativeCoreBuild | None = None
                hooks: dict[str, Future[PrestartedPython | None]] = {}
                # A wheelhouse's wheels link the core cibuildwheel's before-all built.
                if component.native_core is not None and not _taken(ctx, component_cells[0]):
                    try:
                        core_toolchain = resolved[component_cells[0].id]
                        core_key = _core_key(ctx, component, platform, core_toolchain)
                        if ctx.cache.get(core_key) is None:
                            # Each Python's build hook starts and imports its backend while the core
                            # compiles: the core's serial stretches (configure, its last files) leave
                            # a core idle for that.
                            hooks = {c.id: pool.submit(_prestart_hook, ctx, c, component, resolved[c.id], jobs_each)
                                     for c in component_cells}
                            prestarts += hooks.values()
                        core = _ensure_core(ctx, component, platform, core_toolchain, core_key)
                    except ShipyardError as exc:
                        results += [CellOutcome(c, "failed", detail=f"native core: {exc}") for c in component_cells]
                        continue
                sources = hash_tree(component.source_dir(ctx.root))  # once for every Python's cell
                for cell in component_cells:
                    future = pool.submit(_build_cell, ctx, cell, component, resolved[cell.id], sources, core,
                                         jobs_each, hooks.get(cell.id))
                    future.add_done_callback(prefetch)
                    results.append(future)
            outcomes = [r.result() if isinstance(r, Future) else r for r in results]
        finally:
            # A hook started ahead that no build used (a cached wheel, a failed core) ends here.
            for started in prestarts:
                if (hook := _started(started)) is not None:
                    hook.close()
    downloads.shutdown(wait=False)  # what is queued still runs
    return outcomes


def _started(prestart: Future[PrestartedPython | None] | None) -> PrestartedPython | None:
    """The hook started ahead, once it has started; None when there is none or it could not start
    (the build then starts its own, and meets any real problem there)."""
    if prestart is None or prestart.exception() is not None:
        return None
    return prestart.result()


def _prestart_hook(ctx: BuildContext, cell: Cell, component: Component, toolchain: Toolchain,
                   jobs: int) -> PrestartedPython | None:
    """The build hook's Python of a native cell, started with the environment its build will
    have; None where the build runs elsewhere (a container) or in a copy of the project."""
    project = ctx.project(component.name)
    if ctx.request.container or cell.is_pure or writes_into_sources(build_backend(project)):
        return None
    assert toolchain.interpreter is not None
    env = ensure_build_env(toolchain.interpreter, project, ctx.request.state)
    environment = _cell_environment(ctx, cell, toolchain, env, ctx.request.state / "build" / cell.id, copy=False)
    return prestart_build_hook(project, env, extra_env=environment, jobs=jobs)


def _prepare_build_envs(ctx: BuildContext, pool: ThreadPoolExecutor, cells: list[Cell],
                        resolved: dict[str, Toolchain]) -> None:
    """Start making every cell's build venv (each made once, under its lock; a cell waits for its
    own). A failure here stays in its future, unread: the cell's own call meets it again and
    records it in the cell's outcome."""
    wanted: dict[tuple[Path, Path], Toolchain] = {}
    for cell in cells:
        interpreter = resolved[cell.id].interpreter
        if interpreter is not None and not _taken(ctx, cell):
            wanted.setdefault((interpreter.path, ctx.project(cell.component)),
                              resolved[cell.id])
    for (_, project), toolchain in wanted.items():
        assert toolchain.interpreter is not None
        pool.submit(ensure_build_env, toolchain.interpreter, project, ctx.request.state)


@dataclass(frozen=True)
class NativeCoreBuild:
    """A component's core, built (or found in the cache) once for every Python: its install
    prefix, its cache key (part of each wheel's key), the toolchain probes its configure made and
    CMake's platform files of its build tree (native_core.cmake_platform)."""

    prefix: Path
    key: str
    probes: dict[str, str]
    platform: dict[str, dict[str, str]]


def _core_key(ctx: BuildContext, component: Component, platform: str, toolchain: Toolchain) -> str:
    assert component.native_core is not None
    source = component.source_dir(ctx.root) / component.native_core.source
    core_toolchain = Toolchain(None, toolchain.compiler, toolchain.cuda, toolchain.cuda_host_compiler)
    return cache_key(kind="native-core", sources=hash_tree(source),
                     spec_section=_spec_section(ctx, component, platform), toolchain=core_toolchain.identity,
                     python=None)


def _ensure_core(ctx: BuildContext, component: Component, platform: str, toolchain: Toolchain,
                 key: str) -> NativeCoreBuild:
    # The host's own platform keeps the folder names cached cores were stored under; another platform
    # built here (linux-x86_64-manylinux2014) has its own, since both cores may build in one run.
    name = f"{component.name}-{ctx.variant.tag}" + ("" if platform == ctx.inventory.host_platform else f"-{platform}")
    for_what = ctx.variant.tag if platform == ctx.inventory.host_platform else f"{ctx.variant.tag} on {platform}"
    with ctx.cache.building(key):
        entry = ctx.cache.get(key)
        if entry is None:
            ctx.progress(f"{component.name}: native core for {for_what} (once for every Python)")
            start = time.monotonic()
            build_dir = ctx.request.state / "build" / f"{name}-core"
            staging = ctx.request.state / "build" / f"{name}-core-install"
            build_native_core(component, ctx.variant, toolchain, source_root=ctx.root, build_dir=build_dir,
                              prefix=staging, epoch=ctx.git.commit_time, jobs=ctx.request.jobs)
            entry = ctx.cache.put(key, [staging], {"kind": "native-core", "seconds": time.monotonic() - start,
                                                   "probes": toolchain_probes(build_dir),
                                                   "cmake_platform": cmake_platform(build_dir)})
        else:
            ctx.progress(f"{component.name}: native core for {for_what} cached")
    return NativeCoreBuild(entry.path / f"{name}-core-install", key,
                           entry.metadata().get("probes", {}), entry.metadata().get("cmake_platform", {}))


def _build_cell(ctx: BuildContext, cell: Cell, component: Component, toolchain: Toolchain, sources: str,
                core: NativeCoreBuild | None, jobs: int,
                prestarted: Future[PrestartedPython | None] | None = None) -> CellOutcome:
    start = time.monotonic()
    try:
        return _build_cell_unchecked(ctx, cell, component, toolchain, sources, core, jobs, start, prestarted)
    except ShipyardError as exc:
        return CellOutcome(cell, "failed", time.monotonic() - start, detail=f"build: {exc}")


def _taken(ctx: BuildContext, cell: Cell) -> bool:
    """Whether `cell`'s wheel comes from the request's wheelhouse instead of a build here."""
    return ctx.request.wheelhouse is not None and not cell.is_pure


def wheelhouse_wheel(wheelhouse: Path, cell: Cell) -> Path:
    """The one wheel of `cell`'s component and Python in `wheelhouse`; BuildError naming what is
    there otherwise."""
    wheels = sorted(wheelhouse.glob("*.whl"))
    found = []
    for wheel in wheels:
        name, _, _, tags = parse_wheel_filename(wheel.name)
        if name == canonicalize_name(cell.component) and any(t.interpreter == cell.python_tag for t in tags):
            found.append(wheel)
    if len(found) != 1:
        raise BuildError(f"{cell.id}: the wheelhouse {wheelhouse} holds {len(found)} wheels of {cell.component} for "
                         f"{cell.python_tag}, expected one (it holds: {', '.join(w.name for w in wheels) or 'none'})")
    return found[0]


def _build_cell_unchecked(ctx: BuildContext, cell: Cell, component: Component, toolchain: Toolchain, sources: str,
                          core: NativeCoreBuild | None, jobs: int, start: float,
                          prestarted: Future[PrestartedPython | None] | None) -> CellOutcome:
    project = ctx.project(component.name)
    assert toolchain.interpreter is not None
    pure = component.kind == "python-pure"
    taken = wheelhouse_wheel(ctx.request.wheelhouse, cell) if ctx.request.wheelhouse and not pure else None
    if taken is not None:
        # Built and repaired by cibuildwheel: its bytes are the build's whole input here.
        key = cache_key(kind="wheel", sources=sources, spec_section=_spec_section(ctx, component, cell.platform),
                        toolchain=f"wheelhouse/{sha256_of(taken)}", python=cell.python)
    else:
        env = ensure_build_env(toolchain.interpreter, project, ctx.request.state)
        # A version computed from git (setuptools_scm) changes with a tag, not with the sources.
        vcs = vcs_state(component.source_dir(ctx.root)) if uses_vcs_version(env.requirements) else ""
        key = cache_key(kind="wheel", sources=sources, spec_section=_spec_section(ctx, component, cell.platform),
                        toolchain="pure" if pure else f"{toolchain.identity}/{env.identity}",
                        python=None if pure else cell.python,
                        extra={"core": core.key if core else "", "container": str(ctx.request.container),
                               "vcs": vcs,
                               # built from its sdist (those bytes), or from the sources
                               "sdist": ctx.projects[component.name].name if component.name in ctx.projects
                               else ""})
    # cudart comes from the variant's toolkit; auditwheel must find it to vendor it, the SBOM to trace it.
    libs = [toolchain.cuda.root / "lib64"] if toolchain.cuda else []
    with ctx.cache.building(key):
        entry = ctx.cache.get(key)
        cached = entry is not None
        if entry is None and taken is not None:
            ctx.progress(f"take {cell.id} from the wheelhouse ({taken.name})")
            entry = ctx.cache.put(key, [taken], {"kind": "wheel", "cell": cell.id, "seconds": time.monotonic() - start,
                                                 "wheelhouse": taken.name})
        elif entry is None:
            ctx.progress(f"build {cell.id}")
            raw = _raw_build(ctx, cell, component, toolchain, env, project, core, jobs, _started(prestarted))
            platform = builder_platform(ctx.spec.release, cell)  # a pure wheel passes repair untouched
            # Built against a sysroot: vendor its libraries (the ones the wheel linked), never the host's.
            sysroot = toolchain.compiler.sysroot if toolchain.compiler else None
            repaired = repair_wheel(raw, platform_tag=platform.wheel_platform_tag,
                                    out_dir=ctx.request.state / "repaired" / cell.id, library_path=libs,
                                    ldpaths=(*libs, *sysroot.library_dirs) if sysroot else (),
                                    auditwheel=ctx.auditwheel)
            entry = ctx.cache.put(key, [repaired], {"kind": "wheel", "cell": cell.id,
                                                    "seconds": time.monotonic() - start})
        repaired_wheel = entry.files()[0]
        # The project's own version (its built metadata) unless release.yaml overrides it; a
        # nightly's is its development version (after the cache: the raw build is the same).
        version = ctx.version(component.version or public_wheel_version(repaired_wheel))
        # A pure wheel has no local version: the same name and bytes in every variant's index, and
        # pip resolves it by name from each (as PyTorch publishes its pure packages). Still under
        # the key's lock: every variant's run labels a pure cell into the same folder.
        label = None if pure else ctx.variant.tag
        # The device code the binaries really hold (relabelling leaves them as they are): read once,
        # checked against the arch list below, and recorded in the build info, the SBOM and the manifest.
        device_code = checks.kernel_device_code(repaired_wheel, component, ctx.variant, toolchain)
        cuda_archs = CudaArchs.common_to(device_code.values()) if device_code else None
        extra_files = package_files(ctx.spec, cell, component, ctx.variant, ctx.git.sha, version=version,
                                    cuda_archs=cuda_archs) | \
            wheel_sbom_files(repaired_wheel, sbom_toolchain(toolchain, pure=pure),
                             version=local_version(version, label), epoch=ctx.git.commit_time, library_path=libs,
                             cuda_archs=cuda_archs)
        labelled = relabel_wheel(repaired_wheel, label=label, extra_files=extra_files,
                                 out_dir=ctx.request.state / "labelled" / cell.id, epoch=ctx.git.commit_time,
                                 version=version, requirement=_sibling_pins(ctx))
    failures: list[object] = list(checks.check_cell_wheel(labelled, ctx.spec.release, cell, component, ctx.variant,
                                                          toolchain, device_code))
    if problem := requires_python_problem(labelled, component.name, toolchain.interpreter.full_version,
                                          component.requires_python):
        failures.append(problem)
    promised = ctx.spec.release.platforms[cell.platform].promised_glibc if not pure else None
    if promised and toolchain.compiler is not None and toolchain.compiler.zig is not None:
        # No sysroot was proved for a zig-route promise (manylinux2014): auditwheel's verdict and the
        # symbol versions each binary needs are shown for every wheel, and held to the promise.
        verdict = glibc_verdict(labelled, ctx.auditwheel)
        ctx.progress(verdict.line())
        if glibc_problem := verdict.problem(promised):
            failures.append(glibc_problem)
    build_info = {"cache_key": key, "cached": cached, "seconds": round(time.monotonic() - start, 2),
                  "toolchain": "pure" if pure else toolchain.identity,
                  "git_sha": ctx.git.sha, "git_dirty": ctx.git.dirty,
                  "source_date_epoch": ctx.git.commit_time}
    if failures:
        return CellOutcome(cell, "failed", time.monotonic() - start, labelled,
                           "; ".join(str(f) for f in failures), build_info, cuda_archs=cuda_archs)
    return CellOutcome(cell, "cached" if cached else "built", time.monotonic() - start, labelled, "", build_info,
                       cuda_archs=cuda_archs)


def _sibling_pins(ctx: BuildContext) -> Callable[[str], str] | None:
    """A nightly's Requires-Dist on the release's other components asks for their nightly versions."""
    if not ctx.request.nightly:
        return None
    siblings, when = tuple(ctx.spec.release.components), ctx.git.commit_time
    return lambda requirement: nightly_requirement(requirement, siblings, when)


def _cell_environment(ctx: BuildContext, cell: Cell, toolchain: Toolchain, env: BuildEnv, build_dir: Path, *,
                      copy: bool = True) -> dict[str, str]:
    """The variables a cell's build runs with, which pep517 extends with the build venv's PATH
    (the headers a sysroot compiler needs are copied into `build_dir` unless `copy` is false)."""
    environment = reproducible_env(ctx.root, build_dir, ctx.git.commit_time, toolchain)
    if cell.python and not ctx.request.container and (
            headers := python_header_flags(env.python, toolchain, build_dir / "python-headers", copy=copy)):
        environment |= {flags: f"{environment[flags]} {headers}" for flags in ("CFLAGS", "CXXFLAGS")}
    if cell.is_abi3:
        environment |= {flags: f"{environment.get(flags, '')} {limited_api.compiler_flags(cell.limited_api)}".strip()
                        for flags in ("CFLAGS", "CXXFLAGS")}
    return environment


def _raw_build(ctx: BuildContext, cell: Cell, component: Component, toolchain: Toolchain, env: BuildEnv,
               project: Path, core: NativeCoreBuild | None, jobs: int, prestarted: PrestartedPython | None) -> Path:
    out = ctx.request.state / "raw" / cell.id
    # shipyard's CMake definitions (CUDA, reproducibility, the native core's prefix) are
    # scikit-build-core config settings; another backend (setuptools, meson-python) would refuse them.
    backend = build_backend(project)
    cmake = component.kind == "python-native" and backend == SCIKIT_BUILD_CORE
    defines = shipyard_cmake_defines(ctx.variant, toolchain) | REPRODUCIBLE_CMAKE_DEFINES if cmake else {}
    if core is not None and component.native_core is not None:
        defines[component.native_core.prefix_define] = str(core.prefix)
    # An abi3 cell's one wheel: the backend tags it cp<floor>-abi3 (the project marks its extensions).
    settings = limited_api.backend_settings(backend, cell.limited_api, component=component.name) if cell.is_abi3 else {}
    build_dir = ctx.request.state / "build" / cell.id
    # A cell is only rebuilt when its inputs changed: start from an empty folder, so nothing
    # from the last build (CMake's cached paths to an older core, stale objects) leaks in.
    shutil.rmtree(build_dir, ignore_errors=True)
    environment = _cell_environment(ctx, cell, toolchain, env, build_dir)
    if ctx.request.container:
        # A pure cell has no Python of its own: it builds with the one its toolchain chose.
        # (The core's toolchain probes stay out: the container's compiler may not be the core's.)
        python = cell.python or (toolchain.interpreter.version if toolchain.interpreter else "")
        return _container_build(ctx, cell, component, toolchain, project, out, defines, environment, python,
                                settings)
    if writes_into_sources(backend):
        # Backends without an out-of-tree build folder write into the project (setuptools' build/
        # and egg-info, meson-python's .mesonpy-*): each cell builds a copy of its own, git
        # metadata included (setuptools_scm reads it), so Pythons build side by side and the
        # sources (and their hash, the cache key) stay as they are.
        project = copy_project(project, build_dir / project.name)
    if cmake and core is not None:
        # The core's configure already asked this toolchain what every Python's would ask again.
        defines = core.probes | seed_cmake_platform(build_dir, core.platform) | defines
    return build_wheel(project, env, out, cmake_defines=defines, extra_env=environment,
                       build_dir=build_dir if cmake else None, jobs=jobs, prestarted=prestarted,
                       config_settings=settings)


def _container_build(ctx: BuildContext, cell: Cell, component: Component, toolchain: Toolchain, project: Path,
                     out: Path, defines: dict[str, str], environment: dict[str, str], python: str,
                     backend_settings: dict[str, str]) -> Path:
    """The same build through cibuildwheel in the local manylinux-style image (`--container`)."""
    from shipyard.host.docker_base import build_manylinux_image, ensure_docker_engine
    from shipyard.wheel.container import build_wheels_in_container, host_path

    if toolchain.compiler is not None and toolchain.compiler.zig is not None:
        # The wrappers run the zig of shipyard's own environment, which the image does not hold.
        raise UsageError(f"{cell.id}: --container builds with the image's compiler or a sysroot, and "
                         f"{ctx.spec.release.platforms[cell.platform].wheel_platform_tag} takes "
                         f"{toolchain.compiler.origin}; build it on the host (without --container)")
    ensure_docker_engine(required=True)
    if ctx.variant.is_cuda and not cell.is_pure:
        raise UsageError(f"{cell.id}: --container builds CPU cells only; the local image has no CUDA "
                            f"toolkit (build CUDA cells on the host)")
    image = build_manylinux_image([i for i in ctx.inventory.interpreters if i.version in ctx.spec.release.pythons],
                                  progress=ctx.progress)
    # Host paths (the prebuilt core) are seen under /host inside cibuildwheel's container.
    settings = {f"cmake.define.{k}": host_path(Path(v)) if Path(v).is_absolute() and Path(v).exists() else v
                for k, v in defines.items()} | backend_settings
    env = {k: v for k, v in environment.items() if k not in ("CC", "CXX", "CFLAGS", "CXXFLAGS")}
    if toolchain.compiler is not None and toolchain.compiler.sysroot is not None:
        # The image's own gcc links its glibc (bookworm's); the sysroot's, seen under /host, keeps
        # the platform tag's promise there as on the host (CMAKE_SYSROOT is mapped with the defines).
        env |= {"CC": host_path(toolchain.compiler.cc), "CXX": host_path(toolchain.compiler.cxx)}
    wheels = build_wheels_in_container(project, out, pythons=[python], image=image, environment=env,
                                       config_settings=settings, progress=ctx.progress,
                                       pure=component.kind == "python-pure")
    if len(wheels) != 1:
        raise BuildError(f"{cell.id}: cibuildwheel made {len(wheels)} wheels, expected one")
    return wheels[0]


# --- record ---------------------------------------------------------------------------------

def _record(ctx: BuildContext, outcomes: list[CellOutcome], ruled_out: list[NotApplicable],
            sdists: dict[str, ComponentSdist]) -> None:
    release = ctx.spec.release
    # An sdist has no tests of its own: the wheels built from it in this run prove it.
    records = [sdist_record(ctx, made, tuple(o.cell.id for o in outcomes if o.cell.component == name and
                                             o.wheel is not None and o.wheel.is_relative_to(ctx.request.dist)))
               for name, made in sdists.items()]
    for outcome in outcomes:
        if outcome.wheel is None or not outcome.wheel.is_relative_to(ctx.request.dist):
            continue  # unavailable, or failed before it reached the index
        cell = outcome.cell
        records.append(ArtifactRecord(
            name=outcome.wheel.name, path=outcome.wheel.relative_to(ctx.request.dist).as_posix(),
            sha256=sha256_of(outcome.wheel), size=outcome.wheel.stat().st_size, **ArtifactRecord.identity(cell),
            version=public_wheel_version(outcome.wheel),
            features=tuple(FeatureRecord(id=i, title=t, status=s) for i, t, s in ctx.spec.features_for(
                cell.component, ctx.inventory.host_platform if cell.is_pure else cell.platform)),
            tests=outcome.test_json, build={**outcome.build, "result": outcome.result, "detail": outcome.detail},
            cuda_archs=outcome.cuda_archs, tested_pythons=outcome.tested_pythons))
    skipped = [NotApplicableRecord(**NotApplicableRecord.identity(n.cell), reason=n.reason) for n in ruled_out]
    merge_artifacts(ctx.request.dist / "manifest.json", release=release.release.name,
                    version=ctx.version(release.release.version), records=records, not_applicable=skipped)
