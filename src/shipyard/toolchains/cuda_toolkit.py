"""Assemble CUDA toolkits into shipyard's toolchain cache, prove them, and find them again.

A toolkit lives in `<cache_root>/cuda-<version>/`, laid out like NVIDIA's own (bin/nvcc with its
nvcc.profile, bin/cuobjdump, include/, lib64/, nvvm/), so it can serve as CUDA_HOME. It is built
in a staging folder, proved (nvcc compiles a kernel for every requested arch, g++ links it, and
cuobjdump finds exactly those SASS archs) and only then renamed into place with its
`toolchain.json` inside: a cache entry either is whole and proved, or is not there.

Where the pieces come from is data (resources/cuda_toolkits.toml): Debian's non-free
`nvidia-cuda-toolkit` .deb for the compiler, NVIDIA's PyPI wheels for headers and libraries, or
a toolkit already on the host (CUDA_HOME, /usr/local/cuda-X.Y) plus a cuobjdump of its generation.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import platform
import re
import shutil
import stat
import sys
import tempfile
import time
import tomllib
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from shipyard import command
from shipyard.apt_sources import download_debs
from shipyard.cuda_archs import DeviceCode, gencode_flags, parse_arch_list, sm_name
from shipyard.cuda_archs import supported_archs as arch_table
from shipyard.errors import SpecError, ToolchainMissing, ToolError
from shipyard.file_lock import exclusive
from shipyard.plumbing.atomic_files import write_atomic
from shipyard.progress import Progress

log = logging.getLogger("shipyard.toolchains.cuda_toolkit")


MANIFEST_NAME = "toolchain.json"
_MANIFEST_SCHEMA = 1

# Where each part of Debian's nvidia-cuda-toolkit .deb goes in the assembled tree. The real nvcc
# binary is taken, not Debian's /usr/bin/nvcc wrapper: nvcc reads the nvcc.profile beside its
# own binary, and ours points at this tree instead of /usr/lib.
_DEB_LAYOUT = (
    ("usr/lib/nvidia-cuda-toolkit/bin/nvcc", "bin/nvcc"),
    ("usr/lib/nvidia-cuda-toolkit/bin/crt", "bin/crt"),
    ("usr/lib/nvidia-cuda-toolkit/bin/cicc", "nvvm/bin/cicc"),
    ("usr/lib/nvidia-cuda-toolkit/libdevice", "nvvm/libdevice"),
    ("usr/bin/ptxas", "bin/ptxas"),
    ("usr/bin/fatbinary", "bin/fatbinary"),
    ("usr/bin/nvlink", "bin/nvlink"),
    ("usr/bin/cudafe++", "bin/cudafe++"),
    ("usr/bin/cuobjdump", "bin/cuobjdump"),
    ("usr/bin/bin2c", "bin/bin2c"),
    ("usr/bin/nvprune", "bin/nvprune"),
    ("usr/bin/cu++filt", "bin/cu++filt"),
)

# Where each part of NVIDIA's wheels goes. The three include trees are disjoint; nvcc's own
# crt/ headers (host_config.h, host_runtime.h) ship only in the nvcc wheel, which is why it is
# fetched even though its ptxas duplicates Debian's.
_WHEEL_LAYOUT = (
    ("nvidia/cuda_runtime/include", "include"),
    ("nvidia/cuda_nvcc/include", "include"),
    ("nvidia/cuda_cccl/include", "include"),
    ("nvidia/cuda_nvcc/nvvm/include", "nvvm/include"),
    ("nvidia/cuda_nvcc/nvvm/lib64", "nvvm/lib64"),
    ("nvidia/cuda_cccl/lib/cmake", "lib64/cmake"),
)

# Our nvcc.profile, in the format NVIDIA's nvcc reads (variables relative to the binary's folder,
# `+=` prepends). host-compiler/ comes first on nvcc's PATH so that nvcc run without -ccbin picks
# the gcc this release accepts rather than the system's newer default.
_NVCC_PROFILE = """\
# Written by shipyard for this assembled toolkit; paths are relative so the folder can move.
TOP              = $(_HERE_)/..
CICC_PATH        = $(TOP)/nvvm/bin
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH += $(TOP)/lib64:
PATH            += $(TOP)/host-compiler:$(TOP)/nvvm/bin:$(_HERE_):
INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)
LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib64/stubs" "-L$(TOP)/lib64"
CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
"""

# The proof: device code that needs libdevice (sinf), the fp16 headers and CCCL's headers,
# exported from a shared library that an executable links together with libcudart.
_PROOF_CU = r"""
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cub/version.cuh>
#include <thrust/version.h>

