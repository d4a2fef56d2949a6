"""What one variant's conda build makes, decided before anything builds: the conda components and
Pythons of the run, one planned package per recipe rendering (identical renderings across Pythons
planned once), their build order (pinned outputs and the mutex first), the cells they serve and
the cache key of each (everything that can change its bytes and nothing else). conda/build.py
builds the plan."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rattler_build import get_rattler_build_version_py
from rattler_build.render import RenderedVariant

from shipyard.conda.features import package_extra
from shipyard.conda.preflight import PreflightPackage, requirements_of, spec_name
from shipyard.conda.recipes import StagedRecipe, stage_recipe
from shipyard.errors import BuildError, SpecError, ToolchainMissing, UsageError
from shipyard.host.source_tree import git_info, hash_tree, source_date
from shipyard.host.toolchains.resolve import Missing, Toolchain, resolve
from shipyard.plumbing.build_cache import cache_key
from shipyard.plumbing.command import patched_environ
from shipyard.release.channel_version import build_version
from shipyard.release.matrix import Cell, NotApplicable, not_applicable
from shipyard.release.project_declaration import declared_version
from shipyard.release.spec import Component, Release, Spec, Variant
from shipyard.wheel.labels import package_files

# Bump when shipyard changes what it puts into a conda package (staging, hooks, env).
CONDA_PIPELINE_REVISION = "4"  # 4: the verified CUDA archs in about.json and the SBOM


def mutex_name(release: Release) -> str:
    """The mutex package (and its recipe folder): `<release name>-variant`, e.g. ember-variant."""
    return f"{release.release.name}-variant"


@dataclass
class PlannedBuild:
    """A rendered package waiting for its build."""

    rv: RenderedVariant
    staged: StagedRecipe
    cell: Cell | None
    env: dict[str, str]  # what shipyard hands the build through the environment
    sources: str  # hash of the source files its build reads
    epoch: int  # the date its repack stamps in: its sources' newest commit (source_tree.source_date)
    check: PreflightPackage
    needs: set[str] = field(default_factory=set)  # names built in this run that it requires
    builds_against: set[str] = field(default_factory=set)  # of those, the ones in its build/host env
    key: str = ""

    @property
    def name(self) -> str:
        return self.rv.recipe.package.name

    @property
    def version(self) -> str:
        return str(self.rv.recipe.package.version)

    @property
    def build(self) -> str:
        return str(self.rv.recipe.build.string)

    @property
    def ident(self) -> tuple[str, str, str]:
        return (self.name, self.version, self.build)

    @property
    def label(self) -> str:
        return "-".join(self.ident)

    @property
    def subdir(self) -> str:
        return "noarch" if self.rv.recipe.build.noarch else str(self.rv.variant.get("target_platform"))

    def pins(self) -> dict[str, str]:
        """name -> the exact spec its pin_subpackage renders to ('==1.7.0 cpu_h…_0')."""
        return {name: f"=={pin.version} {pin.build_string}" for name, pin in self.rv.pin_subpackages.items()
                if pin.exact and pin.build_string}


# --- what to build --------------------------------------------------------------------------

def conda_components(release: Release, wanted: tuple[str, ...]) -> list[Component]:
    """The components with a conda package, or those of them `wanted` (UsageError for any other)."""
    conda = [c for c in release.components.values() if "conda" in c.package_types]
    if not wanted:
        return conda
    unknown = [w for w in wanted if w not in release.components]
    if unknown:
        raise UsageError(f"unknown component(s) {', '.join(unknown)}; release.yaml has {', '.join(release.components)}")
    not_conda = [w for w in wanted if "conda" not in release.components[w].package_types]
    if not_conda:
        raise UsageError(f"{', '.join(not_conda)} has no conda package (package_types in release.yaml); "
                         f"conda components: {', '.join(c.name for c in conda)}")
    return [c for c in conda if c.name in wanted]


def run_pythons(release: Release, wanted: tuple[str, ...]) -> list[str]:
    """The release's Pythons, or those of them `wanted` (UsageError for any other)."""
    unknown = [p for p in wanted if p not in release.pythons]
    if unknown:
        raise UsageError(f"Python {', '.join(unknown)} is not one of the release's ({', '.join(release.pythons)})")
    return [p for p in release.pythons if not wanted or p in wanted]


def variant_toolchain(release: Release, variant: Variant, components: list[Component],
                      inventory: Any) -> Toolchain | None:
    """The compilers (and CUDA toolkit) that shipyard resolved for the variant's native cores."""
    native = [c for c in components if c.kind == "python-native"]
    if not native:
        return None
    cell = Cell(native[0].name, variant.name, variant.tag, inventory.host_platform, None, "conda",
                package=f"lib{native[0].name}")
    result = resolve(cell, release, inventory)
    if isinstance(result, Missing):
        raise ToolchainMissing(f"cannot build the conda packages of {variant.name} here: {result}")
    return result


