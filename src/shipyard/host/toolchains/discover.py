"""Find what this host can build with: Pythons, compilers, CUDA toolkits, cross tools, Docker."""

from __future__ import annotations

import glob
import hashlib
import os
import platform as host_platform
import re
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from shipyard.errors import ToolError
from shipyard.host.toolchains.cuda_recipes import toolkit_program
from shipyard.host.toolchains.glibc import glibc_tuple, host_glibc
from shipyard.host.toolchains.sysroot import Sysroot, find_installed_sysroots
from shipyard.host.toolchains.zig import ZigCompiler, find_installed_zig_compilers
from shipyard.plumbing import command
from shipyard.plumbing.cache_folder import cache_root

if TYPE_CHECKING:
    from shipyard.release.spec import Release

__all__ = ["cache_root"]  # re-exported: the one definition is plumbing/cache_folder.py's


def toolchain_cache() -> Path:
    return cache_root() / "toolchains"


def pyenv_root() -> Path:
    """Where pyenv keeps its Pythons: $PYENV_ROOT, else ~/.pyenv."""
    return Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")


@dataclass(frozen=True)
class Interpreter:
    version: str  # "3.11"
    full_version: str  # "3.11.7"
    path: Path
    binary_sha256: str = ""  # the executable's bytes, and libpython's for a shared build

    @property
    def identity(self) -> str:
        """What cache keys use: a patch upgrade or a rebuilt binary is another interpreter."""
        return f"{self.full_version}/{self.binary_sha256}"


@dataclass(frozen=True)
class Compiler:
    """A C/C++ compiler pair: gcc-N / g++-N, the host's own or a sysroot's (toolchains.sysroot), or
    zig's clang targeting one glibc (toolchains.zig; `major` is then clang's)."""

    major: int
    cc: Path
    cxx: Path
    version: str
    glibc: str = ""  # the glibc its objects link against: the host's, its sysroot's, zig's target
    sysroot: Sysroot | None = None
    zig: ZigCompiler | None = None

    @property
    def identity(self) -> str:
        """What cache keys use: the version, and which sysroot's libraries (or zig target) it links."""
        if self.zig is not None:
            return f"zig-{self.zig.zig_version}@glibc-{self.zig.glibc}:{self.zig.identity}"
        return self.version if self.sysroot is None else f"{self.version}@{self.sysroot.name}:{self.sysroot.identity}"

    @property
    def origin(self) -> str:
        """Where it links from, in words: 'host', 'bullseye sysroot' or 'zig 0.17.1 for glibc 2.17'."""
        if self.zig is not None:
            return self.zig.name
        return "host" if self.sysroot is None else f"{self.sysroot.name} sysroot"

    @property
    def searches_host_headers(self) -> bool:
        """Whether it finds the host's /usr/include (a sysroot's gcc and zig's clang do not)."""
        return self.sysroot is None and self.zig is None


@dataclass(frozen=True)
class CudaToolkit:
    """An nvcc with its headers, runtime libraries and a cuobjdump of the same generation."""

    version: str  # "11.8"
    root: Path
    nvcc: Path
    cuobjdump: Path | None
    origin: str  # where it was found: CUDA_HOME, /usr/local, shipyard cache
    identity: str


@dataclass(frozen=True)
class Inventory:
    """Everything discovered on this host, found once per run."""

    host_platform: str
    interpreters: tuple[Interpreter, ...]
    compilers: tuple[Compiler, ...]  # the host's own
    cuda_toolkits: tuple[CudaToolkit, ...]
    cross_compilers: dict[str, Path]  # triple -> g++
    emulators: dict[str, Path]  # qemu-aarch64 -> path
    wine: Path | None
    docker_engine: str | None  # server version, when an engine answers
    android_ndk: Path | None
    sysroot_compilers: tuple[Compiler, ...] = ()  # assembled sysroots' (toolchains.sysroot)
    zig_compilers: tuple[Compiler, ...] = ()  # zig's, one per glibc target installed (toolchains.zig)

    def platforms_built_here(self, release: Release) -> tuple[str, ...]:
        """The platforms of `release` whose wheels this host builds, its own first: the one named as
        the host is (linux-x86_64), and every other of the same OS and architecture, which differs
        only in its glibc promise (linux-x86_64-manylinux2014), kept by that promise's compiler."""
        same = [name for name, p in release.platforms.items()
                if name == self.host_platform or f"{p.os}-{p.arch.lower()}" == self.host_platform]
        return tuple(sorted(same, key=lambda name: name != self.host_platform))

    def interpreter(self, version: str) -> Interpreter | None:
        return next((i for i in self.interpreters if i.version == version), None)

    def compiler_at_most(self, major: int | None, *, glibc: str | None = None) -> Compiler | None:
        """The newest gcc not newer than `major` (any, when None). With `glibc`, only compilers
        whose objects need no newer glibc (a sysroot's, or the host's when its glibc is old
        enough); on a tie the host's own."""
        candidates = self.compilers if glibc is None else tuple(
            c for c in (*self.compilers, *self.sysroot_compilers)
            if c.glibc and glibc_tuple(c.glibc) <= glibc_tuple(glibc))
        fitting = [c for c in candidates if major is None or c.major <= major]
        return max(fitting, key=lambda c: (c.major, c.sysroot is None)) if fitting else None

    def zig_compiler(self, glibc: str) -> Compiler | None:
        """zig's clang for exactly `glibc`, when `shipyard toolchain install zig-<glibc>` wrote it. Never
        among compiler_at_most's: which glibc promise zig serves is build_routes' choice alone."""
        return next((c for c in self.zig_compilers if c.glibc == glibc), None)

    def cuda_toolkit(self, version: str) -> CudaToolkit | None:
        return next((t for t in self.cuda_toolkits if t.version == version), None)