__global__ void shipyard_proof_kernel(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __half2float(__float2half(2.0f * x[i])) + sinf(x[i]);
}

extern "C" int shipyard_proof_cccl_version() { return THRUST_VERSION + 0 * CUB_VERSION; }

extern "C" int shipyard_proof_run(const float* x, float* y, int n) {
  float *dx = nullptr, *dy = nullptr;
  size_t bytes = sizeof(float) * n;
  cudaError_t err = cudaMalloc(&dx, bytes);
  if (err == cudaSuccess) err = cudaMalloc(&dy, bytes);
  if (err == cudaSuccess) err = cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);
  if (err == cudaSuccess) {
    shipyard_proof_kernel<<<(n + 127) / 128, 128>>>(dx, dy, n);
    err = cudaGetLastError();
  }
  if (err == cudaSuccess) err = cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost);
  cudaFree(dx);
  cudaFree(dy);
  return (int)err;
}
"""

_PROOF_MAIN = r"""
#include <cuda_runtime_api.h>
#include <cmath>
#include <cstdio>

extern "C" int shipyard_proof_cccl_version();
extern "C" int shipyard_proof_run(const float* x, float* y, int n);

int main() {
  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  std::printf("cudart %d, thrust %d\n", CUDART_VERSION, shipyard_proof_cccl_version());
  if (err != cudaSuccess || devices == 0) {
    // No GPU (or no driver) here: loading cudart and linking the kernel library is the proof.
    std::printf("no GPU: %s\n", err == cudaSuccess ? "0 devices" : cudaGetErrorName(err));
    return 0;
  }
  const int n = 1000;
  float x[n], y[n];
  for (int i = 0; i < n; ++i) x[i] = 0.001f * i;
  int rc = shipyard_proof_run(x, y, n);
  if (rc == (int)cudaErrorNoKernelImageForDevice) {
    std::printf("GPU present, but none of the proved archs runs on it\n");
    return 0;
  }
  if (rc != 0) {
    std::printf("kernel failed: %s\n", cudaGetErrorName((cudaError_t)rc));
    return 1;
  }
  float worst = 0.0f;
  for (int i = 0; i < n; ++i) worst = std::fmax(worst, std::fabs(y[i] - (2.0f * x[i] + std::sin(x[i]))));
  std::printf("kernel ran on the GPU, max error %g\n", worst);
  return worst < 1e-2f ? 0 : 1;
}
"""


@dataclass(frozen=True)
class DebianSource:
    """The Debian .debs that carry a toolkit's compiler."""

    suite: str
    component: str
    packages: tuple[str, ...]
    upstream: str  # the .deb version must be "<upstream>~<debian revision>"


@dataclass(frozen=True)
class ToolkitRecipe:
    """How one CUDA version is obtained here (one table of resources/cuda_toolkits.toml)."""

    version: str
    host_cxx: str
    host_gcc_max: int
    debian: DebianSource | None = None
    wheels: tuple[str, ...] = ()
    home: Path | None = None
    cuobjdump_wheel: str | None = None
    cuobjdump_in_wheel: str | None = None
    unobtainable: str | None = None

    @property
    def archs(self) -> tuple[str, ...]:
        """What this version compiles SASS for: resources/cuda_archs.toml, the one list."""
        if self.version not in arch_table():
            raise ToolchainMissing(f"CUDA {self.version} has a recipe in cuda_toolkits.toml but no arch list "
                                   f"in shipyard/resources/cuda_archs.toml. Fix: add its archs there")
        return arch_table()[self.version]

    @property
    def arch_min(self) -> str:
        return self.archs[0]

    @property
    def arch_max(self) -> str:
        return self.archs[-1]

    def in_range(self, arch: str) -> bool:
        return _arch_key(self.arch_min) <= _arch_key(arch) <= _arch_key(self.arch_max)


