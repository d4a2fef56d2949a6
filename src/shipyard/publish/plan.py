"""What a publish sends where: the manifest's artifacts, gated for the channel, as files per
index of each target.

- Gating is record/gate.py's: what it does not allow never reaches these lists on a `gate:
  block` channel.
- Indexes: a native wheel goes to its variant's index (cpu, cu118); a pure wheel to every
  variant index of the run (PyTorch publishes its pure packages in each); with the PyPI flavour,
  the default variant's wheels and the pure ones also to the plain index ("pypi"), native ones
  rewritten under the plain version. An sdist goes into each index its wheels go to (with the PyPI
  flavour, the plain one too; it has no local version to rewrite). A conda package goes to the
  channel ("conda"), an image to the registry ("image").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)

from shipyard.errors import PublishError
from shipyard.plumbing.confined_paths import confined
from shipyard.plumbing.hashing import sha256_of
from shipyard.publish.plain_version import plain_version_wheel
from shipyard.publish.variants import RECORD_FILE, RECORD_FIX, VARIANTS_INDEX, read_variant_record
from shipyard.record.manifest import ArtifactRecord, artifact_file, recorded_file
from shipyard.release.destinations import S3_CONDA_ROUTE, PublishTarget
from shipyard.release.kinds import SDIST, kinds_taken_by
from shipyard.wheel.index import version_in_wheel_name

PLAIN_INDEX = "pypi"  # the index of the PyPI flavour: plain versions, as PyPI holds them


@dataclass(frozen=True)
class PublishFile:
    """One file bound for one index of a target."""

    index: str  # cpu, cu118, pypi (the plain index), conda, image
    filename: str
    path: Path
    sha256: str
    project: str  # the project or package name readers look it up by
    version: str
    artifact: str  # the manifest artifact it comes from (its own name, or the one it was rewritten from)


def local_file(dist: Path, artifact: ArtifactRecord) -> Path:
    """The artifact's file, checked against the manifest's sha256 (a publish sends what was tested)."""
    path = recorded_file(dist, artifact, artifact.path, "path")  # never a file from outside dist/
    return artifact_file(
        path, artifact,
        missing=lambda: PublishError(f"{dist / 'manifest.json'}: artifact {artifact.name}: {path} does not exist; "
                                     f"build it again (or publish from the dist folder that holds it)"),
        changed=lambda digest: PublishError(
            f"{path}: sha256 {digest} is not the manifest's {artifact.sha256} for {artifact.name}; "
            f"the file changed after it was tested: rebuild, do not publish it"))


def files_for(target: PublishTarget, artifacts: Sequence[ArtifactRecord], dist: Path,
              derived: Path, release_tags: Sequence[str] = ()) -> list[PublishFile]:
    """Every file `target` receives for these artifacts; `derived` holds the PyPI flavour's rewrites."""
    wanted = kinds_taken_by(target.route)
    mine = [a for a in artifacts if a.package_type in wanted]
    # An sdist goes beside the wheels, into each index they go to (it has no local version).
    sdists = [a for a in mine if a.package_type == SDIST.name]
    mine = [a for a in mine if a.package_type != SDIST.name]
    if target.kind == "static":  # PyTorch's layout, and the PEP 825 variants index beside it
        return _wheel_files(target, mine, dist, derived, release_tags) + _variant_files(dist, mine)
    if target.route in ("devpi", "s3"):  # s3: the static tree's layout, without the variants index yet
        wheels = _wheel_files(target, mine, dist, derived, release_tags)
        indexes = sorted({f.index for f in wheels}) or [PLAIN_INDEX]
        return wheels + _sdist_files(sdists, dist, indexes)
    if target.kind == "pypi":  # one index, as PyPI is: the plain versions only
        return ([f for f in _wheel_files(target, mine, dist, derived, release_tags) if f.index == PLAIN_INDEX]
                + _sdist_files(sdists, dist, [PLAIN_INDEX]))
    if target.route in ("conda", S3_CONDA_ROUTE):
        # name-version-build.conda: the package name is what a channel lists it under.
        return [PublishFile("conda", a.name, local_file(dist, a), a.sha256, a.name.rsplit("-", 2)[0], a.version,
                            a.name) for a in mine]
    # An image (package type docker) is no file: its name is its version tag (ember:1.7.0-cpu-runtime),
    # its sha256 the image id, and the registry target pushes it from the docker engine by that id.
    return [PublishFile("image", a.name, dist, a.sha256, a.name.split(":", 1)[0], a.version, a.name) for a in mine]


