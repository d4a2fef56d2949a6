"""CycloneDX SBOMs (cyclonedx-python-lib): what is inside an artifact.

A wheel's lists the component and its version, each library auditwheel grafted with the Debian
package (or CUDA toolkit) and version it came from, the toolchain that built it (compiler,
nvcc, Python) and its Python dependencies. Wheels carry it under `.dist-info/sboms/` (PEP 770).
Every binary in the wheel is in it (supply/binaries.py counts them, wherever they lie): a library
that is a copy of one from the build's library folders (host, sysroot, CUDA toolkit) is
`vendored` like a grafted one; any other was built from the component's own sources (its
extensions, its native core) and is listed as a `built` file of the component, with its sha256.
A mobile tarball's lists the runtime's binaries the same way and each library they link (their
DT_NEEDED), traced to the package that provides it on the build's side.
Everything in it follows from the wheel and the toolchain: no clock time, no random ids, so a
rebuild gives the same bytes.
"""

from __future__ import annotations

import json
import uuid
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path, PurePosixPath

from cyclonedx.model import HashAlgorithm, HashType, Property
from cyclonedx.model.bom import Bom, BomMetaData
from cyclonedx.model.component import Component, ComponentScope, ComponentType
from cyclonedx.output.json import JsonV1Dot6
from packageurl import PackageURL
from packaging.requirements import Requirement
from pydantic import BaseModel

from shipyard.errors import BuildError
from shipyard.host.toolchains.discover import Compiler
from shipyard.host.toolchains.resolve import Toolchain
from shipyard.plumbing.hashing import sha256_hex
from shipyard.plumbing.input_files import check_input_size, decode_input, input_error, parse_json_input, validated
from shipyard.plumbing.wheel_metadata import read_metadata
from shipyard.record.manifest import CudaArchs
from shipyard.supply.binaries import conda_files, is_binary, linked_from_outside, wheel_binaries
from shipyard.supply.grafted import (
    GraftedLibrary,
    debian_package,
    find_copy,
    grafted_members,
    identify,
    library_folders,
)

# Properties shipyard adds to components (CycloneDX's `properties`, namespaced by their prefix).
ROLE = "shipyard:role"  # vendored | built | linked | toolchain | dependency
WHEEL_PATH = "shipyard:wheel-path"  # where a vendored or built library sits in the wheel
ARCHIVE_PATH = "shipyard:archive-path"  # where a built binary sits in a tarball, below its top folder
SONAME = "shipyard:soname"  # the name a linked library is needed by (DT_NEEDED)
PROVIDED_BY = "shipyard:provided-by"  # where a linked library comes from when no package provides it
ORIGINAL_FILE = "shipyard:original-file"
SOURCE_PACKAGE = "shipyard:source-package"
REQUIREMENT = "shipyard:requirement"
# The device code a CUDA artifact's binaries verifiably carry (record.manifest.CudaArchs), on the
# artifact's own component: comma-separated, e.g. "sm_70,sm_80" and "compute_80".
CUDA_SASS = "shipyard:cuda:sass"
CUDA_PTX = "shipyard:cuda:ptx"


@dataclass(frozen=True)
class SbomSubject:
    """The artifact an SBOM describes."""

    name: str  # distribution name, as in the wheel's file name
    version: str  # the final version (1.7.0+cpu)
    purl_type: str = "pypi"


# The image label that names the sha256 of the SBOM attached to an image (dist/sboms/<cell>.cdx.json).
SBOM_LABEL = "org.shipyard.image.sbom.sha256"

def sbom_member(dist_info: str, name: str) -> str:
    """Where a wheel carries its SBOM (PEP 770): `<dist-info>/sboms/<name>.cdx.json`."""
    return f"{dist_info}/sboms/{name}.cdx.json"


def _prop(name: str, value: str) -> Property:
    return Property(name=name, value=value)


def _vendored(lib: GraftedLibrary) -> Component:
    if lib.arch:  # a Debian binary package
        qualifiers = {"arch": lib.arch} | ({"distro": lib.distro} if lib.distro else {})
        purl = PackageURL("deb", "debian", lib.package, lib.version, qualifiers)
    else:
        purl = PackageURL("generic", "nvidia", lib.package, lib.version)
    return Component(
        name=lib.package, version=lib.version, type=ComponentType.LIBRARY, bom_ref=f"vendored:{lib.wheel_path}",
        purl=purl, hashes=[HashType(alg=HashAlgorithm.SHA_256, content=lib.sha256)],
        properties=[_prop(ROLE, "vendored"), _prop(WHEEL_PATH, lib.wheel_path),
                    _prop(ORIGINAL_FILE, lib.original_path), _prop(SOURCE_PACKAGE, lib.source_package)])


