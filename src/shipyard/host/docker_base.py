"""Base images built on this host, because no registry can be pulled from.

Two layers: a Debian base made with debootstrap and `docker import`, and a manylinux-style
image built FROM it that holds this host's own CPython prefixes under /opt/python, which is
what cibuildwheel expects of a manylinux image. Both are idempotent: an image whose recorded
inputs match is reused.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Protocol

from shipyard.errors import BuildError, ToolchainMissing, ToolError
from shipyard.host.apt_sources import apt_sources, debian_mirror
from shipyard.plumbing import command
from shipyard.plumbing.hashing import sha256_hex, sha256_of
from shipyard.plumbing.progress import Progress

if TYPE_CHECKING:
    import docker

SUITE = "bookworm"
DEFAULT_BASE_TAG = "shipyard/bookworm-base:latest"
MANYLINUX_REPOSITORY = "shipyard/manylinux-bookworm_x86_64"
VARIANT = "minbase"
ARCH = "amd64"
# Bump when the bootstrap steps below change what ends up in the base image.
_BASE_RECIPE = "1"
_LABEL = "org.shipyard"
ENGINE_FIX = "apt-get install -y docker.io && dockerd &"

LOCAL_CA_DIR = Path("/usr/local/share/ca-certificates")

# The manylinux image's recipe is shipyard's own data (src/shipyard/resources/docker/base/), read
# through importlib.resources: found in a wheel install as in a checkout.
RECIPE_DIR = resources.files("shipyard.resources").joinpath("docker", "base")


def _say(progress: Progress | None, text: str) -> None:
    if progress is not None:
        progress(text)


# --- the engine ---------------------------------------------------------------------------

def docker_engine_version() -> str | None:
    """The engine's server version when one answers, else None. Starts nothing."""
    if shutil.which("docker") is None:
        return None
    try:
        done = command.run(["docker", "version", "--format", "{{.Server.Version}}"], timeout=30,
                           what="docker version")
    except ToolError:
        return None
    return done.stdout.strip() or None


def ensure_docker_engine(*, required: bool = False) -> bool:
    """True when a Docker engine answers. When none does: False, or ToolchainMissing naming
    the fix when `required`. Never starts or installs anything."""
    if docker_engine_version() is not None:
        return True
    if not required:
        return False
    if shutil.which("docker") is None:
        raise ToolchainMissing(f"no docker client on PATH; install and start an engine: {ENGINE_FIX}")
    where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    raise ToolchainMissing(f"no Docker engine answers at {where}; start one: {ENGINE_FIX} "
                           "(or `dockerd > /var/log/dockerd.log 2>&1 &` when docker.io is installed)")


def image_labels(tag: str) -> dict[str, str] | None:
    """The labels of a local image, or None when the engine holds no such image."""
    done = command.run(["docker", "image", "inspect", "--format", "{{json .Config.Labels}}", tag],
                       check=False, timeout=60, what="docker image inspect")
    if done.returncode != 0:
        return None
    return json.loads(done.stdout.strip() or "null") or {}


def image_id(tag: str) -> str:
    return command.run(["docker", "image", "inspect", "--format", "{{.Id}}", tag], timeout=60,
                       what="docker image inspect").stdout.strip()


def image_size(tag: str) -> int:
    """Bytes the image occupies, its layers included."""
    return int(command.run(["docker", "image", "inspect", "--format", "{{.Size}}", tag], timeout=60,
                           what="docker image inspect").stdout.strip())


# --- the Debian base --------------------------------------------------------------------------

def apt_mirror(suite: str = SUITE, apt_dir: Path = Path("/etc/apt")) -> str:
    """The first mirror that this machine's apt sources name for `suite` (deb822 or one-line)."""
    for source in apt_sources(apt_dir):
        if suite in source.suites and source.uris:
            return source.uris[0].rstrip("/")
    raise ToolchainMissing(f"no apt source on this machine names the {suite} suite; pass mirror= "
                           f"(e.g. http://deb.debian.org/debian)")


