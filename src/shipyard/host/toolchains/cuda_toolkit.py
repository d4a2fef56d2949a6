"""Assemble CUDA toolkits into shipyard's toolchain cache, prove them, and find them again.

A toolkit lives in `<cache_root>/cuda-<version>/`, laid out like NVIDIA's own (bin/nvcc with its
nvcc.profile, bin/cuobjdump, include/, lib64/, nvvm/), so it can serve as CUDA_HOME. It is built
in a staging folder, proved (nvcc compiles a kernel for every requested arch, g++ links it, and
cuobjdump finds exactly those SASS archs) and only then renamed into place with its
`toolchain.json` inside: a cache entry either is whole and proved, or is not there.

Where the pieces come from is data (resources/cuda_toolkits.toml): Debian's non-free
`nvidia-cuda-toolkit` .deb for the compiler and NVIDIA's PyPI wheels for headers and libraries,
NVIDIA's PyPI wheels alone, or a toolkit already on the host (CUDA_HOME, /usr/local/cuda-X.Y)
plus a cuobjdump of its generation.

The recipes, the shapes and the plan for one install (plan_cuda_toolkit: which recipe, which archs,
the host's toolkit or registry packages) live in cuda_recipes.py, the assembly and the
proof in cuda_assembly.py, reading a binary's device code in cuobjdump.py; this module acts on the
plan: it installs into the cache and finds again.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from packaging.utils import canonicalize_name

from shipyard.errors import ToolchainMissing, ToolError
from shipyard.host.toolchains.cuda_assembly import (
    assemble_from_debian,
    assemble_from_home,
    assemble_from_pypi,
    prove_toolkit,
)
from shipyard.host.toolchains.cuda_recipes import (
    InstalledCudaToolkit,
    ToolkitPlan,
    ToolkitRecipe,
    arch_sort_key,
    plan_cuda_toolkit,
)
from shipyard.plumbing import command
from shipyard.plumbing.atomic_files import write_atomic
from shipyard.plumbing.file_lock import exclusive
from shipyard.plumbing.hashing import sha256_hex
from shipyard.plumbing.progress import Progress

log = logging.getLogger("shipyard.host.toolchains.cuda_toolkit")


MANIFEST_NAME = "toolchain.json"
_MANIFEST_SCHEMA = 1


# --- public API ---------------------------------------------------------------------------------

def install_cuda_toolkit(version: str, archs: Sequence[str], cache_root: Path, *,
                         progress: Progress | None = None) -> InstalledCudaToolkit:
    """Make `<cache_root>/cuda-<version>/` a working toolkit proved for `archs`, and return it.

    Returns at once when the entry exists, its nvcc runs and `archs` were proved before.
    Raises ToolchainMissing (what cannot be had here, and the fix) or ToolError (a step failed).
    """
    say = progress or (lambda step: None)
    plan = plan_cuda_toolkit(version, archs)
    recipe = plan.recipe
    cache_root = Path(cache_root)
    entry = cache_root / f"cuda-{recipe.version}"
    cache_root.mkdir(parents=True, exist_ok=True)
    with _install_lock(cache_root, recipe.version):
        current = _usable_entry(entry, recipe)
        if current is not None:
            return _ensure_proved(current, plan, cache_root, say)
        host_cxx = _host_compiler(recipe)
        start = time.monotonic()
        staging = Path(tempfile.mkdtemp(prefix=f".cuda-{recipe.version}.staging-", dir=cache_root))
        try:
            tree, work = staging / "toolkit", staging / "work"
            if plan.home is not None:
                components, downloaded = assemble_from_home(recipe, plan.home, tree, work, say)
            elif recipe.source == "pypi":
                components, downloaded = assemble_from_pypi(recipe, host_cxx, tree, work, say)
            else:
                components, downloaded = assemble_from_debian(recipe, host_cxx, tree, work, say)
            toolkit = _describe(tree, recipe, host_cxx, components)
            plan.refuse_unsupported(toolkit.supported_archs)
            prove_toolkit(toolkit, plan.archs, work / "proof", say)
            seconds = time.monotonic() - start
            _write_manifest(tree, _with_verified(toolkit, plan.archs),
                            {"install_seconds": round(seconds, 1), "download_bytes": downloaded})
            if entry.exists() or entry.is_symlink():
                # A stale entry (its nvcc no longer runs): move it aside, then drop it with staging.
                os.rename(entry, staging / "stale")
            os.rename(tree, entry)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        say(f"installed CUDA {recipe.version} at {entry} in {time.monotonic() - start:.0f} s "
            f"({downloaded / 1e6:.1f} MB downloaded)")
        return _load_entry(entry)


def find_installed_cuda_toolkits(cache_root: Path) -> list[InstalledCudaToolkit]:
    """The toolkits in `cache_root` whose toolchain.json is readable and whose nvcc exists."""
    found = []
    for manifest in sorted(Path(cache_root).glob(f"cuda-*/{MANIFEST_NAME}")):
        try:
            toolkit = _load_entry(manifest.parent)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring %s: unreadable (%s)", manifest, exc)
            continue
        if not toolkit.nvcc.exists():
            log.warning("ignoring %s: its nvcc %s is gone", manifest, toolkit.nvcc)
            continue
        found.append(toolkit)
    return sorted(found, key=lambda t: arch_sort_key(t.version))


# --- cache entries ------------------------------------------------------------------------------

@contextmanager
def _install_lock(cache_root: Path, version: str) -> Iterator[None]:
    # Parallel nox sessions may ask for the same toolkit; one assembles it, the others then find it.
    with exclusive(cache_root / f".cuda-{version}.lock"):
        # Staging folders left by a killed install are safe to drop while we hold the lock.
        for leftover in cache_root.glob(f".cuda-{version}.staging-*"):
            shutil.rmtree(leftover, ignore_errors=True)
        yield


def _usable_entry(entry: Path, recipe: ToolkitRecipe) -> InstalledCudaToolkit | None:
    if not (entry / MANIFEST_NAME).is_file():
        return None
    try:
        toolkit = _load_entry(entry)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("reinstalling CUDA %s: %s is unreadable (%s)", recipe.version, entry / MANIFEST_NAME, exc)
        return None
    try:
        result = command.run([toolkit.nvcc, "--version"], check=False, timeout=60, what="nvcc --version")
        answer = result.stdout if result.returncode == 0 else result.stderr or result.stdout
    except ToolError as exc:  # the binary is gone or cannot be executed
        answer = str(exc)
    if f"release {recipe.version}," not in answer:
        log.warning("reinstalling CUDA %s: %s does not run (%s)", recipe.version, toolkit.nvcc,
                    answer.strip()[-200:])
        return None
    changed = _recipe_change(toolkit, recipe)
    if changed:
        log.warning("reinstalling CUDA %s: the recipe changed since %s was assembled (%s)", recipe.version,
                    toolkit.root, changed)
        return None
    return toolkit


def _recipe_change(toolkit: InstalledCudaToolkit, recipe: ToolkitRecipe) -> str | None:
    """What differs between the wheels `toolkit` was assembled from and those `recipe` pins now
    (a toolkit linked from the host where the recipe now assembles one included); None when nothing
    does, or for a host's toolkit the recipe still asks for."""
    if not recipe.from_registry:
        return None
    had = {c for c in toolkit.components if c.startswith(("wheel:", "home:"))}
    wanted = {_wheel_component(pin) for pin in recipe.wheels}
    if had == wanted:
        return None
    return f"had {', '.join(sorted(had - wanted)) or 'nothing else'}; wants {', '.join(sorted(wanted - had)) or 'less'}"


