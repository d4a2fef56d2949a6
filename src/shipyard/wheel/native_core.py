"""Build a component's Python-independent native core once per platform and variant."""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
from pathlib import Path

from shipyard.errors import ToolchainMissing
from shipyard.host.source_tree import git_info
from shipyard.host.toolchains.cuda_recipes import nvcc_cxx_standard
from shipyard.host.toolchains.discover import discover
from shipyard.host.toolchains.resolve import Missing, Toolchain, resolve
from shipyard.plumbing import command
from shipyard.release.matrix import Cell
from shipyard.release.spec import Component, Spec, Variant


def shipyard_cmake_defines(variant: Variant, toolchain: Toolchain) -> dict[str, str]:
    """The CMake definitions every native build receives (library/README.md)."""
    defines = {"SHIPYARD_VARIANT": variant.tag, "SHIPYARD_CUDA": "ON" if variant.is_cuda else "OFF"}
    if toolchain.compiler and toolchain.compiler.sysroot:
        # find_package looks in the sysroot first (its libpng, not the host's); the compiler
        # wrappers already pass --sysroot, so this changes where CMake searches, not how it compiles.
        defines["CMAKE_SYSROOT"] = str(toolchain.compiler.sysroot.tree)
    if toolchain.compiler and toolchain.compiler.zig:
        # zig's archiver beside its compiler: a bare runner needs no binutils for a static library.
        defines |= {"CMAKE_AR": str(toolchain.compiler.zig.ar), "CMAKE_RANLIB": str(toolchain.compiler.zig.ranlib)}
    if variant.is_cuda and toolchain.cuda and toolchain.cuda_host_compiler:
        defines |= {
            "SHIPYARD_NVCC": str(toolchain.cuda.nvcc),
            "SHIPYARD_CUDA_HOME": str(toolchain.cuda.root),
            "SHIPYARD_CUDA_HOST_CXX": str(toolchain.cuda_host_compiler.cxx),
            "SHIPYARD_CUDA_ARCHS": ";".join(variant.archs),
            # nvcc 10.2 compiles C++14 at most: the project's .cu files get what the toolkit takes.
            "SHIPYARD_CUDA_CXX_STANDARD": str(nvcc_cxx_standard(toolchain.cuda.version)),
        }
    return defines


# CMake pads a build-tree RPATH with placeholder bytes as long as the absolute build path,
# then rewrites it at install: the padding would make binaries depend on where they built.
REPRODUCIBLE_CMAKE_DEFINES = {"CMAKE_BUILD_WITH_INSTALL_RPATH": "ON"}


def reproducible_env(source_root: Path, build_dir: Path, epoch: int, toolchain: Toolchain) -> dict[str, str]:
    """Environment for compilers: no absolute paths in binaries, fixed timestamps."""
    prefix_maps = f"-ffile-prefix-map={source_root}=. -ffile-prefix-map={build_dir}=build"
    if toolchain.compiler is None and sys.platform == "win32":
        prefix_maps = ""  # the runner's MSVC (vcvars64) refuses gcc's and clang's -ffile-prefix-map
    env = {
        "SOURCE_DATE_EPOCH": str(epoch),
        "CFLAGS": prefix_maps,
        "CXXFLAGS": prefix_maps,
        "LC_ALL": "C",
        "TZ": "UTC",
    }
    if toolchain.compiler:
        env |= {"CC": str(toolchain.compiler.cc), "CXX": str(toolchain.compiler.cxx)}
    return env


