"""zig's clang: the C and C++ compiler of Linux wheels that promise an older glibc than any sysroot keeps.

manylinux2014 (glibc 2.17) and manylinux_2_28 (RHEL 8) are older than every Debian suite this machine's
mirror serves, so no sysroot keeps them (host/toolchains/sysroot.py). zig, from the `ziglang` package
on PyPI (a dependency of shipyard, as maturin's `--zig` uses it), carries the symbol-version lists of
every glibc release and links a stub libc.so with only the symbols of the version its target names:
`zig cc -target x86_64-linux-gnu.2.17` makes objects that need no symbol newer than GLIBC_2.17, on
this Debian 12 host or on a bare runner, with no container and no root.

C++ links zig's own libc++ (LLVM's) statically, its symbols hidden: the wheel needs no libstdc++ and
no GLIBCXX_ symbol, and exports only its module's init function, so it cannot clash with another
extension's C++ runtime in the same process (docs/glibc.md says why that is what the policy allows).

`shipyard toolchain install zig-2.17` writes small wrappers (`cc`, `c++`, `ar`, `ranlib`) into the
toolchain cache: CMake and setuptools call CC and CXX with the compiler's own arguments only, and
zig needs its target on every call. The wrappers are proved before they are used, as a sysroot is:
a threaded C++ library must need no glibc newer than the target's.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from shipyard.errors import ToolchainMissing, ToolError
from shipyard.host.toolchains.glibc import glibc_required, glibc_tuple
from shipyard.plumbing import command
from shipyard.plumbing.file_lock import exclusive
from shipyard.plumbing.hashing import sha256_hex
from shipyard.plumbing.progress import Progress
from shipyard.release.build_routes import ZigTarget

_WRAPPER_FORMAT = "1"  # bump when the wrappers below change what they run
_MANIFEST = "zig.json"
# zig caches what it compiled once for a target (its libc++, the glibc stubs): about a minute of CPU
# for the first C++ build of each glibc target, seconds after. Kept beside the wrappers, so that a
# CI cache of shipyard's toolchain folder carries it too.
_GLOBAL_CACHE = "cache"
# What `zig ar` and `zig ranlib` stand in for: binutils' own, which a bare runner may not have.
_TOOLS = {"cc": "cc", "c++": "c++", "ar": "ar", "ranlib": "ranlib"}


@dataclass(frozen=True)
class ZigRelease:
    """The zig of the installed `ziglang` package."""

    version: str  # what `zig version` says: 0.17.1
    executable: Path


@dataclass(frozen=True)
class ZigCompiler:
    """Wrappers in the toolchain cache that run zig's clang for one glibc target."""

    root: Path  # <toolchain cache>/zig/<version>-glibc<glibc>: bin/ and zig.json
    zig_version: str
    clang_version: str  # "22.1.8"
    glibc: str
    identity: str  # the wrapper format, zig's version and the target, hashed

    @property
    def cc(self) -> Path:
        return self.root / "bin" / "cc"

    @property
    def cxx(self) -> Path:
        return self.root / "bin" / "c++"

    @property
    def ar(self) -> Path:
        return self.root / "bin" / "ar"

    @property
    def ranlib(self) -> Path:
        return self.root / "bin" / "ranlib"

    @property
    def name(self) -> str:
        """In words, as the doctor says it: zig 0.17.1 for glibc 2.17."""
        return f"zig {self.zig_version} for glibc {self.glibc}"


def find_zig() -> ZigRelease | None:
    """The zig the `ziglang` package carries, None when the package is not installed."""
    spec = importlib.util.find_spec("ziglang")
    if spec is None or spec.origin is None:
        return None
    executable = Path(spec.origin).parent / "zig"
    if not executable.is_file():
        return None
    stat_ = executable.stat()
    version = _zig_version(executable, (stat_.st_size, stat_.st_mtime_ns))
    return ZigRelease(version, executable) if version else None


@functools.lru_cache(maxsize=8)
def _zig_version(executable: Path, _stat: tuple[int, ...]) -> str:
    try:
        return command.run([executable, "version"], timeout=60, what="zig version").stdout.strip()
    except ToolError:  # a zig that does not run is no zig
        return ""


def ziglang_requirement() -> str:
    """The `ziglang` shipyard is pinned to (its own metadata), for a fix that installs it."""
    try:
        requires = importlib.metadata.requires("shipyard") or []
    except importlib.metadata.PackageNotFoundError:
        requires = []
    return next((r.split(";")[0].strip() for r in requires if r.lower().startswith("ziglang")), "ziglang")


def find_installed_zig_compilers(cache: Path) -> list[ZigCompiler]:
    """Wrappers written into `cache` for the installed zig (those of another zig are stale)."""
    zig = find_zig()
    if zig is None:
        return []
    found = []
    for manifest in sorted((cache / "zig").glob(f"{zig.version}-glibc*/{_MANIFEST}")):
        installed = _load(manifest.parent, zig)
        if installed is not None:
            found.append(installed)
    return found