def _wheel_files(target: PublishTarget, wheels: list[ArtifactRecord], dist: Path, derived: Path,
                 release_tags: Sequence[str]) -> list[PublishFile]:
    """The wheels into their variant's index; a pure wheel into each variant index of the native
    wheels beside it (what its tests ran against), or, in a release of pure packages only, of
    every variant `release_tags` names."""
    pure = [a for a in wheels if a.variant_tag == "any"]
    native = [a for a in wheels if a.variant_tag != "any"]
    tags = sorted({a.variant_tag for a in native}) or (sorted(set(release_tags)) if pure else [])
    if not tags and pure:
        raise PublishError(f"{dist / 'manifest.json'}: only pure wheels and no variant to put them beside; build a "
                           f"variant's wheels too (shipyard build --variant cpu)")
    out: list[PublishFile] = []
    for artifact in native:
        out.append(_wheel(artifact.variant_tag, local_file(dist, artifact), artifact))
    for artifact in pure:
        path = local_file(dist, artifact)
        out.extend(_wheel(tag, path, artifact) for tag in tags)
    if target.default_variant:
        for artifact in pure + [a for a in native if a.variant == target.default_variant]:
            plain = plain_version_wheel(local_file(dist, artifact), derived)
            rewritten = plain.name != artifact.name  # its sha256 is the rewrite's, not the manifest's
            out.append(_wheel(PLAIN_INDEX, plain, artifact, sha256=None if rewritten else artifact.sha256))
    return out


def _variant_files(dist: Path, wheels: list[ArtifactRecord]) -> list[PublishFile]:
    """The variants index's wheels (`shipyard variants`, recorded in dist/variant-wheels.json) made
    from these artifacts, for the `variants` index of a static tree. An upload API (devpi, PyPI)
    takes no variant file name today. The *-variants.json files are derived from the wheels like the
    index pages are, and written where the index is (publish/static_tree.py)."""
    record = read_variant_record(dist)
    if record is None:
        return []
    sources = {a.name: a.sha256 for a in wheels}
    out = []
    for f in record.files:
        if f.source is None or f.source.name not in sources:
            continue  # the variants.json files, and repacks of artifacts this publish does not send
        path = confined(dist, f.path, file=dist / RECORD_FILE, key=f"files.{f.name}.path", fix=RECORD_FIX)
        if f.source.sha256 != sources[f.source.name] or not path.is_file() or sha256_of(path) != f.sha256:
            raise PublishError(f"{dist / RECORD_FILE}: {f.name}: made from another build of {f.source.name}, or "
                               f"changed since; run `shipyard variants` again, then publish")
        out.append(PublishFile(VARIANTS_INDEX, f.name, path, f.sha256, canonicalize_name(f.name.split("-", 1)[0]),
                               version_in_wheel_name(f.name), f.source.name))
    return out


def distribution_version(filename: str) -> str | None:
    """The version a wheel's or an sdist's file name carries; None for a file that is neither (an
    .asc, an egg: not a distribution shipyard publishes)."""
    try:
        if filename.endswith(".whl"):
            return str(parse_wheel_filename(filename)[1])
        return str(parse_sdist_filename(filename)[1])
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None


def _sdist_files(sdists: list[ArtifactRecord], dist: Path, indexes: list[str]) -> list[PublishFile]:
    out = []
    for artifact in sdists:
        path = local_file(dist, artifact)
        name, version = parse_sdist_filename(path.name)
        out += [PublishFile(index, path.name, path, artifact.sha256, canonicalize_name(name), str(version),
                            artifact.name) for index in indexes]
    return out


def _wheel(index: str, path: Path, artifact: ArtifactRecord, sha256: str | None = "") -> PublishFile:
    name, version, _, _ = parse_wheel_filename(path.name)
    digest = artifact.sha256 if sha256 == "" else (sha256 or sha256_of(path))
    return PublishFile(index, path.name, path, digest, canonicalize_name(name), str(version), artifact.name)