@dataclass(frozen=True)
class InstalledCudaToolkit:
    """A proved toolkit in the cache; `root` can be used as CUDA_HOME."""

    version: str
    root: Path
    nvcc: Path
    cuobjdump: Path
    host_cxx: Path
    include_dir: Path
    lib_dir: Path
    supported_archs: tuple[str, ...]  # "major.minor", what this nvcc compiles SASS for
    verified_archs: tuple[str, ...]  # the archs a proof compiled, linked and found with cuobjdump
    identity: str  # sha256 of `nvcc --version` and the versions of every .deb/.whl it holds
    components: tuple[str, ...]  # "deb:nvidia-cuda-toolkit=11.8.89~11.8.0-5~deb12u1", ...


# --- recipes ------------------------------------------------------------------------------------

@cache
def cuda_toolkit_recipes() -> tuple[ToolkitRecipe, ...]:
    """Every CUDA version resources/cuda_toolkits.toml knows, oldest first."""
    text = resources.files("shipyard.resources").joinpath("cuda_toolkits.toml").read_text()
    recipes = []
    for version, table in tomllib.loads(text)["toolkits"].items():
        debian = None
        if table["source"] == "debian":
            debian = DebianSource(table["suite"], table["component"], tuple(table["debs"]),
                                  table["deb_upstream"])
        recipes.append(ToolkitRecipe(
            version=version,
            host_cxx=table["host_cxx"],
            host_gcc_max=int(table["host_gcc_max"]),
            debian=debian,
            wheels=tuple(table.get("wheels", ())),
            home=Path(table["home"]) if table.get("home") else None,
            cuobjdump_wheel=table.get("cuobjdump_wheel"),
            cuobjdump_in_wheel=table.get("cuobjdump_in_wheel"),
            unobtainable=table.get("unobtainable"),
        ))
    return tuple(sorted(recipes, key=lambda r: _arch_key(r.version)))


def cuda_toolkit_recipe(version: str) -> ToolkitRecipe:
    """The recipe for `version` ("11.8"); ToolchainMissing when shipyard knows no such toolkit."""
    for recipe in cuda_toolkit_recipes():
        if recipe.version == version:
            return recipe
    known = ", ".join(r.version for r in cuda_toolkit_recipes())
    raise ToolchainMissing(f"shipyard knows no CUDA {version} toolkit (it knows {known}). Fix: use one of "
                           f"those, or add CUDA {version} to shipyard/resources/cuda_toolkits.toml")


def cuda_runtime_wheel(version: str) -> str:
    """The pin of NVIDIA's CUDA runtime wheel for `version` (nvidia-cuda-runtime-cu11==11.8.89): the
    one its toolkit is assembled with. ToolchainMissing when the recipe names none."""
    pins = [w for w in cuda_toolkit_recipe(version).wheels
            if canonicalize_name(Requirement(w).name).startswith("nvidia-cuda-runtime")]
    if not pins:
        raise ToolchainMissing(f"no PyPI wheel of the CUDA {version} runtime is known (shipyard/resources/"
                               f"cuda_toolkits.toml names none for {version}). Fix: add its "
                               "nvidia-cuda-runtime pin to that toolkit's `wheels`")
    return pins[0]


def _arch_key(arch: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)\.(\d+)", arch)
    if not match:
        raise SpecError(f"CUDA arch {arch!r} is not in major.minor form (for example '8.6')")
    return int(match.group(1)), int(match.group(2))


