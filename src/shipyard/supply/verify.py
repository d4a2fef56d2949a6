"""`shipyard verify <artifact | dist/> [--public-key K]`: for each artifact, its signed provenance
verifies against K, the statement's subject is this file's name and sha256, and what is inside
it is what it says: a wheel's members match RECORD and its SBOM lists every binary in it, wherever
it lies (vendored or built); a conda package's files match info/paths.json one by one; a mobile
tarball's SBOM lists its binaries and every library they link; an sdist's SBOM file beside it
lists each of its files with its sha256."""

from __future__ import annotations

import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import parse_wheel_filename
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import Key
from wheel.wheelfile import WheelError, WheelFile

from shipyard.host import docker_base
from shipyard.plumbing.hashing import sha256_hex, sha256_of
from shipyard.plumbing.input_files import input_error
from shipyard.record.manifest import ArtifactRecord, read_manifest, recorded_file, require_manifest
from shipyard.release.kinds import kind_of
from shipyard.supply.binaries import archive_files, is_binary, linked_from_outside, wheel_binaries
from shipyard.supply.conda_paths import check_conda_paths
from shipyard.supply.grafted import grafted_members
from shipyard.supply.provenance import (
    PAYLOAD_TYPE,
    STATEMENT_TYPE,
    envelope_path,
    envelope_statement,
    read_envelope,
    statement_subjects,
    subject_digest,
)
from shipyard.supply.sbom import (
    CONDA_SBOM,
    MOBILE_SBOM,
    SbomListing,
    read_conda_sbom,
    read_mobile_sbom,
    read_sdist_sbom,
    read_wheel_sbom,
)


@dataclass(frozen=True)
class CheckResult:
    artifact: str
    check: str  # provenance | signature | subject | record | paths | sbom | archive
    ok: bool
    detail: str

    def __str__(self) -> str:
        return f"{self.artifact}: {self.check}: {'ok' if self.ok else 'FAILED'}: {self.detail}"


def _find_records(target: Path) -> tuple[Path, list[ArtifactRecord]]:
    """(dist folder, records to verify) for a dist folder or one artifact inside one."""
    if target.is_dir():
        return target, list(require_manifest(target / "manifest.json",
                                             "pass a dist/ folder that a build wrote, or an artifact").artifacts)
    if not target.is_file():
        raise input_error(target, "(file)", "no such artifact or folder", "pass a dist/ folder or an artifact in one")
    for folder in target.resolve().parents:
        manifest = read_manifest(folder / "manifest.json")
        if manifest is None:
            continue
        found = [r for r in manifest.artifacts if r.path and (folder / r.path).resolve() == target.resolve()]
        if found:
            return folder, found
    raise input_error(target, "(file)", "recorded in no manifest.json of a folder above it",
                      "verify it inside the dist/ folder it was built into (its provenance is recorded there)")


def verify(target: Path, public_key: Key) -> list[CheckResult]:
    """Every check of every artifact under `target` (a dist folder or one artifact); each
    artifact is judged on its own, so one damaged archive is its own FAILED line."""
    dist, records = _find_records(target)
    results: list[CheckResult] = []
    for record in records:
        results += list(_verify_readable(dist, record, public_key))
    return results


def _damage() -> tuple[type[BaseException], ...]:
    """What reading a damaged archive raises: zip, tar, gzip, zstd, rattler's extraction, a wheel
    file name that is not one (packaging's InvalidWheelFilename is a ValueError)."""
    import tarfile
    import zlib

    import zstandard
    from rattler.exceptions import ExtractError

    return (zipfile.BadZipFile, tarfile.TarError, zlib.error, zstandard.ZstdError, ExtractError, EOFError, OSError,
            ValueError)


def _verify_readable(dist: Path, record: ArtifactRecord, key: Key) -> Iterator[CheckResult]:
    """_verify_one's results, ending in an `archive` FAILED line when the artifact cannot be read."""
    try:
        yield from _verify_one(dist, record, key)
    except _damage() as exc:
        said = " ".join(str(exc).split())
        said = said if len(said) <= 160 else said[:157] + "..."
        yield CheckResult(record.name, "archive", False, f"{dist / record.path if record.path else record.name} "
                                                         f"cannot be read ({type(exc).__name__}: {said}); rebuild it")