def python_header_flags(python: Path, toolchain: Toolchain, into: Path, *, copy: bool = True) -> str:
    """Compiler flags that let a sysroot compiler (or zig's) use `python`'s headers; "" when none are needed.

    Debian's python3.X-dev splits pyconfig.h per architecture: /usr/include/python3.X/pyconfig.h
    only includes <x86_64-linux-gnu/python3.X/pyconfig.h>, which lives under the host's
    /usr/include. A sysroot compiler searches the sysroot's /usr/include instead, and zig's clang its
    own glibc's headers (the host's glibc headers must not leak in), so the include fails. The one
    real pyconfig.h is copied into `into`/<multiarch>/python3.X/ (unless `copy` is false: the flags
    only) and that folder, holding nothing else, goes on the search path.
    """
    if toolchain.compiler is None or toolchain.compiler.searches_host_headers:
        return ""
    include, multiarch, version = _header_layout(python)
    real = Path("/usr/include", multiarch, f"python{version}", "pyconfig.h")
    wrapper = Path(include, "pyconfig.h") if include else None
    if not multiarch or wrapper is None or f"<{multiarch}/python{version}/pyconfig.h>" not in _read(wrapper):
        return ""
    if not real.is_file():
        raise ToolchainMissing(f"{include}/pyconfig.h includes {real}, which is missing; install the "
                               f"Python's development headers (apt-get install python{version}-dev)")
    if copy:
        target = into / multiarch / f"python{version}" / "pyconfig.h"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(real, target)
    return f"-isystem {into}"


@functools.lru_cache(maxsize=64)
def _header_layout(python: Path) -> tuple[str, str, str]:
    """`python`'s INCLUDEPY, MULTIARCH and LDVERSION, asked once per process (a build venv's
    Python, named by its interpreter's version and binary hash, keeps its headers)."""
    query = ("import json, sysconfig; print(json.dumps([sysconfig.get_config_var(v) or '' "
             "for v in ('INCLUDEPY', 'MULTIARCH', 'LDVERSION')]))")
    include, multiarch, version = json.loads(
        command.run([python, "-c", query], timeout=60, what=f"read {python}'s header layout").stdout)
    return include, multiarch, version


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def build_native_core(component: Component, variant: Variant, toolchain: Toolchain, *,
                      source_root: Path, build_dir: Path, prefix: Path, epoch: int, jobs: int) -> Path:
    """Configure, build and install the core into `prefix`; return the prefix."""
    assert component.native_core is not None
    source = component.source_dir(source_root) / component.native_core.source
    if build_dir.exists():
        shutil.rmtree(build_dir)
    if prefix.exists():
        shutil.rmtree(prefix)
    defines = shipyard_cmake_defines(variant, toolchain) | REPRODUCIBLE_CMAKE_DEFINES
    env = reproducible_env(source_root, build_dir, epoch, toolchain)
    configure = ["cmake", "-S", source, "-B", build_dir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                 f"-DCMAKE_INSTALL_PREFIX={prefix}", *[f"-D{k}={v}" for k, v in defines.items()]]
    what = f"{component.name} core ({variant.tag})"
    command.run(configure, extra_env=env, timeout=1800, what=f"configure {what}")
    command.run(["cmake", "--build", build_dir, "--parallel", str(jobs)], extra_env=env, timeout=3600,
                what=f"compile {what}")
    command.run(["cmake", "--install", build_dir], extra_env=env, timeout=600, what=f"install {what}")
    return prefix


# FindThreads' checks (try-compiles of pthread_create against libc, -lpthreads, -lpthread): they
# ask the toolchain, never the Python, and cost every Python's configure about a third of its time.
THREADS_PROBES = ("CMAKE_HAVE_LIBC_PTHREAD", "CMAKE_HAVE_PTHREADS_CREATE", "CMAKE_HAVE_PTHREAD_CREATE",
                  "CMAKE_HAVE_PTHREAD_H", "THREADS_HAVE_PTHREAD_ARG")


def toolchain_probes(build_dir: Path) -> dict[str, str]:
    """The FindThreads results of the core's configure (its CMakeCache.txt), to hand to every
    Python's configure as cache entries: CMake skips a check whose result is already defined.
    Empty when the core did not look for threads."""
    cache = build_dir / "CMakeCache.txt"
    found: dict[str, str] = {}
    for line in _read(cache).splitlines():
        name, _, rest = line.partition(":")
        if name in THREADS_PROBES and rest.startswith("INTERNAL="):
            found[name] = rest.removeprefix("INTERNAL=")
    return found


