"""A component's sdist (package type `sdist`): built once by its PEP 517 backend, checked (its
metadata by `twine check`, its files against the project's sources), and unpacked, so that the
component's wheels build from it and not from the checkout, as `python -m build` does: a broken
sdist fails the release instead of the first user who builds from it."""

from __future__ import annotations

import shutil
import sys
import tarfile
import time
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path, PurePosixPath

from build import ProjectBuilder

from shipyard.errors import BuildError, ToolError
from shipyard.host.source_tree import hash_tree, list_files
from shipyard.host.toolchains.discover import Interpreter
from shipyard.plumbing import command
from shipyard.plumbing.build_cache import cache_key
from shipyard.plumbing.hashing import sha256_of
from shipyard.record.manifest import ArtifactRecord, FeatureRecord
from shipyard.release.kinds import SDIST
from shipyard.release.matrix import Cell, expand, select
from shipyard.release.project_declaration import build_backend, uses_vcs_version, vcs_state, writes_into_sources
from shipyard.release.spec import Component
from shipyard.supply.binaries import archive_files
from shipyard.supply.sbom import sdist_sbom
from shipyard.wheel.build_env import BuildEnv, copy_project, ensure_build_env, hook_runner
from shipyard.wheel.build_request import BuildContext
from shipyard.wheel.pep517 import run_backend


# Sources that belong to the repository, not to a source distribution: VCS and CI metadata and
# editor settings (every path with a part that starts with a dot: .gitignore, .github/…), and
# what a backend writes into the project when it builds (egg-info).
def _never_in_an_sdist(relative: PurePosixPath) -> bool:
    return any(part.startswith(".") or part.endswith(".egg-info") for part in relative.parts)


@dataclass(frozen=True)
class SdistContents:
    """What an sdist holds: its files below the top folder with their bytes, and its PKG-INFO's
    name and version."""

    files: dict[str, bytes]
    name: str
    version: str


def build_sdist(project: Path, env: BuildEnv, out_dir: Path, *, epoch: int) -> Path:
    """The backend's build_sdist hook, run by `env`'s Python (which holds the build requirements);
    returns the sdist in `out_dir`."""
    what = f"build {project.name} sdist"
    runner = hook_runner(what, {**env.path_env(), "SOURCE_DATE_EPOCH": str(epoch)}, timeout=600)
    builder = ProjectBuilder(project, python_executable=str(env.python), runner=runner)
    return run_backend(builder, "sdist", out_dir, what)


def read_sdist(sdist: Path) -> SdistContents:
    """The files and the PKG-INFO of `sdist` (a .tar.gz with one top folder); BuildError when it
    is not one."""
    try:
        with tarfile.open(sdist, "r:gz") as tar:
            files = archive_files(tar)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise BuildError(f"{sdist.name}: not a readable .tar.gz ({exc})") from None
    if "PKG-INFO" not in files:
        raise BuildError(f"{sdist.name}: no PKG-INFO below its top folder; it is no sdist")
    info = HeaderParser().parsestr(files["PKG-INFO"].decode("utf-8", "replace"))
    return SdistContents(files, info.get("Name", ""), info.get("Version", ""))


def missing_sources(contents: SdistContents, project: Path) -> list[str]:
    """The project's source files (list_files: git's view, else the folder minus build outputs)
    that the sdist does not hold, relative to the project, sorted."""
    held = set(contents.files)
    out = []
    for path in list_files(project):
        relative = PurePosixPath(path.relative_to(project).as_posix())
        if not _never_in_an_sdist(relative) and relative.as_posix() not in held:
            out.append(relative.as_posix())
    return sorted(out)


def check_sdist(sdist: Path, project: Path) -> SdistContents:
    """`sdist`'s contents once `twine check` passes its metadata and it holds every source file of
    `project`; else BuildError naming each missing file on one line."""
    contents = read_sdist(sdist)
    try:
        command.run([sys.executable, "-m", "twine", "check", sdist], timeout=120, what=f"twine check {sdist.name}")
    except ToolError as exc:
        raise BuildError(f"{sdist.name}: twine check failed: {' '.join(exc.output.split())[-400:]}") from None
    missing = missing_sources(contents, project)
    if missing:
        raise BuildError(f"{sdist.name} lacks {len(missing)} source file(s) of {project}: {', '.join(missing)}; "
                         f"add them to the sdist (MANIFEST.in for setuptools, the backend's sdist include "
                         f"setting otherwise)")
    return contents