def _requested_archs(archs: Sequence[str] | str) -> tuple[str, ...]:
    # "+PTX" adds PTX to a build; the proof is about SASS, so it checks the arch itself.
    names = parse_arch_list(archs) if isinstance(archs, str) else tuple(archs)
    cleaned = tuple(dict.fromkeys(a.strip().removesuffix("+PTX") for a in names if a.strip()))
    if not cleaned:
        raise SpecError("no CUDA archs given: a toolkit is proved by compiling for a list such as '7.5;8.0'")
    for arch in cleaned:
        _arch_key(arch)
    return cleaned


def _refuse_unsupported(recipe: ToolkitRecipe, archs: tuple[str, ...],
                        supported: Sequence[str] | None) -> None:
    """ToolchainMissing when an arch is outside what this toolkit compiles SASS for."""
    exact = tuple(supported) if supported is not None else arch_table().get(recipe.version)
    bad = [a for a in archs if not recipe.in_range(a) or (exact is not None and a not in exact)]
    if not bad:
        return
    others = []
    for other in cuda_toolkit_recipes():
        table = arch_table().get(other.version)
        if other.version != recipe.version and all(
                other.in_range(a) and (table is None or a in table) for a in bad):
            others.append(other.version)
    listed = f" ({';'.join(exact)})" if exact else ""
    raise ToolchainMissing(
        f"CUDA {recipe.version} cannot compile SASS for {';'.join(bad)}: it supports "
        f"{recipe.arch_min}-{recipe.arch_max}{listed}. Fix: drop {';'.join(bad)} from the arch list"
        + (f", or build it with CUDA {', '.join(others)}" if others else ""))


# --- public API ---------------------------------------------------------------------------------