def install_zig_compiler(target: ZigTarget, cache: Path, *, progress: Progress | None = None) -> ZigCompiler:
    """Write (or reuse) the wrappers for `target` in `cache`/zig, proved to keep its glibc."""
    say = progress or (lambda _: None)
    zig = find_zig()
    if zig is None:
        raise ToolchainMissing(f"the zig route for glibc {target.glibc} needs the ziglang package, which is not "
                               f"installed; pip install '{ziglang_requirement()}' (a dependency of shipyard)")
    final = cache / "zig" / f"{zig.version}-glibc{target.glibc}"
    installed = _load(final, zig)
    if installed is not None:
        say(f"{installed.name} is up to date ({installed.root})")
        return installed
    final.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(final.with_name(f".{final.name}.lock")):
        installed = _load(final, zig)
        if installed is not None:
            return installed
        staging = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
        try:
            compiler = _write_wrappers(zig, target, staging, final.parent / _GLOBAL_CACHE)
            # Proved before it is moved into place: a cache entry is whole and proved, or absent.
            say(f"proving {compiler.name}: a threaded C++ library and a C one (zig builds its libc++ for "
                f"the target once, about a minute)")
            prove_zig_compiler(compiler)
            if final.exists():
                shutil.rmtree(final)
            os.replace(staging, final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    loaded = _load(final, zig)
    assert loaded is not None, final
    return loaded


def prove_zig_compiler(compiler: ZigCompiler) -> None:
    """Compile and link a threaded C++ library and a C one with the wrappers; each must need no glibc
    newer than the target's and no libstdc++, else ToolchainMissing naming what it needs."""
    with tempfile.TemporaryDirectory(prefix="shipyard-zig-probe-") as work:
        cpp, c = Path(work) / "probe.cpp", Path(work) / "probe.c"
        # A thread, a shared_ptr copy and a string: what links GLIBC_2.34 and GLIBCXX_3.4.30 with Debian 12's g++.
        cpp.write_text("#include <memory>\n#include <string>\n#include <thread>\n"
                       "extern \"C\" int probe_cxx() {\n"
                       "  auto v = std::make_shared<std::string>(\"probe\"); auto w = v;\n"
                       "  std::thread t([w] { w->append(\"!\"); }); t.join();\n"
                       "  return int(v->size()); }\n")
        c.write_text("#include <math.h>\n#include <string.h>\n"
                     "double probe_c(const char* s) { return sqrt((double)strlen(s)); }\n")
        for source, driver in ((cpp, compiler.cxx), (c, compiler.cc)):
            library = Path(work) / f"lib{source.stem}-{source.suffix[1:]}.so"
            command.run([driver, "-O2", "-fPIC", "-shared", "-pthread", source, "-o", library],
                        timeout=900, what=f"prove {compiler.name} ({source.name})")
            needed = glibc_required(library)
            if needed and glibc_tuple(needed) > glibc_tuple(compiler.glibc):
                raise ToolchainMissing(f"{compiler.name} at {compiler.root} linked a library needing GLIBC_{needed}, "
                                       f"newer than its target's; rewrite it: rm -rf {compiler.root} && "
                                       f"shipyard toolchain install zig-{compiler.glibc}")


def _write_wrappers(zig: ZigRelease, target: ZigTarget, root: Path, global_cache: Path) -> ZigCompiler:
    """bin/cc, bin/c++, bin/ar, bin/ranlib: zig's tools with the target on every call."""
    (root / "bin").mkdir()
    for name, tool in _TOOLS.items():
        flags = f" -target {target.triple}" if tool in ("cc", "c++") else ""
        wrapper = root / "bin" / name
        wrapper.write_text(
            "#!/bin/sh\n"
            f"# zig {zig.version}'s {tool}{' for ' + target.triple if flags else ''}: objects that need no glibc "
            f"symbol newer than {target.glibc}.\n"
            f'ZIG_GLOBAL_CACHE_DIR="${{ZIG_GLOBAL_CACHE_DIR:-{global_cache}}}"\n'
            "export ZIG_GLOBAL_CACHE_DIR\n"
            f'exec "{zig.executable}" {tool}{flags} "$@"\n')
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    clang = command.run([root / "bin" / "cc", "--version"], timeout=60, what=f"zig {zig.version} cc --version")
    clang_version = clang.stdout.split("clang version", 1)[-1].split()[0] if "clang version" in clang.stdout else "?"
    identity = sha256_hex(json.dumps([_WRAPPER_FORMAT, zig.version, clang_version, target.triple]).encode())[:16]
    (root / _MANIFEST).write_text(json.dumps(
        {"zig_version": zig.version, "zig": str(zig.executable), "clang_version": clang_version,
         "glibc": target.glibc, "triple": target.triple, "format": _WRAPPER_FORMAT, "identity": identity},
        indent=1) + "\n")
    return ZigCompiler(root, zig.version, clang_version, target.glibc, identity)


def _load(root: Path, zig: ZigRelease) -> ZigCompiler | None:
    """The wrappers at `root` when they run the installed zig in the current format, else None."""
    try:
        data = json.loads((root / _MANIFEST).read_text())
        compiler = ZigCompiler(root, data["zig_version"], data["clang_version"], data["glibc"], data["identity"])
        current = (data["format"] == _WRAPPER_FORMAT and data["zig"] == str(zig.executable)
                   and data["zig_version"] == zig.version)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return compiler if current and all(p.is_file() for p in (compiler.cc, compiler.cxx)) else None