def unpack_sdist(sdist: Path, into: Path) -> Path:
    """`sdist` unpacked into an empty `into`; returns its top folder (the project to build wheels from)."""
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    with tarfile.open(sdist, "r:gz") as tar:
        tar.extractall(into, filter="data")  # no member lands outside `into`
    tops = [p for p in into.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise BuildError(f"{sdist.name}: expected one top folder, found {len(tops)}")
    return tops[0]


# --- in `shipyard build` ----------------------------------------------------------------------

@dataclass(frozen=True)
class ComponentSdist:
    """A component's sdist as one build made it: the file in dist/, its SBOM beside it, and the
    unpacked project its wheels build from."""

    cell: Cell
    sdist: Path
    sbom: Path
    project: Path
    version: str
    build: dict[str, object]


def sdist_cells(ctx: BuildContext, components: list[str]) -> dict[str, Cell]:
    """The sdist cell of each of `components` that the release makes one for (exclusions removed)."""
    cells = select(expand(ctx.spec.release), package_type=SDIST.name)
    return {c.component: c for c in cells if c.component in components}


def make_component_sdist(ctx: BuildContext, cell: Cell, component: Component,
                         interpreter: Interpreter) -> ComponentSdist:
    """Build (or take from the cache), check and unpack `component`'s sdist, put it and its SBOM
    into dist/; BuildError when the backend fails, twine check refuses it or a source file is missing."""
    start = time.monotonic()
    source = component.source_dir(ctx.root)
    env = ensure_build_env(interpreter, source, ctx.request.state)
    vcs = vcs_state(source) if uses_vcs_version(env.requirements) else ""
    key = cache_key(kind="sdist", sources=hash_tree(source), spec_section={"version": ctx.spec.release.release.version},
                    toolchain=env.identity, python=None, extra={"vcs": vcs})
    with ctx.cache.building(key):
        entry = ctx.cache.get(key)
        cached = entry is not None
        if entry is None:
            ctx.progress(f"build {cell.id}")
            project = source
            if writes_into_sources(build_backend(source)):
                # setuptools writes egg-info into the project, and its next sdist takes every file that
                # egg-info's SOURCES.txt lists (a header MANIFEST.in no longer names): build in a clean copy.
                work = ctx.request.state / "build" / cell.id
                shutil.rmtree(work, ignore_errors=True)
                project = copy_project(source, work / source.name)
            made = build_sdist(project, env, ctx.request.state / "sdist" / cell.id, epoch=ctx.git.commit_time)
            entry = ctx.cache.put(key, [made], {"kind": "sdist", "cell": cell.id, "seconds": time.monotonic() - start})
        built = entry.files()[0]
    contents = check_sdist(built, source)  # every run: the message names what is missing each time
    if component.version and contents.version != component.version:
        # Its wheels are relabelled to release.yaml's version; an sdist cannot be: pip builds it
        # with the version its backend reads, so the two would be published under different versions.
        raise BuildError(f"{built.name}: version {contents.version} is its project's own, but release.yaml's "
                         f"components.{component.name}.version {component.version} is its wheels'; set the "
                         f"version in the project, or drop sdist from components.{component.name}.package_types")
    target = ctx.request.dist / "sdist" / built.name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(built, target)
    sbom = ctx.request.dist / "sboms" / f"{built.name}.cdx.json"
    sbom.parent.mkdir(parents=True, exist_ok=True)
    sbom.write_bytes(sdist_sbom(contents.files, name=contents.name, version=contents.version,
                                epoch=ctx.git.commit_time))
    # One folder per variant: the variants' runs may build side by side.
    project = unpack_sdist(target, ctx.request.state / "from-sdist" / f"{cell.id}-{ctx.variant.tag}")
    build = {"cache_key": key, "cached": cached, "seconds": round(time.monotonic() - start, 2),
             "git_sha": ctx.git.sha, "git_dirty": ctx.git.dirty, "source_date_epoch": ctx.git.commit_time,
             "sbom": sbom.relative_to(ctx.request.dist).as_posix(), "result": "cached" if cached else "built",
             "detail": ""}
    return ComponentSdist(cell, target, sbom, project, contents.version, build)


def sdist_record(ctx: BuildContext, made: ComponentSdist, proven_by: tuple[str, ...]) -> ArtifactRecord:
    """The manifest's record of `made`; `proven_by`: the wheel cells built from it whose tests prove it."""
    return ArtifactRecord(
        name=made.sdist.name, path=made.sdist.relative_to(ctx.request.dist).as_posix(),
        sha256=sha256_of(made.sdist), size=made.sdist.stat().st_size, **ArtifactRecord.identity(made.cell),
        version=made.version,
        features=tuple(FeatureRecord(id=i, title=t, status=s)
                       for i, t, s in ctx.spec.features_for(made.cell.component, ctx.inventory.host_platform)),
        tests=None, build=made.build, proven_by=proven_by)