def install_cuda_toolkit(version: str, archs: Sequence[str], cache_root: Path, *,
                         progress: Progress | None = None) -> InstalledCudaToolkit:
    """Make `<cache_root>/cuda-<version>/` a working toolkit proved for `archs`, and return it.

    Returns at once when the entry exists, its nvcc runs and `archs` were proved before.
    Raises ToolchainMissing (what cannot be had here, and the fix) or ToolError (a step failed).
    """
    say = progress or (lambda step: None)
    recipe = cuda_toolkit_recipe(version)
    wanted = _requested_archs(archs)
    cache_root = Path(cache_root)
    entry = cache_root / f"cuda-{recipe.version}"
    home = _local_home(recipe) if recipe.debian is None else None
    _refuse_unsupported(recipe, wanted, None)
    cache_root.mkdir(parents=True, exist_ok=True)
    with _install_lock(cache_root, recipe.version):
        current = _usable_entry(entry, recipe)
        if current is not None:
            return _ensure_proved(current, recipe, wanted, cache_root, say)
        host_cxx = _host_compiler(recipe)
        start = time.monotonic()
        staging = Path(tempfile.mkdtemp(prefix=f".cuda-{recipe.version}.staging-", dir=cache_root))
        try:
            tree, work = staging / "toolkit", staging / "work"
            if home is None:
                components, downloaded = _assemble_from_debian(recipe, host_cxx, tree, work, say)
            else:
                components, downloaded = _assemble_from_home(recipe, home, tree, work, say)
            toolkit = _describe(tree, recipe, host_cxx, components)
            _refuse_unsupported(recipe, wanted, toolkit.supported_archs)
            _prove(toolkit, wanted, work / "proof", say)
            seconds = time.monotonic() - start
            _write_manifest(tree, _with_verified(toolkit, wanted),
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
    return sorted(found, key=lambda t: _arch_key(t.version))


def cuda_sass_archs(binary: Path, cuobjdump: Path) -> set[str]:
    """The SASS archs ({"sm_37", "sm_50"}) embedded in `binary`; empty when it holds no device code."""
    return set(cuda_device_code(binary, cuobjdump).sass)


def cuda_device_code(binary: Path, cuobjdump: Path) -> DeviceCode:
    """The SASS and PTX archs embedded in `binary`; empty when it holds no device code.

    Raises ToolError when cuobjdump cannot read the binary (typically: a fatbin from another
    toolkit generation).
    """
    binary = Path(binary)
    if not binary.is_file():
        raise ToolError(f"cuobjdump: no such file: {binary}")
    result = command.run([cuobjdump, "--list-elf", "--list-ptx", binary], check=False, timeout=300,
                         what="cuobjdump --list-elf --list-ptx")
    if result.returncode != 0:
        if "does not contain device code" in result.stderr + result.stdout:
            return DeviceCode()
        raise ToolError(
            f"{cuobjdump} cannot read the device code in {binary} (exit {result.returncode}). A cuobjdump "
            "reads only fatbins its own toolkit generation can: use the cuobjdump installed beside the "
            "nvcc that built the binary (InstalledCudaToolkit.cuobjdump)",
            cmd=list(result.args), returncode=result.returncode, output=result.output)
    return DeviceCode(
        frozenset(re.findall(r"\.(sm_\d+[a-z]?)\.cubin\s*$", result.stdout, flags=re.MULTILINE)),
        frozenset(re.findall(r"\.(sm_\d+[a-z]?)\.ptx\s*$", result.stdout, flags=re.MULTILINE)))


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
    return toolkit


def _ensure_proved(toolkit: InstalledCudaToolkit, recipe: ToolkitRecipe, wanted: tuple[str, ...],
                   cache_root: Path, say: Progress) -> InstalledCudaToolkit:
    _refuse_unsupported(recipe, wanted, toolkit.supported_archs)
    if not toolkit.host_cxx.exists():
        raise ToolchainMissing(f"CUDA {recipe.version} at {toolkit.root} was proved with {toolkit.host_cxx}, "
                               f"which is gone. Fix: apt-get install -y {recipe.host_cxx}")
    if set(wanted) <= set(toolkit.verified_archs):
        say(f"CUDA {toolkit.version} already installed at {toolkit.root}")
        return toolkit
    work = Path(tempfile.mkdtemp(prefix=f".cuda-{recipe.version}.proof-", dir=cache_root))
    try:
        _prove(toolkit, wanted, work, say)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _write_manifest(toolkit.root, _with_verified(toolkit, wanted), None)
    return _load_entry(toolkit.root)


def _with_verified(toolkit: InstalledCudaToolkit, archs: tuple[str, ...]) -> InstalledCudaToolkit:
    merged = sorted(set(toolkit.verified_archs) | set(archs), key=_arch_key)
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
    supported = tuple(sorted((a for a in archs if recipe.in_range(a)), key=_arch_key))
    identity = hashlib.sha256("\n".join([version_text.strip(), *components]).encode()).hexdigest()
    return InstalledCudaToolkit(
        version=recipe.version, root=root, nvcc=nvcc, cuobjdump=root / "bin" / "cuobjdump",
        host_cxx=host_cxx, include_dir=root / "include", lib_dir=root / "lib64",
        supported_archs=supported, verified_archs=(), identity=identity, components=components)


# --- assembling from Debian + PyPI --------------------------------------------------------------

def _assemble_from_debian(recipe: ToolkitRecipe, host_cxx: Path, tree: Path, work: Path,
                          say: Progress) -> tuple[tuple[str, ...], int]:
    """Fetch and unpack the .debs and wheels, and lay out `tree`; returns (components, bytes fetched)."""
    assert recipe.debian is not None
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        raise ToolchainMissing(
            f"CUDA {recipe.version} is assembled from Debian's amd64 packages, so only on x86_64 Linux "
            f"(this is {platform.system()} {platform.machine()}). Fix: set CUDA_HOME to a CUDA "
            f"{recipe.version} toolkit on this host, or build these cells on an x86_64 Linux host")
    for tool in ("apt-get", "dpkg-deb"):
        if not shutil.which(tool):
            raise ToolchainMissing(
                f"assembling CUDA {recipe.version} needs {tool} (a Debian-family host). "
                "Fix: build these cells on Debian/Ubuntu, or where CUDA_HOME holds the toolkit")
    debs = _download_debs(recipe.debian, work / "apt", say)
    wheels = _download_wheels(recipe.wheels, work / "wheels", say)

    say(f"unpack: {', '.join(d.name for d in debs)} and {len(wheels)} wheels")
    deb_root = work / "deb-root"
    for deb in debs:
        command.run(["dpkg-deb", "-x", deb, deb_root], timeout=600, what=f"dpkg-deb -x {deb.name}")
    wheel_root = work / "wheel-root"
    for wheel in wheels:
        unpack_wheel(wheel, wheel_root)

    say(f"assemble: CUDA {recipe.version} (nvcc from Debian {recipe.debian.suite}, headers and "
        "libraries from PyPI)")
    tree.mkdir(parents=True)
    for source, target in _DEB_LAYOUT:
        _move_into(deb_root / source, tree / target)
    for leftover in wheel_root.rglob("__init__.py"):
        leftover.unlink()
    for source, target in _WHEEL_LAYOUT:
        _move_into(wheel_root / source, tree / target)
    cudart = sorted((wheel_root / "nvidia/cuda_runtime/lib").glob("libcudart.so.*"))
    if not cudart:
        raise ToolError("assemble: the nvidia-cuda-runtime wheel holds no libcudart.so.*; "
                        "update the wheel pins in resources/cuda_toolkits.toml")
    for library in cudart:
        _move_into(library, tree / "lib64" / library.name)
    # The unversioned name is what `-lcudart` and CMake's find_library look for.
    (tree / "lib64" / "libcudart.so").symlink_to(cudart[0].name)
    (tree / "bin" / "nvcc.profile").write_text(_NVCC_PROFILE)
    host_dir = tree / "host-compiler"
    host_dir.mkdir()
    (host_dir / "g++").symlink_to(host_cxx)
    host_cc = shutil.which(recipe.host_cxx.replace("g++", "gcc"))
    if host_cc:
        (host_dir / "gcc").symlink_to(host_cc)

    components = tuple(_deb_component(deb, recipe.debian) for deb in debs) + tuple(
        _wheel_component(w) for w in wheels)
    return components, sum(p.stat().st_size for p in (*debs, *wheels))


def _download_debs(source: DebianSource, apt_dir: Path, say: Progress) -> list[Path]:
    """The toolkit's .debs from the machine's Debian mirror, each checked to be the pinned upstream release."""
    debs = download_debs(source.suite, source.component, source.packages, apt_dir, say)
    for deb in debs:
        package, version = deb.name.split("_", 1)[0], _deb_version(deb)
        if not (version == source.upstream or version.startswith(source.upstream + "~")):
            raise ToolError(f"download debs: Debian {source.suite} now carries {package} {version}, not "
                            f"{source.upstream}. Fix: update deb_upstream and the wheel pins for this "
                            "toolkit in shipyard/resources/cuda_toolkits.toml")
    return debs


def _deb_version(deb: Path) -> str:
    return command.run(["dpkg-deb", "-f", deb, "Version"], timeout=60, what="dpkg-deb -f").stdout.strip()


def _deb_component(deb: Path, source: DebianSource) -> str:
    package = deb.name.split("_", 1)[0]
    return f"deb:{package}={_deb_version(deb)} ({source.suite}/{source.component})"


def _download_wheels(requirements: Sequence[str], dest: Path, say: Progress) -> list[Path]:
    """`pip download` exact pins as binary wheels only (no dependencies, nothing installed)."""
    dest.mkdir(parents=True, exist_ok=True)
    if not requirements:
        return []
    say(f"download wheels: {' '.join(requirements)}")
    command.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                 "--disable-pip-version-check", "--no-input", "--progress-bar", "off",
                 "--dest", dest, *requirements],
                timeout=1800, what="pip download (the CUDA wheels from PyPI)")
    wheels = sorted(dest.glob("*.whl"))
    if len(wheels) != len(requirements):
        raise ToolError(f"download wheels: asked pip for {len(requirements)} wheels, got "
                        f"{', '.join(w.name for w in wheels) or 'none'}")
    return wheels


