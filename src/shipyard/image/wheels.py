"""The release wheels an image installs: found through dist/manifest.json, their bytes checked
against the sha256 it records, and staged as a small PEP 503 index for pip to install by name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from shipyard.errors import CheckFailed
from shipyard.plumbing.input_files import input_error
from shipyard.plumbing.wheel_metadata import wheel_metadata
from shipyard.record.manifest import ArtifactRecord, artifact_file, release_manifest
from shipyard.release.spec import Spec, Variant
from shipyard.wheel.index import add_wheel, write_index


@dataclass(frozen=True)
class ReleaseWheel:
    """One wheel of the release, as the manifest records it and as it sits in the variant index."""

    component: str
    path: Path
    record: ArtifactRecord

    @property
    def project(self) -> str:
        return canonicalize_name(self.record.name.split("-")[0])

    @property
    def requirement(self) -> str:
        """What pip is asked for: the project at exactly the released version (local label included)."""
        version = self.record.name.split("-")[1]
        return f"{self.project}=={version}"


def release_wheels(spec: Spec, variant: Variant, dist: Path, *, allow_untested: bool = False) -> list[ReleaseWheel]:
    """The image's wheels for `variant` and the images' Python, verified against the manifest.

    Refuses a wheel that is missing, whose bytes differ from the manifest's sha256, whose tests
    failed, or (unless `allow_untested`) that was never tested; each message names the fix."""
    images = spec.release.images
    assert images is not None
    manifest_path = dist / "manifest.json"
    build = f"shipyard build --variant {variant.name} --python {images.python}"
    manifest = release_manifest(manifest_path, spec.release, f"build the wheels first: {build}")
    wanted_python = images.python
    out = []
    for component in images.components:
        record = next((a for a in manifest.artifacts if a.component == component and a.package_type == "wheel"
                       and (a.platform == "any" or (a.variant == variant.name and a.python == wanted_python
                                                    and a.platform == images.platform))), None)
        if record is None:
            raise input_error(manifest_path, "artifacts", f"no {component} wheel of variant {variant.name} for "
                              f"Python {wanted_python} ({images.platform})", f"build it: {build}")
        path = _index_file(dist / "whl" / variant.tag / canonicalize_name(component) / record.name, record,
                           f"the {component} wheel the manifest records is not in the {variant.tag} index",
                           manifest_path, build)
        tests = record.tests
        if tests is not None and tests.get("result") != "passed":
            raise CheckFailed(f"{manifest_path}: {record.cell_id}: its tests failed "
                              f"({'; '.join(tests.get('problems') or []) or 'see the build report'}); "
                              "an image ships only tested wheels")
        if tests is None and not allow_untested:
            raise CheckFailed(f"{manifest_path}: {record.cell_id} was not tested (--no-tests, or outside "
                              f"--test-python); an image ships tested wheels: {build} (or pass --allow-untested)")
        out.append(ReleaseWheel(component, path, record))
    return out


def _index_file(path: Path, record: ArtifactRecord, absent: str, manifest_path: Path, build: str) -> Path:
    return artifact_file(
        path, record, missing=lambda: input_error(path, "(file)", absent, f"rebuild it: {build}"),
        changed=lambda actual: CheckFailed(
            f"{path}: sha256 {actual} differs from {record.sha256} in {manifest_path}; the index no "
            f"longer holds the bytes that were built and tested. Rebuild: {build}"))


def stage_index(wheels: list[ReleaseWheel], dest: Path) -> None:
    """A PEP 503 index of exactly these wheels at `dest` (the image's build context)."""
    for wheel in wheels:
        add_wheel(wheel.path, dest)
    write_index(dest)


def licenses(wheels: list[ReleaseWheel]) -> str:
    """The SPDX expression of what the wheels declare (License-Expression, else License)."""
    found: list[str] = []
    for wheel in wheels:
        meta = wheel_metadata(wheel.path)
        value = meta.get("License-Expression") or meta.get("License") or "NOASSERTION"
        if value not in found:
            found.append(value)
    return " AND ".join(found)
