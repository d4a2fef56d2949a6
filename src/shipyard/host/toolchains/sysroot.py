"""Debian sysroots: an older glibc and gcc for the Linux wheels, from the machine's Debian mirror.

release.yaml promises a glibc in its Linux platform tag (manylinux_2_31_x86_64). This host's own
compilers link its own glibc (2.36 on Debian 12), so they cannot keep an older promise. A
sysroot is an older suite's compiler and libraries unpacked from their .debs (recipes in
resources/sysroots.toml): its gcc runs on this host with `--sysroot`, so every object sees only
that suite's headers, glibc and libstdc++, and auditwheel finds the libraries it vendors there.
Assembling one needs neither root nor a chroot, and no container runs at build time.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from urllib.parse import unquote

from shipyard.errors import ToolchainMissing, ToolError
from shipyard.host.toolchains.glibc import glibc_required, glibc_tuple
from shipyard.plumbing import command
from shipyard.plumbing.file_lock import exclusive
from shipyard.plumbing.hashing import sha256_hex

# The recipes are what release/build_routes.py decides a platform's route by: read there, once.
from shipyard.release.build_routes import SYSROOT_TRIPLE, SysrootRecipe, sysroot_recipes

_RECIPE_FORMAT = "1"  # bump when the assembly below changes what a sysroot holds
_MANIFEST = "sysroot.json"
# Which .deb put each file into the tree: the sysroot has no dpkg database, and an SBOM must name
# the package (and version) a vendored library came from. A sysroot assembled before this file
# existed counts as absent and is reassembled (_load), never read without it; the tree itself is
# the same, so its identity (and every cache key built on it) is unchanged, and a shipyard that
# predates the file accepts a sysroot that has it (the shared cache does not flip between them).
_OWNERS = "owners.json"
_TRIPLE = SYSROOT_TRIPLE


@dataclass(frozen=True)
class Sysroot:
    """An assembled sysroot in the toolchain cache, with its gcc wrapped to use it."""

    name: str
    root: Path  # <toolchain cache>/sysroots/<name>: bin/ (the wrappers) and tree/
    glibc: str
    gcc_major: int
    gcc_version: str  # "10.2.1"
    identity: str  # the recipe and every unpacked .deb's version, hashed

    @property
    def tree(self) -> Path:
        return self.root / "tree"

    @property
    def cc(self) -> Path:
        return self.root / "bin" / f"gcc-{self.gcc_major}"

    @property
    def cxx(self) -> Path:
        return self.root / "bin" / f"g++-{self.gcc_major}"

    @property
    def library_dirs(self) -> tuple[Path, ...]:
        """Where the suite's shared libraries live: what auditwheel searches instead of the host's."""
        return (self.tree / "lib" / _TRIPLE, self.tree / "usr" / "lib" / _TRIPLE)

    def debian_package(self, path: Path) -> DebPackage | None:
        """The suite's .deb that unpacked `path` (a file in the tree, or a symlink to one), or None."""
        packages, files = _owners(self.root / _OWNERS, self.identity)
        tree = self.tree.resolve()
        for candidate in (path, path.resolve()):
            if candidate.is_relative_to(self.tree) or candidate.is_relative_to(tree):
                rel = candidate.relative_to(self.tree if candidate.is_relative_to(self.tree) else tree)
                if (package := files.get(rel.as_posix())) is not None:
                    return packages[package]
        return None


@dataclass(frozen=True)
class DebPackage:
    """A Debian binary package as an SBOM names it."""

    package: str  # libpng16-16
    version: str  # 1.6.37-3
    arch: str  # amd64
    source: str  # libpng1.6
    distro: str  # the suite it came from: bullseye