def _wheel_component(wheel: Path) -> str:
    name, version = wheel.name.split("-")[:2]
    return f"wheel:{name.replace('_', '-')}=={version}"


def unpack_wheel(wheel: Path, dest: Path) -> None:
    """Extract a wheel with its files' Unix modes (zipfile drops them; wheels record them in
    external_attr, and the tools inside need their x bit)."""
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            target = Path(archive.extract(info, dest))
            mode = (info.external_attr >> 16) & 0o777
            if mode and not info.is_dir():
                target.chmod(mode)


def _move_into(source: Path, target: Path) -> None:
    """Move a file or folder to `target`, merging folders; two packages must not bring one file."""
    if not source.exists() and not source.is_symlink():
        raise ToolError(f"assemble: {source.name} is missing from the unpacked packages ({source}); their "
                        "layout changed, so update the layouts in shipyard/toolchains/cuda_toolkit.py")
    if source.is_dir() and not source.is_symlink() and target.is_dir():
        for child in source.iterdir():
            _move_into(child, target / child.name)
        return
    if target.exists() or target.is_symlink():
        raise ToolError(f"assemble: two packages bring {target.name} ({source} and {target})")
    target.parent.mkdir(parents=True, exist_ok=True)
    os.rename(source, target)


# --- a toolkit already on the host (CUDA_HOME, /usr/local/cuda-X.Y) --------------------------------