def suite_mirror(suite: str) -> str:
    """The mirror for `suite`: the one the machine's apt sources name for it, else the machine's
    Debian archive, which serves every suite (bullseye beside bookworm)."""
    try:
        return apt_mirror(suite)
    except ToolchainMissing:
        return debian_mirror()


def suite_base_tag(suite: str) -> str:
    """The local tag of a debootstrapped suite: shipyard/bookworm-base:latest."""
    return f"shipyard/{suite}-base:latest"


def _digest(inputs: dict[str, str]) -> str:
    return sha256_hex(json.dumps(inputs, sort_keys=True).encode())


def bootstrap_base_image(tag: str | None = None, *, suite: str = SUITE, mirror: str | None = None,
                         progress: Progress | None = None) -> str:
    """Make `tag` (default: suite_base_tag(suite)) a Debian minbase image of `suite`, bookworm unless
    told (debootstrap + docker import); returns the tag.

    Skipped when the image exists with the same recorded inputs (suite, variant, arch, mirror,
    debootstrap version, recipe); any change rebuilds it.
    """
    tag = tag or suite_base_tag(suite)
    ensure_docker_engine(required=True)
    if shutil.which("debootstrap") is None:
        raise ToolchainMissing("debootstrap is not installed: apt-get install -y debootstrap")
    mirror = (mirror or suite_mirror(suite)).rstrip("/")
    debootstrap_version = command.run(["debootstrap", "--version"], timeout=30).stdout.strip()
    inputs = {"suite": suite, "variant": VARIANT, "arch": ARCH, "mirror": mirror,
              "debootstrap": debootstrap_version, "recipe": _BASE_RECIPE}
    digest = _digest(inputs)
    existing = image_labels(tag)
    if existing is not None and existing.get(f"{_LABEL}.base.inputs") == digest:
        _say(progress, f"base image {tag} is up to date")
        return tag
    if os.geteuid() != 0:
        raise ToolchainMissing("debootstrap needs root (it creates device nodes and chroots)")

    # /var/tmp rather than /tmp: the tree is ~200 MB and /tmp may be a small tmpfs.
    with tempfile.TemporaryDirectory(prefix="shipyard-debootstrap-", dir="/var/tmp") as work:
        rootfs = Path(work) / "rootfs"
        _say(progress, f"debootstrap --variant={VARIANT} {suite} from {mirror}")
        command.run(["debootstrap", f"--variant={VARIANT}", f"--arch={ARCH}", "--components=main",
                     suite, rootfs, mirror], timeout=1800, what="debootstrap")
        provenance = _slim_and_describe(rootfs)
        archive = Path(work) / "rootfs.tar"
        _say(progress, "packing the root file system")
        # Sorted names and numeric owners: the archive depends on the tree, not on the walk order.
        command.run(["tar", "--sort=name", "--numeric-owner", "-C", rootfs, "-c", "-f", archive, "."],
                    timeout=600, what="tar")
        labels = {f"{_LABEL}.base.{k}": v for k, v in inputs.items()}
        labels[f"{_LABEL}.base.inputs"] = digest
        labels.update({f"{_LABEL}.base.{k}": v for k, v in provenance.items()})
        changes = [f"LABEL {k}={json.dumps(v)}" for k, v in sorted(labels.items())]
        changes += ['ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
                    "ENV LANG=C.UTF-8", 'CMD ["/bin/bash"]']
        _say(progress, f"docker import as {tag}")
        command.run(["docker", "import", f"--platform=linux/{ARCH}",
                     *[arg for change in changes for arg in ("--change", change)],
                     "--message", f"debootstrap {VARIANT} {suite} {mirror}", archive, tag],
                    timeout=600, what="docker import")
    return tag