def _wheel_component(pin: str) -> str:
    """A recipe's wheel pin as a toolkit's components name it: wheel:nvidia-cuda-nvcc==13.0.88."""
    name, version = pin.split("==", 1)
    return f"wheel:{canonicalize_name(name)}=={version.strip()}"


def _ensure_proved(toolkit: InstalledCudaToolkit, plan: ToolkitPlan, cache_root: Path,
                   say: Progress) -> InstalledCudaToolkit:
    recipe, wanted = plan.recipe, plan.archs
    plan.refuse_unsupported(toolkit.supported_archs)
    if not toolkit.host_cxx.exists():
        raise ToolchainMissing(f"CUDA {recipe.version} at {toolkit.root} was proved with {toolkit.host_cxx}, "
                               f"which is gone. Fix: apt-get install -y {recipe.host_cxx}")
    if set(wanted) <= set(toolkit.verified_archs):
        say(f"CUDA {toolkit.version} already installed at {toolkit.root}")
        return toolkit
    work = Path(tempfile.mkdtemp(prefix=f".cuda-{recipe.version}.proof-", dir=cache_root))
    try:
        prove_toolkit(toolkit, wanted, work, say)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _write_manifest(toolkit.root, _with_verified(toolkit, wanted), None)
    return _load_entry(toolkit.root)