def this_platform() -> str:
    system = {"Linux": "linux", "Windows": "windows", "Darwin": "macos"}.get(host_platform.system(), "?")
    machine = host_platform.machine().lower()
    arch = {"amd64": "amd64" if system == "windows" else "x86_64", "x86_64": "x86_64",
            "aarch64": "arm64" if system == "macos" else "aarch64", "arm64": "arm64"}.get(machine, machine)
    return f"{system}-{arch}"


# Prints the full version and, for a shared build, the libpython the executable loads.
_PROBE = ("import sys, sysconfig, os; v = sysconfig.get_config_var; "
          "lib = os.path.join(v('LIBDIR') or '', v('LDLIBRARY') or '') if v('Py_ENABLE_SHARED') else ''; "
          "print('%d.%d.%d' % sys.version_info[:3]); print(lib)")


def probe_interpreter(exe: Path) -> Interpreter | None:
    """The interpreter at `exe`, asked for its own full version, its binary hashed; None if it
    does not run."""
    try:
        full, lib = (command.run([exe, "-c", _PROBE], timeout=60).stdout.splitlines() + ["", ""])[:2]
    except ToolError:
        return None
    if not re.fullmatch(r"3\.\d+\.\d+", full):
        return None
    digest = hashlib.sha256()
    for binary in (Path(exe).resolve(), Path(lib) if lib else None):
        if binary is not None and binary.is_file():
            digest.update(binary.name.encode() + b"\0" + hashlib.sha256(binary.read_bytes()).digest())
    return Interpreter(full.rsplit(".", 1)[0], full, Path(exe), digest.hexdigest()[:16])


def find_interpreters() -> tuple[Interpreter, ...]:
    """CPython 3.x from the pyenv versions folder and from PATH, newest patch per minor. Each
    reports its own full version (a python3.X on PATH too) and carries its binary's hash."""
    found: dict[str, Interpreter] = {}
    pyenv = [Path(p) for p in sorted(glob.glob(str(pyenv_root() / "versions" / "*" / "bin" / "python3")))
             if re.fullmatch(r"3\.\d+\.\d+", Path(p).parent.parent.name)]
    with ThreadPoolExecutor(max_workers=4) as pool:  # start-up and hashing overlap
        for interpreter in pool.map(probe_interpreter, pyenv):
            if interpreter is not None:
                _keep_newest(found, interpreter)
    for minor in range(8, 20):
        exe = shutil.which(f"python3.{minor}")
        if exe and f"3.{minor}" not in found and ".pyenv/shims" not in exe:
            if (interpreter := probe_interpreter(Path(exe))) is not None and interpreter.version == f"3.{minor}":
                found[interpreter.version] = interpreter
    if sys.platform == "win32":
        _launcher_interpreters(found)
    return tuple(sorted(found.values(), key=lambda i: tuple(map(int, i.version.split(".")))))


def _launcher_interpreters(found: dict[str, Interpreter]) -> None:
    """Windows: python.org's installers and actions/setup-python leave a python.exe per version in a
    folder of its own, registered with the `py` launcher (PEP 514), and no python3.X on PATH; the
    launcher names each one's executable."""
    launcher = shutil.which("py")
    if launcher is None:
        return
    for minor in range(8, 20):
        if f"3.{minor}" in found:
            continue
        try:
            exe = command.run([launcher, f"-3.{minor}", "-c", "import sys; print(sys.executable)"],
                              timeout=60).stdout.strip()
        except ToolError:
            continue  # the launcher knows no such Python
        if exe and (interpreter := probe_interpreter(Path(exe))) is not None and interpreter.version == f"3.{minor}":
            found[interpreter.version] = interpreter


def _keep_newest(found: dict[str, Interpreter], candidate: Interpreter) -> None:
    current = found.get(candidate.version)
    key = lambda i: tuple(int(x) for x in i.full_version.split("."))  # noqa: E731
    if current is None or key(candidate) > key(current):
        found[candidate.version] = candidate


def find_compilers() -> tuple[Compiler, ...]:
    found = []
    glibc = host_glibc()
    for major in range(4, 20):
        cc, cxx = shutil.which(f"gcc-{major}"), shutil.which(f"g++-{major}")
        if cc and cxx:
            found.append(Compiler(major, Path(cc), Path(cxx), _gcc_version(Path(cxx)), glibc))
    return tuple(found)