def _slim_and_describe(rootfs: Path) -> dict[str, str]:
    """Drop download caches from a fresh debootstrap tree; say which Debian state it holds.

    The mirror moves (point releases, security updates), so the package list is recorded: two
    bases with the same `packages-sha256` hold the same package versions.
    """
    for pattern in ("var/cache/apt/archives/*.deb", "var/cache/apt/*.bin", "var/lib/apt/lists/*",
                    "var/log/bootstrap.log"):
        for path in rootfs.glob(pattern):
            if path.is_file() or path.is_symlink():
                path.unlink()
    status = (rootfs / "var/lib/dpkg/status").read_text()
    packages = sorted(
        f"{m.group(1)}={m.group(2)}"
        for block in status.split("\n\n")
        if (m := re.search(r"^Package: (\S+)$(?:.|\n)*?^Version: (\S+)$", block, re.MULTILINE))
    )
    return {
        "debian-version": (rootfs / "etc/debian_version").read_text().strip(),
        "packages": str(len(packages)),
        "packages-sha256": sha256_hex("\n".join(packages).encode()),
    }


# --- the manylinux-style image ---------------------------------------------------------------

class InterpreterLike(Protocol):
    """Anything with a minor version ("3.11") and the path of its python executable."""

    @property
    def version(self) -> str: ...

    @property
    def path(self) -> Path: ...


@dataclass(frozen=True)
class PythonPrefix:
    """A self-contained CPython installation to copy into an image."""

    version: str  # "3.11"
    prefix: Path  # /root/.pyenv/versions/3.11.7

    @property
    def abi_dir(self) -> str:
        """The /opt/python entry name manylinux uses: cp311-cp311."""
        nodot = self.version.replace(".", "")
        return f"cp{nodot}-cp{nodot}"


def python_prefix(python: InterpreterLike | PythonPrefix) -> PythonPrefix:
    """The installation prefix behind an interpreter; refuses a system Python (it is not
    self-contained and cannot be copied into an image)."""
    if isinstance(python, PythonPrefix):
        found = python
    else:
        exe = Path(python.path)
        found = PythonPrefix(python.version, exe.parent.parent.resolve())
    lib = found.prefix / "lib" / f"python{found.version}"
    if found.prefix in (Path("/usr"), Path("/usr/local"), Path("/")) or not (lib / "os.py").exists():
        raise ToolchainMissing(f"Python {found.version} at {found.prefix} is not a self-contained prefix "
                               "(a pyenv or /opt build is needed to copy into an image)")
    if not (found.prefix / "include" / f"python{found.version}" / "Python.h").exists():
        raise ToolchainMissing(f"Python {found.version} at {found.prefix} has no headers (Python.h); "
                               "native builds need them")
    return found


# Directories of the standard library that only its own test suite uses.
_TEST_DIRS = frozenset({"test", "tests", "idle_test"})
_BIN_KEEP = re.compile(r"^(python|pydoc|idle|2to3)")


def _wanted(rel: PurePosixPath, version: str) -> bool:
    """Whether a path inside a prefix belongs in the image: the interpreter, the standard
    library and headers, but no site-packages (pip and build are installed fresh), no
    test suites, no bytecode caches, no static libpython."""
    parts = rel.parts
    if "__pycache__" in parts:
        return False
    if parts[0] == "bin" and len(parts) == 2:
        return bool(_BIN_KEEP.match(parts[1]))
    stdlib = ("lib", f"python{version}")
    if parts[:2] == stdlib and len(parts) >= 3:
        if parts[2] == "site-packages":
            return len(parts) == 3
        if parts[2] in _TEST_DIRS or (len(parts) >= 4 and parts[3] in _TEST_DIRS):
            return False
        if parts[2].startswith("config-") and parts[-1].endswith(".a"):
            return False
    return True


