"""Where a library that auditwheel grafted into a wheel came from: the file on this machine
and the Debian package (and version) that installed it (on the host, or unpacked into the
sysroot the wheel was compiled against), or the CUDA toolkit it belongs to.

auditwheel names a grafted copy `<base>-<first 8 hex of the original's sha256>.<ext>`
(`libpng16-1b2c3d4e.so.16.39.0` from `libpng16.so.16.39.0`), so the original is found by
name and proven by its hash: the SBOM names the exact file that went in, not a guess.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath

from shipyard.errors import BuildError, ToolError
from shipyard.host.toolchains.sysroot import Sysroot
from shipyard.plumbing import command
from shipyard.plumbing.hashing import sha256_of

_GRAFTED = re.compile(r"^(?P<base>[^.]+)-(?P<hash>[0-9a-f]{8})\.(?P<ext>so.*)$")
# Where Debian's multiarch libraries live; auditwheel finds them through the loader's path.
SYSTEM_LIBRARY_DIRS = (Path("/usr/lib/x86_64-linux-gnu"), Path("/lib/x86_64-linux-gnu"), Path("/usr/lib"),
                       Path("/lib"), Path("/usr/local/lib"))


@dataclass(frozen=True)
class GraftedLibrary:
    """One vendored library: its path in the wheel, the original file, and what installed it."""

    wheel_path: str  # embervision.libs/libpng16-1b2c3d4e.so.16.39.0
    original_name: str  # libpng16.so.16.39.0
    original_path: str  # /usr/lib/x86_64-linux-gnu/libpng16.so.16.39.0
    sha256: str  # of the original file
    package: str  # the Debian binary package (libpng16-16), or "cuda-runtime"
    version: str  # its version (1.6.39-2+deb12u4), or the toolkit's CUDA version
    arch: str  # amd64, or "" where not a Debian package
    source_package: str  # the Debian source package (libpng1.6), or the toolkit's origin
    distro: str = ""  # the suite of a sysroot's .deb (bullseye); "" for the host's own packages


def grafted_members(names: Sequence[str]) -> list[str]:
    """The members of a wheel that auditwheel grafted: shared libraries in a `<dist>.libs/` folder."""
    return sorted(n for n in names if PurePosixPath(n).parent.name.endswith(".libs") and ".so" in n
                  and not n.endswith("/"))


def original_name(wheel_path: str) -> tuple[str, str]:
    """(original file name, 8-hex hash prefix) of a grafted library's wheel path."""
    name = PurePosixPath(wheel_path).name
    match = _GRAFTED.match(name)
    if not match:
        raise BuildError(f"{wheel_path}: not named as auditwheel grafts (<name>-<8 hex>.so…); "
                         f"cannot tell which library it came from")
    return f"{match['base']}.{match['ext']}", match["hash"]


@cache
def _sha256(path: Path) -> str:
    return sha256_of(path)


def find_original(wheel_path: str, folders: Sequence[Path]) -> tuple[Path, str]:
    """The file in `folders` auditwheel copied, proven by its hash prefix; and its sha256."""
    name, prefix = original_name(wheel_path)
    for folder in folders:
        candidate = folder / name
        if candidate.is_file() and (digest := _sha256(candidate.resolve())).startswith(prefix):
            return candidate, digest
    raise BuildError(f"{wheel_path}: no {name} whose sha256 starts with {prefix} in "
                     f"{', '.join(map(str, folders))}; the library changed since the wheel was repaired "
                     f"(an apt upgrade, a reassembled sysroot?): rebuild it (rm -rf .shipyard/cache) so its "
                     f"SBOM names what is inside")


@cache
def debian_package(path: Path) -> tuple[str, str, str, str] | None:
    """(package, version, arch, source package) of the Debian package that owns `path`, or None."""
    # On a usr-merged system a file has two names (/lib/... and /usr/lib/...), and dpkg records
    # whichever the package shipped (libc6: /lib/x86_64-linux-gnu/libc.so.6; libpng: /usr/lib/...).
    candidates = [str(path), str(path.resolve())]
    candidates += [f"/usr{c}" for c in list(candidates) if not c.startswith("/usr/")]
    candidates += [c.removeprefix("/usr") for c in list(candidates) if c.startswith("/usr/")]
    for candidate in dict.fromkeys(candidates):
        try:
            owner = command.run(["dpkg-query", "-S", candidate], timeout=60).stdout
        except (ToolError, FileNotFoundError):
            continue
        # "libpng16-16:amd64: /usr/lib/x86_64-linux-gnu/libpng16.so.16" (several owners: "a, b: path")
        package = owner.split("\n")[0].rsplit(": ", 1)[0].split(",")[0].strip()
        fields = command.run(["dpkg-query", "-W", "-f", "${Package}\t${Version}\t${Architecture}\t${source:Package}",
                              package], timeout=60).stdout.strip().split("\t")
        if len(fields) == 4:
            return fields[0], fields[1], fields[2], fields[3]
    return None


def library_folders(library_path: Sequence[Path] = (), sysroot: Sysroot | None = None) -> tuple[Path, ...]:
    """Where the libraries a build linked come from: `library_path` (a toolkit's), then the
    sysroot's folders, or the host's."""
    return (*library_path, *(sysroot.library_dirs if sysroot else SYSTEM_LIBRARY_DIRS))


def find_copy(member: str, sha256: str, folders: Sequence[Path]) -> Path | None:
    """The file in `folders` that a library in an artifact is a byte-for-byte copy of (the same
    name and sha256): vendored without auditwheel, so not renamed. None: no such file."""
    name = PurePosixPath(member).name
    for folder in folders:
        candidate = folder / name
        if candidate.is_file() and _sha256(candidate.resolve()) == sha256:
            return candidate
    return None


def identify(wheel_path: str, *, library_path: Sequence[Path] = (), sysroot: Sysroot | None = None,
             cuda_version: str | None = None, cuda_root: Path | None = None,
             original: Path | None = None) -> GraftedLibrary:
    """What a grafted library is: its original file and the Debian package (or CUDA toolkit) it came from.
    A wheel built against a sysroot vendored the sysroot's libraries (repair searched its folders
    instead of the host's): those are traced to the suite's own .debs. `original`: the file a
    library copied as it is (find_copy), for one vendored outside auditwheel."""
    if original is None:
        original, digest = find_original(wheel_path, library_folders(library_path, sysroot))
        name = original_name(wheel_path)[0]
    else:
        digest, name = _sha256(original.resolve()), original.name
    if sysroot is not None and (deb := sysroot.debian_package(original)) is not None:
        # Its path in the suite (/usr/lib/…), not in this machine's cache: the SBOM is the same bytes
        # wherever the sysroot was assembled.
        inside = f"/{original.relative_to(sysroot.tree).as_posix()}"
        return GraftedLibrary(wheel_path, name, inside, digest, deb.package, deb.version, deb.arch, deb.source,
                              deb.distro)
    owner = debian_package(original) if sysroot is None else None
    if owner is not None:
        package, version, arch, source = owner
        return GraftedLibrary(wheel_path, name, str(original), digest, package, version, arch, source)
    if cuda_root is not None and cuda_version and original.resolve().is_relative_to(cuda_root.resolve()):
        return GraftedLibrary(wheel_path, name, str(original), digest, "cuda-runtime", cuda_version, "",
                              f"CUDA {cuda_version} toolkit at {cuda_root}")
    where = f"no .deb of the {sysroot.name} sysroot" if sysroot else "no Debian package"
    raise BuildError(f"{wheel_path}: {original} belongs to {where} and no CUDA toolkit; an SBOM "
                     f"cannot say where it came from (install it from a package)")