def _verify_one(dist: Path, record: ArtifactRecord, key: Key) -> Iterator[CheckResult]:
    name = record.name
    # Every file this record names must lie inside dist/: refused (one line, exit 2) before any check.
    artifact = recorded_file(dist, record, record.path, "path") if record.path else dist
    path = recorded_file(dist, record, record.provenance, "provenance") if record.provenance \
        else envelope_path(dist, record)
    if not path.is_file():
        yield CheckResult(name, "provenance", False, f"no signed provenance at {path}; sign with `shipyard attest`")
        return
    envelope = read_envelope(path)  # one line and exit 2 when it is not one
    try:
        envelope.verify([key], 1)
    except VerificationError:
        signers = ", ".join(k[:16] + "…" for k in envelope.signatures)
        yield CheckResult(name, "signature", False, f"{path} is not signed by the given public key (keyid "
                                                    f"{key.keyid[:16]}…; signed by {signers})")
        return
    yield CheckResult(name, "signature", True, f"{path.relative_to(dist)} signed by keyid {key.keyid[:16]}…")
    statement = envelope_statement(envelope, path)
    if envelope.payload_type != PAYLOAD_TYPE or statement.get("_type") != STATEMENT_TYPE:
        yield CheckResult(name, "subject", False,
                          f"the envelope holds no in-toto Statement v1 ({envelope.payload_type})")
        return
    subjects = statement_subjects(statement)
    if record.path and not artifact.is_file():
        yield CheckResult(name, "subject", False, f"{artifact} is missing")
        return
    kind = kind_of(record.package_type)
    if kind.is_image:
        digest = _engine_image_id(record.name)
        if digest is None:
            yield CheckResult(name, "subject", False, f"the local docker engine holds no image {name}; pull it "
                                                      f"(docker pull) and verify again")
            return
    else:
        digest = subject_digest(dist, record)
    if name not in subjects:
        yield CheckResult(name, "subject", False, f"the statement's subjects are {sorted(subjects)}, not this artifact")
    elif subjects[name] != digest:
        yield CheckResult(name, "subject", False, f"sha256 {digest} of the file, but the signed statement names "
                                                  f"{subjects[name]}: the artifact changed after signing")
    else:
        yield CheckResult(name, "subject", True, f"sha256 {digest[:16]}… as signed")
    if kind.contents_check == "record":
        yield from _verify_wheel(artifact)
    elif kind.contents_check == "paths":
        yield _verify_conda_paths(artifact)
        if record.path.endswith(".conda"):
            yield _verify_conda(artifact)
    elif kind.contents_check == "tarball-sbom" and record.path.endswith(".tar.gz"):
        yield check_mobile_sbom(artifact, record.version)
    elif kind.contents_check == "labelled-sbom":
        yield _verify_image_sbom(dist, record)
    elif kind.contents_check == "source-sbom":
        yield _verify_sdist_sbom(dist, record, artifact)


def _engine_image_id(tag: str) -> str | None:
    """The id (config digest, hex) of the image the local engine holds under `tag`, or None."""
    from shipyard.errors import ToolError

    try:
        labels = docker_base.image_labels(tag)
        return docker_base.image_id(tag).removeprefix("sha256:") if labels is not None else None
    except (ToolError, FileNotFoundError):
        return None


def _verify_image_sbom(dist: Path, record: ArtifactRecord) -> CheckResult:
    """An image's SBOM is the file beside it whose sha256 the image's label names."""
    from shipyard.supply.sbom import SBOM_LABEL

    name = record.name
    relative = record.build.get("sbom")
    if not isinstance(relative, str) or not relative:
        return CheckResult(name, "sbom", False, "no SBOM file recorded or present (none recorded)")
    sbom = recorded_file(dist, record, relative, "build.sbom")
    if not sbom.is_file():
        return CheckResult(name, "sbom", False, f"no SBOM file recorded or present ({relative})")
    digest = sha256_of(sbom)
    labelled = (docker_base.image_labels(name) or {}).get(SBOM_LABEL)
    if labelled != digest:
        return CheckResult(name, "sbom", False, f"{relative} has sha256 {digest[:16]}…, the image's {SBOM_LABEL} "
                                                f"label names {labelled or 'nothing'}")
    return CheckResult(name, "sbom", True, f"{relative} is the SBOM the image's label names")


def _verify_sdist_sbom(dist: Path, record: ArtifactRecord, sdist: Path) -> CheckResult:
    """An sdist's SBOM is the file beside it (build.sbom) that lists each of its files with its sha256."""
    name = record.name
    relative = record.build.get("sbom")
    if not isinstance(relative, str) or not relative:
        return CheckResult(name, "sbom", False, "no SBOM file recorded (build.sbom); rebuild the sdist")
    sbom = recorded_file(dist, record, relative, "build.sbom")
    if not sbom.is_file():
        return CheckResult(name, "sbom", False, f"no SBOM file at {relative}; rebuild the sdist")
    listed = read_sdist_sbom(sbom).built
    with tarfile.open(sdist, "r:gz") as tar:
        held = {path: sha256_hex(data) for path, data in archive_files(tar).items()}
    unlisted = sorted(set(held) - set(listed))
    absent = sorted(set(listed) - set(held))
    changed = sorted(p for p in set(held) & set(listed) if held[p] != listed[p])
    problems = ([f"not in the SBOM: {', '.join(unlisted)}"] if unlisted else []) + \
        ([f"listed but not in the sdist: {', '.join(absent)}"] if absent else []) + \
        ([f"sha256 differs: {', '.join(changed)}"] if changed else [])
    if problems:
        return CheckResult(name, "sbom", False, f"{relative}: " + "; ".join(problems))
    return CheckResult(name, "sbom", True, f"{relative} lists each of its {len(held)} files (sha256)")