def _walk_prefix(prefix: Path, version: str) -> Iterator[tuple[PurePosixPath, os.stat_result]]:
    """Every kept entry of a prefix, parents before children, with its lstat."""
    for root, dirs, files in os.walk(prefix):
        here = PurePosixPath(Path(root).relative_to(prefix).as_posix())
        kept_dirs = []
        for name in sorted(dirs):
            rel = here / name if str(here) != "." else PurePosixPath(name)
            if _wanted(rel, version):
                st = os.lstat(Path(root) / name)
                yield rel, st
                if stat.S_ISDIR(st.st_mode):
                    kept_dirs.append(name)
        dirs[:] = kept_dirs
        for name in sorted(files):
            rel = here / name if str(here) != "." else PurePosixPath(name)
            if _wanted(rel, version):
                yield rel, os.lstat(Path(root) / name)


def _fingerprint(python: PythonPrefix) -> str:
    """A cheap identity of what would be copied: names, sizes, modes and mtimes."""
    h = hashlib.sha256()
    for rel, st in _walk_prefix(python.prefix, python.version):
        h.update(f"{rel}\0{st.st_mode}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _stage_prefix(python: PythonPrefix, context: Path) -> None:
    """Mirror a prefix into the build context at its own absolute path, by hard links when
    the file system allows (no copy of ~200 MB per Python)."""
    dest_root = context / "pythons" / python.prefix.relative_to("/")
    dest_root.mkdir(parents=True)
    for rel, st in _walk_prefix(python.prefix, python.version):
        src, dest = python.prefix / rel, dest_root / rel
        if stat.S_ISLNK(st.st_mode):
            dest.symlink_to(os.readlink(src))
        elif stat.S_ISDIR(st.st_mode):
            dest.mkdir()
            dest.chmod(stat.S_IMODE(st.st_mode))
        elif stat.S_ISREG(st.st_mode):
            try:
                os.link(src, dest)
            except OSError:
                shutil.copy2(src, dest)


def local_trust_anchors(root: Path = LOCAL_CA_DIR) -> list[Path]:
    """The host's site-local CA certificates (Debian keeps them as *.crt under
    /usr/local/share/ca-certificates); the image trusts them too, so pip inside it reaches
    PyPI through the same TLS-intercepting proxy the host may sit behind."""
    return sorted(p for p in root.rglob("*.crt") if p.is_file()) if root.is_dir() else []


def manylinux_inputs(pythons: Sequence[PythonPrefix], base_image_id: str,
                     recipe_dir: Path | Traversable = RECIPE_DIR) -> dict[str, str]:
    """Everything that can change the manylinux image's bytes, as one flat mapping."""
    inputs = {"base": base_image_id}
    for cert in local_trust_anchors():
        inputs[f"ca/{cert.name}"] = sha256_of(cert)
    for name in ("Dockerfile.manylinux", "setup-pythons.sh", "constraints.txt"):
        inputs[f"recipe/{name}"] = sha256_hex((recipe_dir / name).read_bytes())
    for python in pythons:
        inputs[f"python/{python.abi_dir}"] = f"{python.prefix}:{_fingerprint(python)}"
    return inputs


def build_manylinux_image(pythons: Sequence[InterpreterLike | PythonPrefix], *,
                          base_tag: str = DEFAULT_BASE_TAG, mirror: str | None = None,
                          recipe_dir: Path | Traversable = RECIPE_DIR, progress: Progress | None = None) -> str:
    """Build (or reuse) `shipyard/manylinux-bookworm_x86_64:<hash>` holding `pythons` under
    /opt/python/cpXY-cpXY, plus 3.9 which cibuildwheel itself runs in; returns the tag."""
    if not (recipe_dir / "Dockerfile.manylinux").is_file():
        raise ToolchainMissing(f"the manylinux image recipe is missing: {recipe_dir}/Dockerfile.manylinux "
                               "(reinstall shipyard: it ships the recipe as package data)")
    prefixes = {p.version: p for p in map(python_prefix, pythons)}
    too_old = sorted(v for v in prefixes if tuple(map(int, v.split("."))) < (3, 9))
    if too_old:
        # constraints.txt pins pip and build from 3.9 on, as cibuildwheel 4 builds 3.9+.
        raise ToolchainMissing(f"the manylinux-style image holds CPython 3.9 and newer, not {', '.join(too_old)}")
    if "3.9" not in prefixes:
        # cibuildwheel runs its helpers with /opt/python/cp39-cp39/bin/python in every image.
        from shipyard.host.toolchains.discover import discover

        utility = discover().interpreter("3.9")
        if utility is None:
            raise ToolchainMissing("cibuildwheel needs /opt/python/cp39-cp39 in the image and no "
                                   "Python 3.9 prefix was found (pyenv install 3.9)")
        prefixes["3.9"] = python_prefix(utility)
    ordered = [prefixes[v] for v in sorted(prefixes, key=lambda v: tuple(map(int, v.split("."))))]

    bootstrap_base_image(base_tag, mirror=mirror, progress=progress)
    inputs = manylinux_inputs(ordered, image_id(base_tag), recipe_dir)
    digest = _digest(inputs)
    tag = f"{MANYLINUX_REPOSITORY}:{digest[:16]}"
    existing = image_labels(tag)
    if existing is not None and existing.get(f"{_LABEL}.manylinux.inputs") == digest:
        _say(progress, f"manylinux image {tag} is up to date")
        return tag

    with tempfile.TemporaryDirectory(prefix="shipyard-manylinux-", dir="/var/tmp") as work:
        context = Path(work)
        for python in ordered:
            _say(progress, f"staging Python {python.version} from {python.prefix}")
            _stage_prefix(python, context)
        (context / "local-ca").mkdir()
        for cert in local_trust_anchors():
            shutil.copyfile(cert, context / "local-ca" / cert.name)
        (context / "pythons.txt").write_text(
            "".join(f"{p.abi_dir} {p.prefix}\n" for p in ordered))
        for name in ("Dockerfile.manylinux", "setup-pythons.sh", "constraints.txt"):
            (context / name).write_bytes((recipe_dir / name).read_bytes())
        _say(progress, f"docker build {tag} ({', '.join(p.abi_dir for p in ordered)})")
        labels = {f"{_LABEL}.manylinux.inputs": digest,
                  f"{_LABEL}.manylinux.base": base_tag,
                  f"{_LABEL}.manylinux.pythons": " ".join(f"{p.abi_dir}={p.prefix}" for p in ordered)}
        legacy_build(["--force-rm", "--file", context / "Dockerfile.manylinux", "--build-arg", f"BASE_IMAGE={base_tag}",
                      *[arg for k, v in labels.items() for arg in ("--label", f"{k}={v}")], context],
                     tag, "the manylinux image", timeout=3600, tail_lines=40)
    return tag


def legacy_build(args: Sequence[object], tag: str, what: str, *, timeout: float, tail_lines: int = 30) -> None:
    """`docker build --tag TAG ARGS` with the legacy builder: what every docker.io client still
    carries (BuildKit needs the separate buildx plugin, which Debian ships apart). A failure is a
    BuildError naming `what` and the tag, with the last `tail_lines` lines: the failing step's own
    output is on stdout, and stderr holds only docker's summary."""
    done = command.run(["docker", "build", "--tag", tag, *args], extra_env={"DOCKER_BUILDKIT": "0"},
                       timeout=timeout, check=False, what=f"docker build {tag}")
    if done.returncode != 0:
        tail = "\n    ".join(done.output.splitlines()[-tail_lines:])
        raise BuildError(f"building {what} {tag} failed (exit {done.returncode}):\n    {tail}")


def docker_client() -> docker.DockerClient:
    """The engine DOCKER_HOST names (else the local socket), with room for long builds and pushes."""
    import docker

    return docker.from_env(timeout=3600)