def _local_home(recipe: ToolkitRecipe) -> Path:
    """The installed CUDA `recipe.version` to use: CUDA_HOME if it holds that version, else `home`."""
    tried = []
    candidates = [Path(os.environ["CUDA_HOME"])] if os.environ.get("CUDA_HOME") else []
    if recipe.home is not None:
        candidates.append(recipe.home)
    for home in candidates:
        nvcc = home / "bin" / "nvcc"
        if not nvcc.is_file():
            tried.append(f"{home} has no bin/nvcc")
            continue
        try:
            result = command.run([nvcc, "--version"], check=False, timeout=60, what="nvcc --version")
        except ToolError:
            tried.append(f"{home}/bin/nvcc does not run")
            continue
        release = re.search(r"release (\d+\.\d+)", result.stdout)
        if result.returncode == 0 and release and release.group(1) == recipe.version:
            return home
        tried.append(f"{home} holds CUDA {release.group(1) if release else '(nvcc does not run)'}")
    where = f" ({'; '.join(tried)})" if tried else ""
    if recipe.unobtainable:
        raise ToolchainMissing(
            f"no CUDA {recipe.version} toolkit here{where}, and it cannot be obtained on this machine: "
            f"{recipe.unobtainable}. Fix: build the CUDA {recipe.version} cells where the toolkit is "
            f"preinstalled (a CI runner or a builder image with /usr/local/cuda-{recipe.version}) "
            f"and set CUDA_HOME to it there")
    raise ToolchainMissing(f"no CUDA {recipe.version} toolkit here{where}. Fix: install CUDA "
                           f"{recipe.version} at {recipe.home or f'/usr/local/cuda-{recipe.version}'} "
                           "or set CUDA_HOME to it")