def _verify_conda_paths(package: Path) -> CheckResult:
    problems = check_conda_paths(package)
    if problems:
        return CheckResult(package.name, "paths", False, "info/paths.json: " + "; ".join(problems))
    return CheckResult(package.name, "paths", True, "every file matches info/paths.json (sha256 and size)")


def _verify_conda(package: Path) -> CheckResult:
    from rattler.package import IndexJson

    version = str(IndexJson.from_package_archive(package).version)
    listing = read_conda_sbom(package)
    if listing is None:
        return CheckResult(package.name, "sbom", False, f"no CycloneDX SBOM at {CONDA_SBOM}")
    if listing.version != version:
        return CheckResult(package.name, "sbom", False, f"{CONDA_SBOM} describes version {listing.version}, "
                                                        f"the package is {version}")
    return CheckResult(package.name, "sbom", True, f"{CONDA_SBOM} names {listing.subject} {listing.version}")


def _built_problems(listing: SbomListing, binaries: dict[str, bytes], *, vendored: set[str]) -> list[str]:
    """Every binary is listed (vendored, or built with its sha256), and nothing listed is missing."""
    problems = []
    for member in sorted(binaries.keys() - vendored - listing.built.keys()):
        problems.append(f"{member} is vendored but not listed" if member in grafted_members([member])
                        else f"{member} is a shared library or ELF file the SBOM does not list")
    for member in sorted(binaries.keys() & listing.built.keys()):
        if (digest := sha256_hex(binaries[member])) != listing.built[member]:
            problems.append(f"{member} has sha256 {digest[:16]}…, the SBOM names {listing.built[member][:16]}…")
    problems += [f"{m} is listed but not in the artifact" for m in sorted(listing.built.keys() - binaries.keys())]
    return problems


def _verify_wheel(wheel: Path) -> Iterator[CheckResult]:
    name = wheel.name
    try:  # wheel's reader checks every member against RECORD's hash and size
        with WheelFile(wheel) as wf:
            for info in wf.infolist():
                wf.read(info.filename)
    except (WheelError, zipfile.BadZipFile, OSError) as exc:
        yield CheckResult(name, "record", False, f"RECORD does not match the contents: {exc}")
        return
    yield CheckResult(name, "record", True, "every member matches RECORD")
    with zipfile.ZipFile(wheel) as zf:
        listing = read_wheel_sbom(zf)
        binaries = wheel_binaries(zf)
        members = set(zf.namelist())
    if listing is None:
        yield CheckResult(name, "sbom", False, "no CycloneDX SBOM under .dist-info/sboms/ (PEP 770)")
        return
    _, version, _, _ = parse_wheel_filename(name)
    problems = []
    if listing.version != str(version):
        problems.append(f"it describes version {listing.version}, the wheel is {version}")
    listed = set(listing.vendored)
    problems += _built_problems(listing, binaries, vendored=listed)
    problems += [f"{m} is listed but not in the wheel" for m in sorted(listed - members)]
    if problems:
        yield CheckResult(name, "sbom", False, f"{listing.member}: " + "; ".join(problems))
    else:
        libs = ", ".join(sorted(listing.vendored.values())) or "no vendored libraries"
        yield CheckResult(name, "sbom", True, f"lists every binary: {len(listing.built)} built, vendored: {libs}")


def check_mobile_sbom(tarball: Path, version: str) -> CheckResult:
    """A mobile tarball's SBOM names this version, lists each binary in it with its sha256 and
    exactly the libraries they link from outside it."""
    import tarfile

    with tarfile.open(tarball, "r:gz") as tar:
        files = archive_files(tar)
    listing = read_mobile_sbom(files, tarball)
    if listing is None:
        return CheckResult(tarball.name, "sbom", False, f"no CycloneDX SBOM at <top folder>/{MOBILE_SBOM}")
    binaries = {path: data for path, data in files.items() if is_binary(path, data)}
    problems = [f"it describes version {listing.version}, the tarball is {version}"] if listing.version != version \
        else []
    problems += _built_problems(listing, binaries, vendored=set())
    needed = set(linked_from_outside(binaries))
    problems += [f"{lib} is linked but not listed" for lib in sorted(needed - listing.linked.keys())]
    problems += [f"{lib} is listed as linked but nothing links it" for lib in sorted(listing.linked.keys() - needed)]
    if problems:
        return CheckResult(tarball.name, "sbom", False, f"{MOBILE_SBOM}: " + "; ".join(problems))
    return CheckResult(tarball.name, "sbom", True, f"lists {len(binaries)} binaries and what they link: "
                                                   + (", ".join(sorted(listing.linked)) or "nothing"))
