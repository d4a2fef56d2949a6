"""Merge manifest fragments (the dist/ folders of separate build jobs) into one dist/.

Each GitHub job uploads its dist/: its artifacts and a manifest.json recording only them. The
merge checks every recorded file against its record (sha256 and size) before anything is
written, refuses two fragments that disagree about a cell or a file name (a package two jobs
built with the same bytes, such as the conda mutex, is one record proven by the cells of both),
then puts wheels into the variant indexes (and rewrites them), conda packages into the channel
(re-indexed in one step), every other file (mobile archives, sdists, saved images, provenance)
at its own path beside them, and the records into dist/manifest.json, so the merged manifest is
the one record of the release. Merging a fragment twice changes nothing.

How a kind's files enter dist/ (a wheel into its variant's index, a conda package into the
channel) is the kind's own business, on a floor above this one: the caller hands it in, by package
type (`place`; the CLI's `manifest merge` passes wheel/index.place_wheels and
conda/channel.place_packages).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from shipyard.errors import MergeError
from shipyard.plumbing.atomic_files import copy_atomic
from shipyard.plumbing.hashing import sha256_of
from shipyard.plumbing.input_files import input_error
from shipyard.record.manifest import (
    ArtifactRecord,
    NotApplicableRecord,
    merge_artifacts,
    read_manifest,
    rebuilt_record,
    recorded_file,
    require_manifest,
)
from shipyard.release.channel_version import is_version_of
from shipyard.release.kinds import CONDA, WHEEL

# One kind's files from the fragments -> into dist/ (the second argument), indexes rewritten.
PlaceFiles = Callable[[Sequence[Path], Path], None]


@dataclass(frozen=True)
class MergeReport:
    fragments: int
    records: int  # records taken from the fragments (one per cell)
    left_out: tuple[str, ...]  # components whose records the fragments held and `components` left out
    wheels: int
    conda_packages: int
    other_files: int
    total_artifacts: int  # records in the merged manifest


def _fragment_files(fragment: Path, records: Sequence[ArtifactRecord]) -> tuple[list[Path], list[Path], list[Path]]:
    """A fragment's wheels and conda packages (each placed by its kind's function) and every other
    file, recorded or not (a mobile archive, an sdist, a saved image, provenance, SBOMs), copied
    to the same path in dist/."""
    wheels = sorted(fragment.glob("whl/*/*/*.whl"))
    conda = [fragment / r.path for r in records if r.package_type == CONDA.name and r.path]
    other = sorted(p for p in fragment.rglob("*") if p.is_file() and p.name != "manifest.json"
                   and not p.name.startswith(".") and p.relative_to(fragment).parts[0] not in ("whl", "conda"))
    return wheels, conda, other


def _refuse_symlinks(fragment: Path) -> None:
    """InputError (one line, exit 2) naming the first symlink inside `fragment`: a build job uploads
    the files it wrote, and a symlink would carry whatever it points at (/etc/hostname) into dist/."""
    for folder, dirs, files in os.walk(fragment):  # symlinked folders are listed, never entered
        for name in sorted(dirs + files):
            path = Path(folder) / name
            if path.is_symlink():
                raise input_error(path, "(file)", "is a symlink inside a fragment; a fragment holds the files its "
                                  "build job wrote", "copy the job's dist/ folder with its links followed, as "
                                  "upload-artifact does, or rerun the job")


def merge_fragments(fragments: Sequence[Path], dist: Path, *, release: str, version: str,
                    place: Mapping[str, PlaceFiles], components: Collection[str] | None = None) -> MergeReport:
    """Merge the fragment folders into `dist` (see the module docstring); `place` puts the wheels
    and the conda packages into dist/, by package type. With `components`, only their records and
    files are merged: a component tag's run builds what the tagged component depends on too (its
    tests install them), and releases the tagged one alone."""
    if not fragments:
        raise MergeError("no fragments to merge; pass the folders the build jobs uploaded (each holds a "
                         "manifest.json)")
    read_manifest(dist / "manifest.json")  # a damaged manifest in dist/ stops the merge before anything is written
    records: dict[str, tuple[ArtifactRecord, Path]] = {}
    ruled_out: dict[str, NotApplicableRecord] = {}  # cells their projects rule out (requires-python)
    files: dict[str, tuple[Path, str, Path]] = {}  # dist-relative path -> (source, sha256, fragment)
    wheels: list[Path] = []
    conda: list[Path] = []
    other: list[tuple[Path, str]] = []
    built: str | None = None  # the fragments' version: release.yaml's, or one nightly's (the same in every job)
    left_out: set[str] = set()
    for fragment in fragments:
        manifest = require_manifest(fragment / "manifest.json", "a fragment is the dist/ folder a build job "
                                                                "uploaded (fragment-<job id>): pass that folder")
        _refuse_symlinks(fragment)
        if manifest.release != release or not is_version_of(manifest.version, version):
            raise MergeError(f"{fragment / 'manifest.json'}: release {manifest.release} {manifest.version}, but "
                             f"release.yaml is {release} {version}; merge fragments of this release only")
        if built is not None and manifest.version != built:
            raise MergeError(f"{fragment / 'manifest.json'}: version {manifest.version}, but another fragment is "
                             f"{built}; merge the fragments of one build (one commit, one channel) only")
        built = manifest.version
        ruled_out |= {r.cell_id: r for r in manifest.not_applicable
                      if components is None or r.component in components}
        # A left-out record's files (its artifact, its provenance) stay out of dist/ with it.
        dropped = [r for r in manifest.artifacts if components is not None and r.component not in components]
        skipped = {fragment / name for r in dropped for name in (r.path, r.provenance) if name}
        left_out |= {r.component for r in dropped}
        for record in manifest.artifacts:
            if components is not None and record.component not in components:
                continue
            if record.path:
                source = recorded_file(fragment, record, record.path, "path")
                if not source.is_file():
                    raise MergeError(f"{fragment}: the manifest records {record.path} (cell {record.cell_id}) but "
                                     f"the file is not there; upload the whole dist/ folder of the job")
                if source.stat().st_size != record.size or sha256_of(source) != record.sha256:
                    raise MergeError(f"{source}: its bytes are not the ones the manifest records for cell "
                                     f"{record.cell_id} (sha256 {record.sha256[:12]}…); the fragment is damaged: "
                                     f"rerun its job")
            seen = records.get(record.cell_id)
            if seen is not None and seen[0].sha256 != record.sha256:
                raise MergeError(f"cell {record.cell_id}: {seen[1]} and {fragment} hold different artifacts "
                                 f"for it ({seen[0].name} {seen[0].sha256[:12]}…, {record.name} "
                                 f"{record.sha256[:12]}…); one cell must be built by one job only")
            records[record.cell_id] = (rebuilt_record(seen[0] if seen else None, record), fragment)
        fragment_wheels, fragment_conda, fragment_other = _fragment_files(fragment, manifest.artifacts)
        for path in [*fragment_wheels, *fragment_conda, *fragment_other]:
            if path in skipped:
                continue
            rel = path.relative_to(fragment).as_posix()
            digest = sha256_of(path)
            if rel in files and files[rel][1] != digest:
                raise MergeError(f"{rel}: {files[rel][2]} and {fragment} hold different files under this "
                                 f"name; one name must be one artifact: rebuild one of them")
            if rel not in files:
                files[rel] = (path, digest, fragment)
                if path in fragment_wheels:
                    wheels.append(path)
                elif path in fragment_conda:
                    conda.append(path)
                else:
                    other.append((path, rel))
    for rel, (_, digest, fragment) in files.items():
        existing = dist / rel
        if existing.is_file() and sha256_of(existing) != digest:
            raise MergeError(f"{existing}: dist/ already holds other bytes under this name than {fragment}; "
                             f"merge into an empty dist/ or remove the old file")
    for package_type, placed in ((WHEEL.name, wheels), (CONDA.name, conda)):
        if placed:
            place[package_type](placed, dist)
    for source, rel in other:
        copy_atomic(source, dist / rel)
    dist.mkdir(parents=True, exist_ok=True)
    merged = merge_artifacts(dist / "manifest.json", release=release, version=built or version,
                             records=[record for record, _ in records.values()],
                             not_applicable=[r for cell, r in ruled_out.items() if cell not in records])
    return MergeReport(fragments=len(fragments), records=len(records), left_out=tuple(sorted(left_out)),
                       wheels=len(wheels),
                       conda_packages=len(conda), other_files=len(other), total_artifacts=len(merged.artifacts))