def component_versions(spec: Spec, *, nightly: bool = False) -> dict[str, str]:
    """Each conda component's own version: release.yaml's `components.<c>.version`, else the one
    its project declares (pyproject.toml [project] version, setup.cfg [metadata] version); with
    `nightly`, its development version dated by the commit (ember 1.7.0.dev20261201). The recipes
    are rendered before anything is built, so a version the build computes (setuptools_scm) must be
    stated in release.yaml."""
    commit_time = git_info(spec.root).commit_time if nightly else 0
    versions = {}
    for component in spec.release.components.values():
        if "conda" not in component.package_types:
            continue
        version = component.version or declared_version(component.source_dir(spec.root))
        if version is None:
            raise SpecError(f"{spec.root / 'release.yaml'}: components.{component.name}.version: its project "
                            f"declares no version that can be read without building it, and a conda recipe is "
                            f"rendered before the build; state it, e.g. version: \"1.0.0\" (got no version)")
        versions[component.name] = build_version(version, nightly=nightly, commit_time=commit_time)
    return versions


def _features_extra(spec: Spec, cell: Cell | None, component: Component | None, variant: Variant) -> dict[str, Any]:
    """`extra` of a package, in the one schema `shipyard conda features` reads (features.package_extra):
    the mutex has no component and no features; a noarch package serves every variant ("any")."""
    if component is None or cell is None:  # the mutex (or a component with no cell on this platform)
        return package_extra(spec, component=component.name if component else None, platform=(),
                             variant=variant.name, variant_tag=variant.tag)
    return package_extra(spec, component=component.name, platform=cell.platforms if cell.is_pure else cell.platform,
                         variant=cell.variant, variant_tag=cell.variant_tag)


def _package_files(spec: Spec, cell: Cell, component: Component, variant: Variant, version: str) -> dict[str, bytes]:
    # No git sha: a conda package is keyed by its sources, and a new commit that changes none
    # of them must not rebuild it (the wheels add theirs after the cache, when they relabel).
    return package_files(spec, cell, component, variant, git_sha=None, version=version)


def _write_files(folder: Path, files: dict[str, bytes]) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)


def plan_builds(spec: Spec, variant: Variant, components: list[Component], pythons: list[str], cells: list[Cell],
                config: dict[str, list[str]], versions: Mapping[str, str], root: Path,
                env_base: dict[str, str]) -> list[PlannedBuild]:
    """The run's packages in build order (what each needs of this run first), each knowing what of
    the run it needs and what it builds against: the one plan conda/build.py builds."""
    planned = _rendered(spec, variant, components, pythons, cells, config, versions, root, env_base)
    produced = {p.name for p in planned}
    for item in planned:
        item.needs = {spec_name(s) for specs in item.check.requirements.values() for s in specs} & produced
        item.needs |= set(item.pins()) & produced
        item.needs.discard(item.name)
        # What its bytes are made from: what it builds against, not what it runs or tests with.
        item.builds_against = {spec_name(s) for env in ("build", "host")
                               for s in item.check.requirements.get(env, [])} & produced
        item.builds_against |= set(item.pins()) & produced
        item.builds_against.discard(item.name)
    return in_build_order(planned)


def _rendered(spec: Spec, variant: Variant, components: list[Component], pythons: list[str], cells: list[Cell],
              config: dict[str, list[str]], versions: Mapping[str, str], root: Path,
              env_base: dict[str, str]) -> list[PlannedBuild]:
    """Stage and render every recipe of the run, once per Python; identical packages once."""
    release = spec.release
    mirror = root / "checkout"
    planned: dict[tuple[str, str, str], PlannedBuild] = {}
    jobs: list[tuple[str, Component | None]] = [(mutex_name(release), None)]
    jobs += [(c.name, c) for c in components]
    for recipe_name, component in jobs:
        # A Python the component's requires-python rules out is never rendered: its cell is not
        # applicable (the pipeline records it so), and a Python-independent core is built only
        # with a Python that needs it. A noarch package is one build for every Python, as before.
        admitted = [p for p in pythons if component is None or component.kind == "python-pure"
                    or component.admits_python(p)]
        if not admitted:
            continue
        representative = _cell_for(cells, component, admitted[0]) if component else None
        extra = _features_extra(spec, representative, component, variant)
        staged = stage_recipe(spec.root, mirror, recipe_name, extra)
        recipe = staged.parse()
        for python in admitted:
            cell = _cell_for(cells, component, python) if component else None
            env = dict(env_base, SHIPYARD_PACKAGE_FILES="")
            if component is not None and cell is not None:
                folder = root / "package-files" / cell.id
                _write_files(folder, _package_files(spec, cell, component, variant, versions[component.name]))
                env["SHIPYARD_PACKAGE_FILES"] = str(folder)
            with patched_environ(env):  # the recipes read these with env.get at render time
                rendered = staged.render(recipe, {**config, "python": [python]})
            for rv in rendered:
                name = rv.recipe.package.name
                ident = (name, str(rv.recipe.package.version), str(rv.recipe.build.string))
                if ident in planned:
                    continue
                sources = _source_paths(spec, component, name)
                # The recipe folder too: the build scripts beside recipe.yaml (build_<output>.sh and
                # .bat) decide the bytes as much as the recipe text, which the key holds already.
                item = PlannedBuild(rv, staged, _cell_of(cells, component, name, python), env,
                                _sources_hash([*sources, staged.original.parent]),
                                source_date(spec.root, [*sources, staged.original.parent]),
                                PreflightPackage("-".join(ident), staged.original, "", {}))
                item.check.subdir = item.subdir
                item.check.requirements = requirements_of(rv.recipe.to_dict())
                planned[ident] = item
    return list(planned.values())