def _built(path: str, sha256: str, where: str = WHEEL_PATH) -> Component:
    # A file of the component itself: compiled from its sources, so no package of its own.
    return Component(name=path, type=ComponentType.FILE, bom_ref=f"built:{path}",
                     hashes=[HashType(alg=HashAlgorithm.SHA_256, content=sha256)],
                     properties=[_prop(ROLE, "built"), _prop(where, path)])


def _tool(name: str, version: str, detail: str = "") -> Component:
    # Built with, not shipped: CycloneDX's `excluded` scope.
    props = [_prop(ROLE, "toolchain")] + ([_prop("shipyard:identity", detail)] if detail else [])
    return Component(name=name, version=version, type=ComponentType.APPLICATION, scope=ComponentScope.EXCLUDED,
                     bom_ref=f"toolchain:{name}", properties=props)


def toolchain_components(toolchain: Toolchain) -> list[Component]:
    """The compilers and interpreter that built the artifact (the facts of toolchains/)."""
    tools = []
    if toolchain.interpreter:
        tools.append(_tool("cpython", toolchain.interpreter.full_version, toolchain.interpreter.binary_sha256))
    if toolchain.compiler:
        # zig's clang is named as zig, its version zig's (the identity names the clang and the glibc target).
        tools.append(_tool("zig" if toolchain.compiler.zig else "gcc", toolchain.compiler.version,
                           _compiler_detail(toolchain.compiler)))
    if toolchain.cuda:
        tools.append(_tool("nvcc", toolchain.cuda.version, toolchain.cuda.identity))
    if toolchain.cuda_host_compiler:
        tools.append(_tool("cuda-host-gcc", toolchain.cuda_host_compiler.version,
                           _compiler_detail(toolchain.cuda_host_compiler)))
    return tools


def _compiler_detail(compiler: Compiler) -> str:
    """The host's g++ by its path; a sysroot's by the sysroot and its identity (10.2.1@bullseye:…), zig's
    by its version and target, not by a path in this machine's cache, so the SBOM does not depend on where that is."""
    return compiler.identity if compiler.sysroot or compiler.zig else str(compiler.cxx)


def sbom_toolchain(toolchain: Toolchain, *, pure: bool) -> Toolchain:
    """The toolchain an SBOM names. A pure wheel compiles nothing and is the same bytes whichever
    Python built it (every variant's index holds it), so it names none."""
    return Toolchain(None, None, None, None) if pure else toolchain


def _dependency(requirement: str) -> Component:
    req = Requirement(requirement)
    return Component(name=req.name, type=ComponentType.LIBRARY, bom_ref=f"dependency:{req.name}",
                     purl=PackageURL("pypi", None, req.name.lower(), None),
                     properties=[_prop(ROLE, "dependency"), _prop(REQUIREMENT, str(req))])


def cuda_properties(cuda_archs: CudaArchs | None) -> list[Property]:
    """The verified device code as component properties (none for an artifact without kernels)."""
    if cuda_archs is None:
        return []
    return [_prop(CUDA_SASS, ",".join(cuda_archs.sass)), _prop(CUDA_PTX, ",".join(cuda_archs.ptx))]