def find_sysroot_compilers() -> tuple[Compiler, ...]:
    """The compilers of the sysroots assembled in the toolchain cache (`shipyard toolchain install bullseye`)."""
    return tuple(Compiler(s.gcc_major, s.cc, s.cxx, s.gcc_version, s.glibc, s)
                 for s in find_installed_sysroots(toolchain_cache()))


def find_zig_compilers() -> tuple[Compiler, ...]:
    """zig's clang for each glibc target installed in the toolchain cache (`shipyard toolchain install zig-2.17`)."""
    return tuple(Compiler(int(z.clang_version.split(".")[0]) if z.clang_version[:1].isdigit() else 0,
                          z.cc, z.cxx, z.zig_version, z.glibc, zig=z)
                 for z in find_installed_zig_compilers(toolchain_cache()))


def _gcc_version(cxx: Path) -> str:
    try:
        return command.run([cxx, "-dumpfullversion"], timeout=30).stdout.strip()
    except ToolError:
        return "?"


def _nvcc_version(nvcc: Path) -> tuple[str, str] | None:
    try:
        out = command.run([nvcc, "--version"], timeout=60).stdout
    except ToolError:
        return None
    match = re.search(r"release (\d+\.\d+)", out)
    return (match.group(1), out.strip().splitlines()[-1]) if match else None


def find_cuda_toolkits() -> tuple[CudaToolkit, ...]:
    """Toolkits from shipyard's cache first (they carry a matching cuobjdump), then CUDA_HOME
    and /usr/local/cuda-X.Y."""
    from shipyard.host.toolchains.cuda_toolkit import find_installed_cuda_toolkits

    found: dict[str, CudaToolkit] = {}
    for installed in find_installed_cuda_toolkits(toolchain_cache()):
        found.setdefault(installed.version, CudaToolkit(
            installed.version, installed.root, installed.nvcc, installed.cuobjdump,
            "shipyard cache", installed.identity))
    roots = []
    if os.environ.get("CUDA_HOME"):
        roots.append((Path(os.environ["CUDA_HOME"]), "CUDA_HOME"))
    roots += [(Path(p), "/usr/local") for p in sorted(glob.glob("/usr/local/cuda-*"))]
    for root, origin in roots:
        nvcc = toolkit_program(root / "bin", "nvcc")
        if not nvcc.exists():
            continue
        version = _nvcc_version(nvcc)
        if version is None or version[0] in found:
            continue
        cuobjdump = toolkit_program(root / "bin", "cuobjdump")
        found[version[0]] = CudaToolkit(version[0], root, nvcc, cuobjdump if cuobjdump.exists() else None,
                                        origin, version[1])
    return tuple(found[v] for v in sorted(found, key=lambda v: tuple(map(int, v.split(".")))))


def _docker_engine() -> str | None:
    if not shutil.which("docker"):
        return None
    try:
        return command.run(["docker", "version", "--format", "{{.Server.Version}}"], timeout=20).stdout.strip() or None
    except ToolError:
        return None


@cache
def discover(cross_compilers: tuple[tuple[str, str], ...] = (), emulators: tuple[str, ...] = ()) -> Inventory:
    """Look at this host once; later calls return the same answer. The cross tools are the ones
    asked for, (triple, g++ program) pairs and emulator programs: release.yaml's mobile_targets
    name them (discover_for), so a new target is found once its compiler is installed."""
    if cross_compilers or emulators:  # the host's own tools come from the one cached scan
        return replace(discover(), cross_compilers=_on_path(dict(cross_compilers)),
                       emulators=_on_path({name: name for name in emulators}))
    wine_candidates = ("/usr/lib/wine/wine64", shutil.which("wine64") or "")
    wine = next((Path(p) for p in wine_candidates if p and Path(p).exists()), None)
    ndk = os.environ.get("ANDROID_NDK_HOME")
    return Inventory(
        host_platform=this_platform(),
        interpreters=find_interpreters(),
        compilers=find_compilers(),
        cuda_toolkits=find_cuda_toolkits(),
        cross_compilers={},
        emulators={},
        wine=wine,
        docker_engine=_docker_engine(),
        android_ndk=Path(ndk) if ndk and Path(ndk).is_dir() else None,
        sysroot_compilers=find_sysroot_compilers(),
        zig_compilers=find_zig_compilers(),
    )


def discover_for(release: Release) -> Inventory:
    """discover(), with the cross compilers and emulators release.yaml's mobile_targets name."""
    targets = [t for t in release.mobile_targets.values() if t.toolchain == "cross-gcc"]
    return discover(tuple(sorted({(t.triple, t.compiler) for t in targets if t.triple and t.compiler})),
                    tuple(sorted({t.emulator[0] for t in targets if t.emulator})))


def _on_path(programs: dict[str, str]) -> dict[str, Path]:
    """key -> where the program is, for the programs found on PATH."""
    return {key: Path(found) for key, program in programs.items() if (found := shutil.which(program))}