@cache
def _owners(path: Path, identity: str) -> tuple[dict[str, DebPackage], dict[str, str]]:
    """({package: DebPackage}, {tree-relative path: package}) as the sysroot's assembly recorded
    them (the identity hashes its .debs' versions: another identity, another record)."""
    try:
        data = json.loads(path.read_text())
        return {name: DebPackage(**fields) for name, fields in data["packages"].items()}, data["files"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ToolchainMissing(f"{path}: unreadable ({exc}); reassemble the sysroot: rm -rf {path.parent} && "
                               f"shipyard toolchain install {path.parent.name}") from None


def find_installed_sysroots(cache: Path) -> list[Sysroot]:
    """Sysroots assembled into `cache` whose recipe is still the current one."""
    found = []
    for recipe in sysroot_recipes():
        installed = _load(cache / "sysroots" / recipe.name)
        if installed is not None and installed[1] == _recipe_digest(recipe):
            found.append(installed[0])
    return found


def install_sysroot(name: str, cache: Path, *, progress: Callable[[str], None] = lambda _: None) -> Sysroot:
    """Assemble (or reuse) the sysroot `name` of resources/sysroots.toml in `cache`/sysroots."""
    recipe = next((r for r in sysroot_recipes() if r.name == name), None)
    if recipe is None:
        names = ", ".join(r.name for r in sysroot_recipes())
        raise ToolchainMissing(f"no sysroot named {name!r} in shipyard/resources/sysroots.toml (known: {names})")
    final = cache / "sysroots" / recipe.name
    installed = _load(final)
    if installed is not None and installed[1] == _recipe_digest(recipe):
        progress(f"sysroot {recipe.name} is up to date ({installed[0].root})")
        return installed[0]
    for tool in ("apt-get", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise ToolchainMissing(f"assembling the {recipe.name} sysroot needs {tool} (a Debian host)")
    final.parent.mkdir(parents=True, exist_ok=True)
    # Concurrent builds (a CPU and a CUDA session) wait for the one that assembles it.
    with exclusive(final.with_name(f".{recipe.name}.lock")):
        installed = _load(final)
        if installed is not None and installed[1] == _recipe_digest(recipe):
            return installed[0]
        return _assemble(recipe, final, progress)


def _assemble(recipe: SysrootRecipe, final: Path, progress: Callable[[str], None]) -> Sysroot:
    staging = Path(tempfile.mkdtemp(prefix=f".{recipe.name}-", dir=final.parent))
    try:
        from shipyard.host.apt_sources import download_closure

        debs = download_closure(recipe.suite, recipe.component, recipe.packages, staging / "apt", progress)
        progress(f"unpack {len(debs)} .debs of {recipe.suite} into the sysroot")
        tree = staging / "tree"
        tree.mkdir()
        listings = _deb_listings(debs, recipe.suite)
        _unpack_debs(debs, [files for _, files in listings], tree)
        _write_owners(listings, staging / _OWNERS)
        _relative_symlinks(tree)
        sysroot = _write_wrappers(recipe, staging, debs)
        # Proved before it is moved into place: a cache entry is whole and proved, or absent.
        progress(f"proving the {recipe.name} sysroot: a threaded C++ library linking libpng")
        prove_sysroot(sysroot)
        shutil.rmtree(staging / "apt")
        if final.exists():
            shutil.rmtree(final)
        os.replace(staging, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Sysroot(**{**asdict(sysroot), "root": final})


def prove_sysroot(sysroot: Sysroot) -> None:
    """Compile and link a small threaded C++ library against libpng with the sysroot's g++; it must
    need no glibc newer than the sysroot's own, else ToolchainMissing naming what it needs."""
    with tempfile.TemporaryDirectory(prefix="shipyard-sysroot-probe-") as work:
        source = Path(work) / "probe.cpp"
        # pthread_create and a shared_ptr copy: what links GLIBC_2.34 and GLIBC_2.32 on Debian 12.
        source.write_text("#include <png.h>\n#include <pthread.h>\n#include <memory>\n#include <string>\n"
                          "static void* run(void* arg) { static_cast<std::string*>(arg)->append(\"!\"); return 0; }\n"
                          "extern \"C\" int probe() {\n"
                          "  auto v = std::make_shared<std::string>(png_get_libpng_ver(nullptr)); auto w = v;\n"
                          "  pthread_t t; pthread_create(&t, nullptr, run, w.get()); pthread_join(t, nullptr);\n"
                          "  return int(v->size()); }\n")
        library = Path(work) / "libprobe.so"
        command.run([sysroot.cxx, "-O2", "-fPIC", "-shared", "-pthread", source, "-o", library, "-lpng"],
                    timeout=300, what=f"prove the {sysroot.name} sysroot")
        needed = glibc_required(library)
    if needed and glibc_tuple(needed) > glibc_tuple(sysroot.glibc):
        raise ToolchainMissing(f"the {sysroot.name} sysroot at {sysroot.root} linked a library needing "
                               f"GLIBC_{needed}, newer than its glibc {sysroot.glibc}; reassemble it: "
                               f"rm -rf {sysroot.root} && shipyard toolchain install {sysroot.name}")


def record_deb_owners(debs: list[Path], suite: str, out: Path) -> None:
    """Write which .deb of `suite` (package, version, arch, source package) unpacked each file and symlink."""
    _write_owners(_deb_listings(debs, suite), out)


def _deb_listings(debs: list[Path], suite: str) -> list[tuple[DebPackage, list[str]]]:
    """Each .deb's package fields and the files and symlinks it holds (tree-relative), in `debs`'
    order; read side by side, one dpkg-deb per core (each decompresses its whole archive)."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return list(pool.map(lambda deb: _deb_listing(deb, suite), debs))


def _deb_listing(deb: Path, suite: str) -> tuple[DebPackage, list[str]]:
    fields = command.run(["dpkg-deb", "--show", "--showformat",
                          "${Package}\t${Version}\t${Architecture}\t${source:Package}", deb],
                         timeout=60, what=f"dpkg-deb --show {deb.name}").stdout.strip().split("\t")
    name, version, arch, source = fields
    listing = command.run(["dpkg-deb", "--contents", deb], timeout=120, what=f"dpkg-deb --contents {deb.name}")
    files = []
    for line in listing.stdout.splitlines():
        # "-rw-r--r-- root/root 12345 2021-01-01 00:00 ./usr/lib/x86_64-linux-gnu/libpng16.so.16.37.0"
        # "lrwxrwxrwx root/root 0 2021-01-01 00:00 ./usr/lib/x86_64-linux-gnu/libpng16.so.16 -> libpng16…"
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[0][0] in "-l":
            path = parts[5].split(" -> ", 1)[0] if parts[0][0] == "l" else parts[5]
            files.append(path.removeprefix("./"))
    return DebPackage(name, version, arch, source, distro=suite), files


def _write_owners(listings: list[tuple[DebPackage, list[str]]], out: Path) -> None:
    packages: dict[str, dict[str, str]] = {}
    owners: dict[str, str] = {}
    for package, files in listings:  # a path two .debs hold belongs to the later one, as it is unpacked
        packages[package.package] = asdict(package)
        owners |= dict.fromkeys(files, package.package)
    out.write_text(json.dumps({"packages": packages, "files": owners}, indent=0, sort_keys=True) + "\n")


def _unpack_debs(debs: list[Path], files: list[list[str]], tree: Path) -> None:
    """`dpkg-deb -x` every .deb into `tree`, one per core, with the tree a serial unpack in `debs`'
    order gives: a .deb holding a path an earlier one also holds is unpacked again, in order, after."""
    def unpack(deb: Path) -> None:
        command.run(["dpkg-deb", "-x", deb, tree], timeout=600, what=f"dpkg-deb -x {deb.name}")

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(unpack, debs))
    seen: set[str] = set()
    overlapping: set[int] = set()
    for index, held in enumerate(files):
        if seen.intersection(held):
            overlapping.add(index)
        seen.update(held)
    for index in sorted(overlapping):
        unpack(debs[index])


def _recipe_digest(recipe: SysrootRecipe) -> str:
    return sha256_hex(json.dumps([_RECIPE_FORMAT, asdict(recipe)], sort_keys=True).encode())


def _load(root: Path) -> tuple[Sysroot, str] | None:
    try:
        data = json.loads((root / _MANIFEST).read_text())
        sysroot = Sysroot(data["name"], root, data["glibc"], data["gcc_major"], data["gcc_version"], data["identity"])
        recipe = data["recipe"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return (sysroot, recipe) if sysroot.cxx.is_file() and (root / _OWNERS).is_file() else None


def _relative_symlinks(tree: Path) -> None:
    """Make absolute symlinks point inside the tree: the linker follows /lib64/ld-linux-x86-64.so.2
    -> /lib/x86_64-linux-gnu/ld-2.31.so on the host otherwise, not in the sysroot."""
    for folder, dirs, files in os.walk(tree):
        for name in (*dirs, *files):
            link = Path(folder) / name
            if link.is_symlink() and (target := os.readlink(link)).startswith("/"):
                link.unlink()
                link.symlink_to(os.path.relpath(tree / target.lstrip("/"), folder))


def _write_wrappers(recipe: SysrootRecipe, root: Path, debs: list[Path]) -> Sysroot:
    """bin/gcc-N and bin/g++-N: the suite's compiler drivers with --sysroot, found relative to the
    wrapper (the folder is moved into place after), usable as CC, CXX and nvcc's -ccbin."""
    (root / "bin").mkdir()
    for tool in ("gcc", "g++"):
        driver = f"{_TRIPLE}-{tool}-{recipe.gcc}"
        if not (root / "tree" / "usr" / "bin" / driver).is_file():
            raise ToolError(f"the {recipe.name} sysroot has no usr/bin/{driver}; check `packages` in "
                            "shipyard/resources/sysroots.toml")
        wrapper = root / "bin" / f"{tool}-{recipe.gcc}"
        wrapper.write_text(
            "#!/bin/sh\n"
            f"# {tool} {recipe.gcc} of Debian {recipe.suite}, compiling and linking against its glibc {recipe.glibc}.\n"
            'tree="$(cd "$(dirname "$0")/../tree" && pwd -P)"\n'
            f'exec "$tree/usr/bin/{driver}" --sysroot="$tree" "$@"\n')
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    versions = sorted(unquote(d.name.removesuffix(".deb")) for d in debs)  # name_version_arch
    identity = sha256_hex("\n".join([_recipe_digest(recipe), *versions]).encode())[:16]
    gcc_version = command.run([root / "bin" / f"g++-{recipe.gcc}", "-dumpfullversion"], timeout=60,
                              what=f"g++-{recipe.gcc} of the {recipe.name} sysroot").stdout.strip()
    sysroot = Sysroot(recipe.name, root, recipe.glibc, recipe.gcc, gcc_version, identity)
    (root / _MANIFEST).write_text(json.dumps(
        {"name": recipe.name, "suite": recipe.suite, "glibc": recipe.glibc, "gcc_major": recipe.gcc,
         "gcc_version": gcc_version, "identity": identity, "recipe": _recipe_digest(recipe), "debs": versions},
        indent=1) + "\n")
    return sysroot