def render(subject: SbomSubject, parts: Sequence[Component], *, epoch: int, purl: PackageURL | None = None,
           properties: Sequence[Property] = ()) -> bytes:
    """The SBOM as CycloneDX 1.6 JSON: the subject as metadata.component (with `properties`),
    `parts` as its components."""
    purl = purl or PackageURL(subject.purl_type, None, subject.name.lower(), subject.version)
    main = Component(name=subject.name, version=subject.version, type=ComponentType.LIBRARY,
                     bom_ref=str(purl), purl=purl, properties=list(properties))
    # Derived from the content, so the same artifact gets the same serial number on every build.
    identity = "\n".join([str(purl), *sorted(f"{c.bom_ref.value}={c.version}" for c in parts)])
    bom = Bom(serial_number=uuid.uuid5(uuid.NAMESPACE_URL, identity),
              metadata=BomMetaData(component=main, timestamp=datetime.fromtimestamp(epoch, UTC)))
    for part in parts:
        bom.components.add(part)
    bom.register_dependency(main, [p for p in parts if p.scope != ComponentScope.EXCLUDED])
    text = JsonV1Dot6(bom).output_as_string(indent=2)
    return (json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n").encode()


def wheel_sbom(wheel: Path, subject: SbomSubject, toolchain: Toolchain, *, epoch: int,
               library_path: Sequence[Path] = (), cuda_archs: CudaArchs | None = None) -> bytes:
    """The SBOM of a repaired wheel: every grafted library traced to the file and package it came
    from (the sysroot's .debs when the toolchain compiled against one, the host's otherwise), every
    other binary as vendored (a copy of a library of those folders) or built (the component's own).
    A CUDA wheel's own component carries the device code its binaries verifiably hold."""
    cuda = toolchain.cuda
    with zipfile.ZipFile(wheel) as zf:
        grafted = grafted_members(zf.namelist())
        binaries = {member: sha256_hex(data) for member, data in wheel_binaries(zf).items()}
        requirements = read_metadata(zf).get_all("Requires-Dist") or []
    sysroot = toolchain.compiler.sysroot if toolchain.compiler else None
    trace = partial(identify, library_path=library_path, sysroot=sysroot, cuda_version=cuda.version if cuda else None,
                    cuda_root=cuda.root if cuda else None)
    vendored = [trace(m) for m in grafted]
    built = []
    folders = library_folders(library_path, sysroot)
    for member, digest in sorted(binaries.items()):
        if member in grafted:
            continue
        copy = find_copy(member, digest, folders)
        if copy is not None:
            vendored.append(trace(member, original=copy))
        else:
            built.append(_built(member, digest))
    parts = [*map(_vendored, vendored), *built, *toolchain_components(toolchain), *map(_dependency, requirements)]
    return render(subject, parts, epoch=epoch, properties=cuda_properties(cuda_archs))


def wheel_sbom_files(wheel: Path, toolchain: Toolchain, *, version: str, epoch: int,
                     library_path: Sequence[Path] = (), cuda_archs: CudaArchs | None = None) -> dict[str, bytes]:
    """{wheel-relative path: bytes} of the SBOM for a wheel that will carry `version` (relabel adds it)."""
    name = wheel.name.split("-", 1)[0]
    subject = SbomSubject(name=name, version=version)
    member = sbom_member(f"{name}-{version}.dist-info", name)
    return {member: wheel_sbom(wheel, subject, toolchain, epoch=epoch, library_path=library_path,
                               cuda_archs=cuda_archs)}


CONDA_SBOM = "info/sbom.cdx.json"


def conda_sbom(package: Path, *, epoch: int, cuda_archs: CudaArchs | None = None) -> bytes:
    """The SBOM of a conda package: the package (name, version, build, subdir) and its run
    dependencies as its info/index.json declares them (conda packages vendor nothing: libpng and
    the CUDA runtime are dependencies, resolved at install), and the device code its binaries
    verifiably carry (a CUDA package with kernels)."""
    from rattler.package import IndexJson

    index = IndexJson.from_package_archive(package)
    name = index.name.normalized
    qualifiers = {"build": str(index.build), "subdir": index.subdir or ""}
    purl = PackageURL("conda", None, name, str(index.version), qualifiers)
    parts = []
    for spec in index.depends:
        dep = spec.split()[0]
        parts.append(Component(name=dep, type=ComponentType.LIBRARY, bom_ref=f"dependency:{dep}",
                               purl=PackageURL("conda", None, dep, None),
                               properties=[_prop(ROLE, "dependency"), _prop(REQUIREMENT, spec)]))
    subject = SbomSubject(name=name, version=str(index.version), purl_type="conda")
    return render(subject, parts, epoch=epoch, purl=purl, properties=cuda_properties(cuda_archs))


# Where a mobile tarball carries its SBOM, below its top folder (beside features.json).
MOBILE_SBOM = "share/ember-lite/sbom.cdx.json"


def _linked(name: str, library_dirs: Sequence[Path], provided_by: str | None) -> Component:
    """A library the runtime links, traced to the file of `library_dirs` the build linked against
    and the Debian package that installed it; else the platform that provides it (Android's)."""
    for folder in library_dirs:
        candidate = folder / name
        if not candidate.is_file():
            continue
        owner = debian_package(candidate)
        if owner is None:
            raise BuildError(f"{name}: {candidate} belongs to no Debian package; an SBOM cannot say where it "
                             f"comes from (install it from a package)")
        package, version, arch, source = owner
        return Component(name=package, version=version, type=ComponentType.LIBRARY, bom_ref=f"linked:{name}",
                         purl=PackageURL("deb", "debian", package, version, {"arch": arch}),
                         hashes=[HashType(alg=HashAlgorithm.SHA_256,
                                          content=sha256_hex(candidate.resolve().read_bytes()))],
                         properties=[_prop(ROLE, "linked"), _prop(SONAME, name), _prop(ORIGINAL_FILE, str(candidate)),
                                     _prop(SOURCE_PACKAGE, source)])
    if provided_by:
        return Component(name=name, type=ComponentType.LIBRARY, bom_ref=f"linked:{name}",
                         properties=[_prop(ROLE, "linked"), _prop(SONAME, name), _prop(PROVIDED_BY, provided_by)])
    folders = ", ".join(map(str, library_dirs)) or "no library folder"
    raise BuildError(f"{name}: linked, but found in none of {folders}; an SBOM cannot say where it comes from")


def mobile_sbom(stage: Path, *, name: str, version: str, target: str, library_dirs: Sequence[Path],
                provided_by: str | None, epoch: int) -> bytes:
    """The SBOM of a staged mobile install (what its tarball will hold): each binary of the runtime
    as a `built` file with its sha256, and each library they link (DT_NEEDED) that the install does
    not hold, traced in `library_dirs` (the target's: the host's or the cross sysroot's), or
    `provided_by` a platform where there is no such folder (an Android device)."""
    files = {p.relative_to(stage).as_posix(): p.read_bytes() for p in sorted(stage.rglob("*"))
             if p.is_file() and not p.is_symlink()}
    binaries = {path: data for path, data in files.items() if is_binary(path, data)}
    parts = [_built(path, sha256_hex(data), ARCHIVE_PATH) for path, data in sorted(binaries.items())]
    parts += [_linked(lib, library_dirs, provided_by) for lib in linked_from_outside(binaries)]
    purl = PackageURL("generic", None, name, version, {"target": target})
    return render(SbomSubject(name=name, version=version, purl_type="generic"), parts, epoch=epoch, purl=purl)


def read_mobile_sbom(files: dict[str, bytes], tarball: Path | None = None) -> SbomListing | None:
    """The SBOM among a mobile tarball's files (binaries.archive_files), or None; `tarball`
    names it in an error."""
    if MOBILE_SBOM not in files:
        return None
    return _listing(MOBILE_SBOM, files[MOBILE_SBOM], (tarball or Path("(tarball)")) / MOBILE_SBOM)


@dataclass(frozen=True)
class ImageContents:
    """What an image is made of, as the image build knows it."""

    repository: str
    version: str
    release_wheels: tuple[tuple[str, str], ...]  # (wheel file name, sha256), installed by name
    pins: tuple[str, ...]  # the third-party wheels, name==version
    bases: tuple[tuple[str, str, str], ...]  # (role, reference, image id)


def image_sbom(contents: ImageContents, *, epoch: int) -> bytes:
    """The SBOM of an image: the release wheels it installs (with their sha256), the pinned
    third-party wheels, and the base images by id. Attached beside the image (dist/sboms/) and
    named by its sha256 in a label, so the image points at exactly this document."""
    from packaging.utils import parse_wheel_filename

    parts = []
    for wheel, digest in contents.release_wheels:
        name, version, _, _ = parse_wheel_filename(wheel)
        parts.append(Component(name=str(name), version=str(version), type=ComponentType.LIBRARY,
                               bom_ref=f"wheel:{wheel}", purl=PackageURL("pypi", None, str(name), str(version)),
                               hashes=[HashType(alg=HashAlgorithm.SHA_256, content=digest)],
                               properties=[_prop(ROLE, "release-wheel"), _prop("shipyard:file", wheel)]))
    for pin in contents.pins:
        req = Requirement(pin)
        pinned = next(iter(req.specifier)).version if req.specifier else None
        purl = PackageURL("pypi", None, req.name.lower(), pinned)
        parts.append(Component(name=req.name, version=pinned, type=ComponentType.LIBRARY,
                               bom_ref=f"dependency:{req.name}", purl=purl,
                               properties=[_prop(ROLE, "dependency"), _prop(REQUIREMENT, pin)]))
    for role, reference, image_id in contents.bases:
        parts.append(Component(name=reference, type=ComponentType.CONTAINER, bom_ref=f"base:{role}",
                               hashes=[HashType(alg=HashAlgorithm.SHA_256, content=image_id.removeprefix("sha256:"))],
                               properties=[_prop(ROLE, f"base-image:{role}")]))
    subject = SbomSubject(name=contents.repository, version=contents.version, purl_type="docker")
    return render(subject, parts, epoch=epoch)


def sdist_sbom(files: dict[str, bytes], *, name: str, version: str, epoch: int) -> bytes:
    """The SBOM of an sdist: each of its files (below its top folder) with its sha256. Written
    beside it (dist/sboms/), since an sdist has no place for one; verify compares the two."""
    parts = [_built(path, sha256_hex(data), where=ARCHIVE_PATH) for path, data in sorted(files.items())]
    return render(SbomSubject(name=name, version=version), parts, epoch=epoch)


def read_sdist_sbom(path: Path) -> SbomListing:
    """What the SBOM file beside an sdist says (InputError, one line, when it is not one)."""
    return _listing(path.name, path.read_bytes(), path)


# --- reading ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SbomListing:
    """What an SBOM says, as `shipyard verify` compares it with an artifact."""

    member: str
    subject: str
    version: str
    vendored: dict[str, str]  # wheel path -> "package version"
    built: dict[str, str] = field(default_factory=dict)  # path in the artifact -> sha256
    linked: dict[str, str] = field(default_factory=dict)  # soname -> "package version" (or who provides it)


def read_wheel_sbom(zf: zipfile.ZipFile) -> SbomListing | None:
    """The SBOM a wheel carries under .dist-info/sboms/, or None."""
    members = [n for n in zf.namelist() if PurePosixPath(n).parent.name == "sboms"
               and PurePosixPath(n).parent.parent.name.endswith(".dist-info") and n.endswith(".cdx.json")]
    if not members:
        return None
    where = Path(str(zf.filename)) / members[0]
    # The size the zip declares, checked before a byte is inflated (the read checks the real size too).
    check_input_size(zf.getinfo(members[0]).file_size, where, limit="SBOM", fix=SBOM_FIX)
    return _listing(members[0], zf.read(members[0]), where)


class _Named(BaseModel):
    name: str
    version: str = ""


class _Property(BaseModel):
    name: str
    value: str


class _Hash(BaseModel):
    alg: str
    content: str


class _Component(_Named):
    properties: list[_Property] = []
    hashes: list[_Hash] = []


class _Metadata(BaseModel):
    component: _Named


class _CycloneDx(BaseModel):
    """The part of a CycloneDX document verify compares with an artifact (the rest is not read)."""

    metadata: _Metadata
    components: list[_Component] = []


# An SBOM is written into its artifact by the build: a bad one means the artifact must be rebuilt.
SBOM_FIX = "rebuild the artifact (its build writes the SBOM into it)"


def _listing(member: str, data: bytes, where: Path) -> SbomListing:
    """What the SBOM `data` says; `where` names it (artifact/member) in an InputError."""
    check_input_size(len(data), where, limit="SBOM", fix=SBOM_FIX)
    text = decode_input(data, where, kind="JSON", restore_fix=SBOM_FIX, encoding_fix=SBOM_FIX)
    bom = validated(_CycloneDx, parse_json_input(text, where, restore_fix=SBOM_FIX), where, fix=SBOM_FIX)
    vendored: dict[str, str] = {}
    built: dict[str, str] = {}
    linked: dict[str, str] = {}
    for component in bom.components:
        props = {p.name: p.value for p in component.properties}
        named = f"{component.name} {component.version}".strip()
        role = props.get(ROLE)
        if role == "vendored":
            if WHEEL_PATH not in props:
                raise input_error(where, f"components.{component.name}.properties", f"a vendored library without "
                                  f"{WHEEL_PATH}", SBOM_FIX)
            vendored[props[WHEEL_PATH]] = named
        elif role == "built":
            digest = next((h.content for h in component.hashes if h.alg == "SHA-256"), "")
            built[props.get(WHEEL_PATH) or props.get(ARCHIVE_PATH, component.name)] = digest
        elif role == "linked":
            if SONAME not in props:
                raise input_error(where, f"components.{component.name}.properties", f"a linked library without "
                                  f"{SONAME}", SBOM_FIX)
            linked[props[SONAME]] = named
    return SbomListing(member, bom.metadata.component.name, bom.metadata.component.version, vendored, built, linked)


def read_conda_sbom(package: Path) -> SbomListing | None:
    """The SBOM a .conda package carries at info/sbom.cdx.json, or None."""
    data = conda_files(package, "info").get(CONDA_SBOM)
    return None if data is None else _listing(CONDA_SBOM, data, package / CONDA_SBOM)