def not_applicable_cells(release: Release, variant: Variant, platform: str, components: list[Component],
                         pythons: list[str]) -> list[NotApplicable]:
    """The conda cells of this run (variant, host platform, components, Pythons) that their
    components' requires-python rules out: never rendered or built, never a failure."""
    names = {c.name for c in components}
    return [n for n in not_applicable(release)
            if n.cell.package_type == "conda" and n.cell.variant == variant.name and n.cell.platform == platform
            and n.cell.component in names and n.cell.python in pythons]


def _cell_for(cells: list[Cell], component: Component | None, python: str) -> Cell | None:
    if component is None:
        return None
    mine = [c for c in cells if c.component == component.name]
    return next((c for c in mine if c.is_pure or c.python == python), None)


def _cell_of(cells: list[Cell], component: Component | None, name: str, python: str) -> Cell | None:
    """The matrix cell a rendered package stands for (libember: the core cell)."""
    if component is None:
        return None
    mine = [c for c in cells if c.component == component.name]
    core = next((c for c in mine if c.package == name), None)
    return core or next((c for c in mine if c.is_pure or c.python == python), None)


def _source_paths(spec: Spec, component: Component | None, name: str) -> list[Path]:
    """The folder of sources a package's build reads (none for the mutex: its recipe is all)."""
    if component is None:
        return []
    path = component.source_dir(spec.root)
    if component.native_core is not None and name == f"lib{component.name}":
        path = path / component.native_core.source  # the core's build reads nothing else
    return [path]


def _sources_hash(paths: list[Path]) -> str:
    return "".join(hash_tree(path) for path in paths)


def in_build_order(planned: list[PlannedBuild]) -> list[PlannedBuild]:
    """Dependencies first (the mutex, then pinned cores), otherwise in plan order."""
    done: set[str] = set()
    out: list[PlannedBuild] = []
    pending = list(planned)
    while pending:
        ready = [p for p in pending if p.needs <= done or not (p.needs - {q.name for q in pending})]
        if not ready:
            raise BuildError("the conda packages of this run require each other in a cycle: "
                             + ", ".join(f"{p.name} needs {sorted(p.needs)}" for p in pending))
        first = ready[0]
        out.append(first)
        pending.remove(first)
        if not any(p.name == first.name for p in pending):
            done.add(first.name)
    return out


def assign_cache_keys(ordered: list[PlannedBuild], release: Release, toolchain: Toolchain | None) -> None:
    keys: dict[str, list[str]] = {}
    version = get_rattler_build_version_py()
    for item in ordered:
        native = item.subdir != "noarch" and item.cell is not None
        files = {}
        if item.env.get("SHIPYARD_PACKAGE_FILES"):
            folder = Path(item.env["SHIPYARD_PACKAGE_FILES"])
            files = {p.relative_to(folder).as_posix(): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}
        item.key = cache_key(
            kind="conda", sources=item.sources,
            spec_section={"recipe": item.staged.text, "variant": item.rv.variant, "files": files,
                          "cmake": item.env["SHIPYARD_CMAKE_ARGS"] if native else ""},
            toolchain=(toolchain.identity if toolchain and native else "none"), python=item.rv.variant.get("python"),
            extra={"rattler-build": version, "revision": CONDA_PIPELINE_REVISION,
                   # The repack's date is in the bytes; it is the sources' date, not HEAD's.
                   "epoch": str(item.epoch),
                   "solved": json.dumps(item.check.solved, sort_keys=True),
                   # A run or test dependency built here does not change these bytes: a noarch
                   # package keeps one key (and one build) for every variant.
                   "builds_against": json.dumps(sorted(k for n in item.builds_against for k in keys.get(n, [])))})
        keys.setdefault(item.name, []).append(item.key)