def _assemble_from_home(recipe: ToolkitRecipe, home: Path, tree: Path, work: Path,
                        say: Progress) -> tuple[tuple[str, ...], int]:
    """Lay out `tree` as links into `home`, adding a cuobjdump of the same generation when it has none."""
    say(f"assemble: CUDA {recipe.version} from {home}")
    tree.mkdir(parents=True)
    (tree / "bin").mkdir()
    # Links, not copies: the host's toolkit stays the one source of nvcc and its headers, and the
    # entry works as CUDA_HOME whether nvcc resolves its profile through the link or its target.
    for item in sorted(home.iterdir()):
        if item.name not in ("bin", "dist-info"):
            (tree / item.name).symlink_to(item)
    for tool in sorted((home / "bin").iterdir()):
        (tree / "bin" / tool.name).symlink_to(tool)
    if not (tree / "lib64").exists() and (home / "lib").is_dir():
        (tree / "lib64").symlink_to(home / "lib")
    components = [f"home:{home}"]
    downloaded = 0
    if not (tree / "bin" / "cuobjdump").exists():
        if not recipe.cuobjdump_wheel or not recipe.cuobjdump_in_wheel:
            raise ToolchainMissing(
                f"{home} has no bin/cuobjdump and shipyard knows no wheel that carries one for CUDA "
                f"{recipe.version}. Fix: install the toolkit's cuobjdump in {home}/bin")
        wheels = _download_wheels([recipe.cuobjdump_wheel], work / "wheels", say)
        say(f"unpack: {wheels[0].name}")
        unpack_wheel(wheels[0], work / "wheel-root")
        cuobjdump = tree / "bin" / "cuobjdump"
        _move_into(work / "wheel-root" / recipe.cuobjdump_in_wheel, cuobjdump)
        cuobjdump.chmod(cuobjdump.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        components.append(_wheel_component(wheels[0]))
        downloaded = wheels[0].stat().st_size
    return tuple(components), downloaded


# --- the proof ----------------------------------------------------------------------------------

def _prove(toolkit: InstalledCudaToolkit, archs: tuple[str, ...], work: Path, say: Progress) -> None:
    """Compile, link and run a kernel library for `archs`; ToolError unless it holds exactly their SASS."""
    expected = {sm_name(a) for a in archs}
    say(f"verify {' '.join(sorted(expected, key=lambda s: int(s[3:].rstrip('abf'))))} "
        f"(nvcc -ccbin {toolkit.host_cxx.name}, g++ link, cuobjdump)")
    work.mkdir(parents=True, exist_ok=True)
    (work / "proof.cu").write_text(_PROOF_CU)
    (work / "proof_main.cpp").write_text(_PROOF_MAIN)
    threads = str(max(1, min(len(archs), os.cpu_count() or 1)))
    steps: tuple[tuple[str, list[str | os.PathLike[str]]], ...] = (
        ("compile", [toolkit.nvcc, "-ccbin", toolkit.host_cxx, "-Xcompiler", "-fPIC", "--threads", threads,
                     *gencode_flags(archs), "-c", "proof.cu", "-o", "proof.o"]),
        # g++, not `nvcc -shared`: CUDA 11's wheels carry no libcudadevrt.a for nvcc's device link.
        ("link library", [toolkit.host_cxx, "-shared", "-o", "libshipyard_proof.so", "proof.o",
                          f"-L{toolkit.lib_dir}", "-lcudart", f"-Wl,-rpath,{toolkit.lib_dir}"]),
        ("link executable", [toolkit.host_cxx, "proof_main.cpp", "-o", "shipyard_proof",
                             f"-I{toolkit.include_dir}", f"-L{work}", "-lshipyard_proof",
                             f"-L{toolkit.lib_dir}", "-lcudart", f"-Wl,-rpath,{work}:{toolkit.lib_dir}"]),
        ("run executable", [work / "shipyard_proof"]),
    )
    for step, args in steps:
        try:
            command.run(args, cwd=work, timeout=1800, what=f"verify CUDA {toolkit.version}: {step}")
        except ToolError as exc:
            raise ToolError(f"{exc.args[0]}. CUDA {toolkit.version} does not work for {';'.join(archs)}. "
                            f"Fix: see the output below (nvcc refusing the host compiler: install "
                            f"{toolkit.host_cxx.name}, the newest gcc it accepts; a missing header or "
                            "library: the wheel pins in shipyard/resources/cuda_toolkits.toml)",
                            cmd=exc.cmd, returncode=exc.returncode, output=exc.output) from exc
    found = cuda_sass_archs(work / "libshipyard_proof.so", toolkit.cuobjdump)
    if found != expected:
        raise ToolError(f"verify CUDA {toolkit.version}: cuobjdump finds SASS for {sorted(found)} in the "
                        f"proof library, expected exactly {sorted(expected)}")
