"""Assembling a CUDA toolkit tree in a staging folder, and proving it.

The tree is laid out like NVIDIA's own (bin/nvcc with its nvcc.profile, bin/cuobjdump, include/,
lib64/, nvvm/), from Debian's non-free `nvidia-cuda-toolkit` .deb for the compiler and NVIDIA's
PyPI wheels for headers and libraries, from NVIDIA's PyPI wheels alone (CUDA 13), or from a
toolkit already on the host (CUDA_HOME, /usr/local/cuda-X.Y) plus a cuobjdump of its generation.
The proof: nvcc compiles a kernel for every requested arch, g++ links it, and cuobjdump finds
exactly those SASS archs."""

from __future__ import annotations

import os
import platform
import shutil
import stat
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

from shipyard.errors import ToolchainMissing, ToolError
from shipyard.host.apt_sources import download_debs
from shipyard.host.toolchains.cuda_recipes import (
    DebianSource,
    InstalledCudaToolkit,
    ToolkitRecipe,
)
from shipyard.host.toolchains.cuobjdump import cuda_sass_archs
from shipyard.plumbing import command
from shipyard.plumbing.progress import Progress
from shipyard.release.cuda_archs import gencode_flags, sm_name

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
{system_includes}LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib64/stubs" "-L$(TOP)/lib64"
CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
"""
# CUDA 13 keeps CCCL (cub/, thrust/, cuda/) in include/cccl, which its nvcc adds as a system include.
_CCCL_SYSTEM_INCLUDES = 'SYSTEM_INCLUDES +=  "-isystem" "$(TOP)/include/cccl" $(_SPACE_)\n'


def _nvcc_profile(tree: Path) -> str:
    """Our nvcc.profile for `tree`: CCCL's folder as a system include where the toolkit keeps it apart."""
    return _NVCC_PROFILE.format(system_includes=_CCCL_SYSTEM_INCLUDES if (tree / "include" / "cccl").is_dir() else "")


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


# --- assembling from Debian + PyPI --------------------------------------------------------------

def assemble_from_debian(recipe: ToolkitRecipe, host_cxx: Path, tree: Path, work: Path,
                          say: Progress) -> tuple[tuple[str, ...], int]:
    """Fetch and unpack the .debs and wheels, and lay out `tree`; returns (components, bytes fetched)."""
    assert recipe.debian is not None
    _refuse_other_platforms(recipe, "Debian's amd64 packages and NVIDIA's x86_64 wheels")
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
    _write_nvcc_profile(tree, recipe, host_cxx)

    components = tuple(_deb_component(deb, recipe.debian) for deb in debs) + tuple(
        _wheel_component(w) for w in wheels)
    return components, sum(p.stat().st_size for p in (*debs, *wheels))


def _refuse_other_platforms(recipe: ToolkitRecipe, packages: str) -> None:
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        raise ToolchainMissing(
            f"CUDA {recipe.version} is assembled from {packages}, so only on x86_64 Linux "
            f"(this is {platform.system()} {platform.machine()}). Fix: build these cells on an x86_64 Linux host")


def _write_nvcc_profile(tree: Path, recipe: ToolkitRecipe, host_cxx: Path) -> None:
    """Our nvcc.profile (in place of a package's), and host-compiler/ with the gcc nvcc accepts."""
    profile = tree / "bin" / "nvcc.profile"
    profile.unlink(missing_ok=True)  # NVIDIA's wheel brings one that points at targets/x86_64-linux
    profile.write_text(_nvcc_profile(tree))
    host_dir = tree / "host-compiler"
    host_dir.mkdir()
    (host_dir / "g++").symlink_to(host_cxx)
    host_cc = shutil.which(recipe.host_cxx.replace("g++", "gcc"))
    if host_cc:
        (host_dir / "gcc").symlink_to(host_cc)


# --- assembling from PyPI alone -----------------------------------------------------------------

def assemble_from_pypi(recipe: ToolkitRecipe, host_cxx: Path, tree: Path, work: Path,
                       say: Progress) -> tuple[tuple[str, ...], int]:
    """Fetch and unpack NVIDIA's wheels, and make their common folder (`wheel_prefix`) the toolkit
    `tree`; returns (components, bytes fetched)."""
    assert recipe.wheel_prefix is not None, recipe.version
    _refuse_other_platforms(recipe, "NVIDIA's x86_64 wheels")
    wheels = _download_wheels(recipe.wheels, work / "wheels", say)
    say(f"unpack: {len(wheels)} wheels")
    wheel_root = work / "wheel-root"
    for wheel in wheels:
        # One folder per wheel, merged below: two wheels bringing the same file is an error, not an overwrite.
        unpack_wheel(wheel, wheel_root / wheel.name)
    say(f"assemble: CUDA {recipe.version} (every part from NVIDIA's PyPI wheels)")
    tree.mkdir(parents=True)
    for wheel in wheels:
        unpacked = wheel_root / wheel.name
        for leftover in unpacked.rglob("__init__.py"):
            leftover.unlink()
        shutil.rmtree(unpacked / recipe.wheel_prefix / ".metadata", ignore_errors=True)  # NVIDIA's build scans
        _move_into(unpacked / recipe.wheel_prefix, tree)
    lib = tree / "lib"
    if not sorted(lib.glob("libcudart.so.*")):
        raise ToolError(f"assemble: the wheels hold no {recipe.wheel_prefix}/lib/libcudart.so.*; "
                        "update the wheel pins in shipyard/resources/cuda_toolkits.toml")
    # The unversioned names are what `-lcudart` and CMake's find_library look for, and lib64/ is
    # where they look first (NVIDIA's own 13.0 has lib64 -> lib too).
    for library in sorted(lib.glob("lib*.so.*")):
        unversioned = lib / (library.name.split(".so.", 1)[0] + ".so")
        if not unversioned.exists():
            unversioned.symlink_to(library.name)
    (tree / "lib64").symlink_to("lib")
    _write_nvcc_profile(tree, recipe, host_cxx)
    return tuple(_wheel_component(w) for w in wheels), sum(w.stat().st_size for w in wheels)


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
                        "layout changed, so update the layouts in shipyard/toolchains/cuda_assembly.py")
    if source.is_dir() and not source.is_symlink() and target.is_dir():
        for child in source.iterdir():
            _move_into(child, target / child.name)
        return
    if target.exists() or target.is_symlink():
        raise ToolError(f"assemble: two packages bring {target.name} ({source} and {target})")
    target.parent.mkdir(parents=True, exist_ok=True)
    os.rename(source, target)


# --- a toolkit already on the host (CUDA_HOME, /usr/local/cuda-X.Y) --------------------------------

def assemble_from_home(recipe: ToolkitRecipe, home: Path, tree: Path, work: Path,
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

def prove_toolkit(toolkit: InstalledCudaToolkit, archs: tuple[str, ...], work: Path, say: Progress) -> None:
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