# What CMake works out about the platform and the compiler before a project's first target, and
# keeps in CMakeFiles/<its version>/: the system (uname) and, per language, the compiler's identity
# and ABI (a compile of CMakeCXXCompilerId.cpp and a try-compile). A build tree that has these
# files (a re-configure) skips that work, and so does each Python's configure handed the core's:
# the same cmake and the same compiler made them (a Python's own configure writes the same bytes).
# C and C++ only: a CUDA compiler's file also records the core's host compiler and arch flags.
PLATFORM_FILES = ("CMakeSystem.cmake", "CMakeCCompiler.cmake", "CMakeCXXCompiler.cmake")
# The tools CMake looked for beside the compiler: a re-configure finds them in its cache, and
# without them it would not look again (no CMAKE_STRIP: an install that does not strip).
PLATFORM_CACHE_ENTRIES = ("CMAKE_ADDR2LINE", "CMAKE_AR", "CMAKE_DLLTOOL", "CMAKE_EXECUTABLE_FORMAT", "CMAKE_LINKER",
                          "CMAKE_MT", "CMAKE_NM", "CMAKE_OBJCOPY", "CMAKE_OBJDUMP", "CMAKE_RANLIB", "CMAKE_READELF",
                          "CMAKE_STRIP", "CMAKE_TAPI", "CMAKE_UNAME",
                          *(f"CMAKE_{lang}_COMPILER{tool}" for lang in ("C", "CXX") for tool in ("", "_AR", "_RANLIB")))


def cmake_platform(build_dir: Path) -> dict[str, dict[str, str]]:
    """The platform files of the core's configured build tree ({"files": {"<version>/<name>": text},
    "entries": {cache name: value}}) for `seed_cmake_platform`; empty when it has none."""
    files = {f"{p.parent.name}/{p.name}": p.read_text() for name in PLATFORM_FILES
             for p in sorted((build_dir / "CMakeFiles").glob(f"*/{name}"))}
    if not any(name.endswith("/CMakeSystem.cmake") for name in files):
        return {}
    entries: dict[str, str] = {}
    for line in _read(build_dir / "CMakeCache.txt").splitlines():
        name, _, rest = line.partition(":")
        if name in PLATFORM_CACHE_ENTRIES and "=" in rest:
            entries[name] = rest.partition("=")[2]
    return {"files": files, "entries": entries}


def seed_cmake_platform(build_dir: Path, platform: dict[str, dict[str, str]]) -> dict[str, str]:
    """Write the core's platform files into an empty build tree; return the cache entries its
    configure needs with them (CMAKE_PLATFORM_INFO_INITIALIZED: without it CMake deletes files it
    did not write itself). A cmake of another version looks in another folder and works them out."""
    if not platform:
        return {}
    for name, text in platform["files"].items():
        target = build_dir / "CMakeFiles" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return {**platform["entries"], "CMAKE_PLATFORM_INFO_INITIALIZED": "1"}


def build_core_once(spec: Spec, cell: Cell, *, prefix: Path, state: Path) -> Path:
    """Build `cell`'s component core for its variant on this host into `prefix`, for every Python's
    build to link (a cibuildwheel job's `before-all`: ci/cibuildwheel_config.py). On a Windows or
    macOS runner without a g++-N, a CPU core builds with the compiler CMake finds there (MSVC from
    vcvars64, Xcode's clang); anything else needs the toolchain `shipyard build` would use."""
    release = spec.release
    component, variant = release.components[cell.component], release.variants[cell.variant]
    toolchain = resolve(cell, release, discover())
    if isinstance(toolchain, Missing):
        if variant.is_cuda or release.platforms[cell.platform].os == "linux":
            raise ToolchainMissing(f"{cell.id}: {toolchain}")
        toolchain = Toolchain(None, None, None, None)
    work = state / "build" / f"{component.name}-{variant.tag}-core"
    return build_native_core(component, variant, toolchain, source_root=spec.root, build_dir=work, prefix=prefix,
                             epoch=git_info(spec.root).commit_time, jobs=os.cpu_count() or 1)