def _with_verified(toolkit: InstalledCudaToolkit, archs: tuple[str, ...]) -> InstalledCudaToolkit:
    merged = sorted(set(toolkit.verified_archs) | set(archs), key=arch_sort_key)
    return dataclasses.replace(toolkit, verified_archs=tuple(merged))


def _write_manifest(root: Path, toolkit: InstalledCudaToolkit,
                    install_facts: dict[str, float] | None) -> None:
    """Write toolchain.json (paths relative to `root`, so the entry can move) atomically."""
    path = root / MANIFEST_NAME
    previous = json.loads(path.read_text()) if path.is_file() else {}
    data = {
        "schema": _MANIFEST_SCHEMA,
        "version": toolkit.version,
        "nvcc": _relative(toolkit.nvcc, toolkit.root),
        "cuobjdump": _relative(toolkit.cuobjdump, toolkit.root),
        "include_dir": _relative(toolkit.include_dir, toolkit.root),
        "lib_dir": _relative(toolkit.lib_dir, toolkit.root),
        "host_cxx": str(toolkit.host_cxx),
        "supported_archs": list(toolkit.supported_archs),
        "verified_archs": list(toolkit.verified_archs),
        "identity": toolkit.identity,
        "components": list(toolkit.components),
        "installed_at": previous.get("installed_at") or datetime.now(UTC).isoformat(timespec="seconds"),
        **({k: previous[k] for k in ("install_seconds", "download_bytes") if k in previous}),
        **(install_facts or {}),
    }
    write_atomic(path, json.dumps(data, indent=2) + "\n")


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _load_entry(root: Path) -> InstalledCudaToolkit:
    data = json.loads((root / MANIFEST_NAME).read_text())
    if data.get("schema") != _MANIFEST_SCHEMA:
        raise ValueError(f"schema {data.get('schema')!r}, expected {_MANIFEST_SCHEMA}")
    root = root.absolute()
    return InstalledCudaToolkit(
        version=str(data["version"]),
        root=root,
        nvcc=root / data["nvcc"],
        cuobjdump=root / data["cuobjdump"],
        host_cxx=Path(data["host_cxx"]),
        include_dir=root / data["include_dir"],
        lib_dir=root / data["lib_dir"],
        supported_archs=tuple(data["supported_archs"]),
        verified_archs=tuple(data["verified_archs"]),
        identity=str(data["identity"]),
        components=tuple(data["components"]),
    )


def _host_compiler(recipe: ToolkitRecipe) -> Path:
    found = shutil.which(recipe.host_cxx)
    if not found:
        raise ToolchainMissing(
            f"CUDA {recipe.version}'s nvcc needs {recipe.host_cxx} as host compiler (it refuses gcc newer "
            f"than {recipe.host_gcc_max}), and {recipe.host_cxx} is not on PATH. "
            f"Fix: apt-get install -y {recipe.host_cxx}")
    return Path(found)


def _describe(root: Path, recipe: ToolkitRecipe, host_cxx: Path,
              components: tuple[str, ...]) -> InstalledCudaToolkit:
    """The toolkit assembled at `root`, as its own nvcc reports it (nothing proved yet)."""
    nvcc = root / "bin" / "nvcc"
    version_text = command.run([nvcc, "--version"], timeout=60, what="nvcc --version").stdout
    if f"release {recipe.version}," not in version_text:
        raise ToolError(f"assemble: {nvcc} is not CUDA {recipe.version}: {version_text.strip()[-120:]}")
    codes = command.run([nvcc, "--list-gpu-code"], timeout=60, what="nvcc --list-gpu-code").stdout
    archs = {f"{int(m.group(1)[:-1])}.{m.group(1)[-1]}" for m in re.finditer(r"^sm_(\d+)$", codes, re.M)}
    supported = tuple(sorted((a for a in archs if recipe.in_range(a)), key=arch_sort_key))
    identity = sha256_hex("\n".join([version_text.strip(), *components]).encode())
    return InstalledCudaToolkit(
        version=recipe.version, root=root, nvcc=nvcc, cuobjdump=root / "bin" / "cuobjdump",
        host_cxx=host_cxx, include_dir=root / "include", lib_dir=root / "lib64",
        supported_archs=supported, verified_archs=(), identity=identity, components=components)


