"""dist/manifest.json: every artifact with its cell, hashes, features and test results.

The one record between build, test and publish: build writes it, later stages read it.
Runs of different variants merge into the same file; writes are atomic and locked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, StrictInt, ValidationInfo, field_validator, model_validator

from shipyard.plumbing.atomic_files import write_atomic
from shipyard.plumbing.confined_paths import check_relative_path, confined
from shipyard.plumbing.file_lock import exclusive
from shipyard.plumbing.hashing import sha256_of
from shipyard.plumbing.identifiers import Name, file_name_problem, image_reference_problem
from shipyard.plumbing.input_files import input_error, read_json_input, validated
from shipyard.release.kinds import WHEEL, kind_of

if TYPE_CHECKING:
    from shipyard.release.cuda_archs import DeviceCode
    from shipyard.release.matrix import Cell
    from shipyard.release.spec import Release, Variant

SCHEMA_VERSION = 1
_WHEEL_TAG = re.compile(r"[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*")  # one compressed tag set of a wheel's name


def _arch_order(name: str) -> tuple[int, str]:
    # 'sm_90a' -> (90, 'a'): numeric, so sm_100 sorts after sm_90 (a string sort puts it first).
    match = re.fullmatch(r"[a-z]+_(\d+)([a-z]*)", name)
    return (int(match.group(1)), match.group(2)) if match else (-1, name)


class CudaArchs(BaseModel):
    """The device code a CUDA artifact's binaries really hold, as the arch check read it (never
    release.yaml's declared list): SASS `("sm_70", "sm_80")` and PTX `("compute_90",)`, numerically
    sorted.

    A wheel (or package, or image) with several kernel-bearing binaries records what EVERY one of
    them carries, the intersection per SASS arch and per PTX arch: a GPU runs the artifact only if
    it runs each binary, so an arch only some binaries carry is no "runs on" fact. The arch check
    fails a build whose binaries disagree with the list anyway; this record stays honest when they
    agree with each other less than with it.
    """

    model_config = ConfigDict(frozen=True)
    sass: tuple[str, ...]
    ptx: tuple[str, ...]

    @field_validator("sass", "ptx")
    @classmethod
    def _numeric_order(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(sorted(set(names), key=_arch_order))

    @classmethod
    def common_to(cls, binaries: Iterable[DeviceCode]) -> CudaArchs | None:
        """What every one of `binaries` (the kernel-bearing ones: those with device code) carries;
        None when there is none (a CPU or pure artifact). cuobjdump names PTX by its sm_ arch: it
        is recorded as the virtual arch it is (`compute_90`)."""
        codes = [code for code in binaries if code]
        if not codes:
            return None
        sass = frozenset.intersection(*(code.sass for code in codes))
        ptx = frozenset.intersection(*(code.ptx for code in codes))
        return cls(sass=tuple(sass), ptx=tuple(re.sub(r"^sm_", "compute_", p) for p in ptx))

    @classmethod
    def common_to_artifacts(cls, found: Iterable[CudaArchs | None]) -> CudaArchs | None:
        """What every one of several artifacts with kernels carries (an image's CUDA wheels: the
        image runs on a GPU only if each of them does); None when none of them has kernels."""
        known = [archs for archs in found if archs is not None]
        if not known:
            return None
        return cls(sass=tuple(frozenset.intersection(*(frozenset(a.sass) for a in known))),
                   ptx=tuple(frozenset.intersection(*(frozenset(a.ptx) for a in known))))

    def to_json(self) -> dict[str, list[str]]:
        """`{"sass": [...], "ptx": [...]}`: the shape every artifact's metadata carries it in."""
        return {"sass": list(self.sass), "ptx": list(self.ptx)}


def pep440_version(version: str) -> str:
    """`version` when it is one (PEP 440); every stage compares and orders versions (channels, the
    gate, merges, promotion)."""
    try:
        Version(version)
    except InvalidVersion:
        raise ValueError("not a version (PEP 440, e.g. 1.7.0 or 1.7.0.dev20261205)") from None
    return version


class FeatureRecord(BaseModel):
    model_config = ConfigDict(frozen=True)
    id: str
    title: str
    status: str


class CellRecord(BaseModel):
    """The cell a record stands for: its identity in the matrix (matrix.Cell). Every field is an
    identifier (plumbing/identifiers.py): a cell id names the provenance envelope's file."""

    model_config = ConfigDict(frozen=True)
    cell_id: Name
    component: Name
    package_type: Name
    variant: Name
    variant_tag: Name
    platform: Name
    python: Name | None

    @staticmethod
    def identity(cell: Cell) -> dict[str, Any]:
        """The identity fields of `cell`, to build a record with (`ArtifactRecord(**identity, …)`)."""
        return {"cell_id": cell.id, "component": cell.component, "package_type": cell.package_type,
                "variant": cell.variant, "variant_tag": cell.variant_tag, "platform": cell.platform,
                "python": cell.python}


class ArtifactRecord(CellRecord):
    name: str  # file name
    path: str  # relative to the dist folder
    sha256: str
    size: StrictInt  # strict: a manifest's `true` or "12" is damage, not a size
    version: str
    features: tuple[FeatureRecord, ...]
    tests: dict[str, Any] | None  # testing.TestRun.to_json(), None when not tested
    build: dict[str, Any]  # cache key, cached or not, seconds, git sha
    # The signed provenance (DSSE envelope), relative to the dist folder (shipyard.supply.provenance).
    provenance: str | None = None
    # The device code the artifact's binaries verifiably carry; None for CPU and pure artifacts
    # (and in manifests written before it was recorded).
    cuda_archs: CudaArchs | None = None
    # The cells whose tests prove this artifact when it has none of its own (record/gate.py): an
    # image's wheels, the conda core package's and the mutex's dependent packages. Empty: itself.
    proven_by: tuple[str, ...] = ()
    # An abi3 wheel's (one wheel for every Python; `python` is the one that built it): the Pythons
    # its tests ran on, `tests` their one verdict (tests.pythons: each one's result). Empty for
    # every other artifact, whose tests ran on its own `python`.
    tested_pythons: tuple[str, ...] = ()

    @field_validator("tests")
    @classmethod
    def _tests_shape(cls, tests: dict[str, Any] | None) -> dict[str, Any] | None:
        # What the report, the notes and the gate read from a test run: each feature's result is a mapping.
        features = (tests or {}).get("features", {})
        if not isinstance(features, dict) or not all(isinstance(f, dict) for f in features.values()):
            raise ValueError("tests.features must map each feature id to its result (a mapping)")
        if not isinstance((tests or {}).get("problems", []), list):
            raise ValueError("tests.problems must be a list")
        for feature, result in features.items():
            for key in _COUNTS:
                if key in result and (not isinstance(result[key], int) or isinstance(result[key], bool)):
                    raise ValueError(f"features.{feature}.{key} must be a whole number")
            for key in _WORDS:
                if key in result and not isinstance(result[key], str | None):
                    raise ValueError(f"features.{feature}.{key} must be text")
            for key in _REASONS:
                if key in result and not (isinstance(result[key], list)
                                          and all(isinstance(r, str) for r in result[key])):
                    raise ValueError(f"features.{feature}.{key} must be a list of text")
        return tests

    @field_validator("version")
    @classmethod
    def _pep440(cls, version: str) -> str:
        return pep440_version(version)

    @field_validator("sha256")
    @classmethod
    def _digest(cls, digest: str) -> str:
        # Compared with what a file hashes to, and shown in the messages that compare them.
        if not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise ValueError("not a sha256 digest (64 lowercase hex digits)")
        return digest

    @field_validator("path", "provenance")
    @classmethod
    def _inside_dist(cls, path: str | None) -> str | None:
        # Joined onto dist/ (or a fragment) and then read, signed, copied or published: a path that
        # leads elsewhere would hand a command a file it was never given.
        return path and check_relative_path(path)

    @field_validator("name")
    @classmethod
    def _one_file_or_image(cls, name: str, info: ValidationInfo) -> str:
        # The name becomes a file name in an index or a channel; an image is named by its reference.
        image = kind_of(info.data.get("package_type")).is_image
        problem = image_reference_problem(name) if image else file_name_problem(name)
        if problem:
            raise ValueError(problem)
        return name

    @model_validator(mode="after")
    def _wheel_name(self) -> ArtifactRecord:
        # Publish, variants and verify read a wheel's name, version and tags from its file name.
        if self.package_type == WHEEL.name:
            try:
                parse_wheel_filename(self.name)
            except InvalidWheelFilename:
                good = False
            else:  # packaging reads the tags without checking their letters; the variants' names add to them
                good = all(_WHEEL_TAG.fullmatch(tag) for tag in self.name.removesuffix(".whl").split("-")[-3:])
            if not good:
                raise ValueError(f"name {self.name[:80]!r} is not a wheel file name "
                                 f"(name-version-python-abi-platform.whl, each tag letters, digits, '_' and '.')")
        return self


# What the report and the notes read of each feature's result (testing.TestRun.to_json()).
_COUNTS = ("passed", "failed", "skipped", "not_run")
_WORDS = ("status", "result", "summary")
_REASONS = ("skip_reasons", "not_run_reasons")


class NotApplicableRecord(CellRecord):
    """A cell its own project rules out (requires-python): no artifact, never a failure."""

    result: str = "not applicable"
    reason: str  # e.g. "requires-python >=3.11"


class Manifest(BaseModel):
    model_config = ConfigDict(frozen=True)
    schema_version: StrictInt = SCHEMA_VERSION  # strict: `true` is not version 1
    release: str
    version: str
    # Required: every manifest shipyard writes has it, and a misspelled key must not read as a
    # release with nothing in it (verify said "no artifacts to verify"; found by the fuzzer).
    artifacts: tuple[ArtifactRecord, ...]
    not_applicable: tuple[NotApplicableRecord, ...] = ()

    @field_validator("version")
    @classmethod
    def _pep440(cls, version: str) -> str:
        return pep440_version(version)

    def by_cell(self) -> dict[str, ArtifactRecord]:
        return {a.cell_id: a for a in self.artifacts}


# What to do about a manifest that cannot be read: it is written by a build and by a merge only.
MANIFEST_FIX = ("a shipyard manifest is written by a build: delete it and build again (nox -s build-cpu), or merge "
                "the jobs' fragments (shipyard manifest merge)")


def read_manifest(path: Path) -> Manifest | None:
    """The manifest at `path`, None when there is none; InputError (one line, exit 2) naming the
    file and the first bad key when it is not one."""
    if not path.exists():
        return None
    data = read_json_input(path, limit="manifest", missing_fix=MANIFEST_FIX, restore_fix=MANIFEST_FIX,
                           folder_fix="pass --dist with the folder that holds manifest.json")
    return validated(Manifest, data, path, fix=MANIFEST_FIX)


def check_release_names(manifest: Manifest, path: Path, *, platforms: Iterable[str],
                        variants: Mapping[str, Variant]) -> Manifest:
    """`manifest` once each of its records names a platform (or mobile target) and a variant of
    the release it is read against ('any' for a pure one); else InputError naming the record's key.
    A record of platform 'atlantis' is no cell of this release: the report would show it passed
    in a column of its own, and the gate would judge a cell nobody declared."""
    known = {"platform": {*platforms, "any"}, "variant": {*variants, "any"}}
    tags = {name: variant.tag for name, variant in variants.items()}
    for group, records in (("artifacts", manifest.artifacts), ("not_applicable", manifest.not_applicable)):
        for number, record in enumerate(records):
            for key, allowed in known.items():
                value = getattr(record, key)
                if value not in allowed:
                    raise input_error(path, f"{group}.{number}.{key}", f"is no {key} of release.yaml "
                                      f"({', '.join(sorted(allowed))})", "this manifest belongs to another release, "
                                      "or a record was edited: " + MANIFEST_FIX, value=value)
            tag = tags.get(record.variant)
            if tag is not None and record.variant_tag != tag:  # indexes and file names are built from it
                raise input_error(path, f"{group}.{number}.variant_tag", f"is not variant {record.variant}'s tag "
                                  f"({tag})", "this manifest belongs to another release, or a record was edited: "
                                  + MANIFEST_FIX, value=record.variant_tag)
    return manifest


def release_manifest(path: Path, release: Release, missing_fix: str) -> Manifest:
    """The manifest at `path` (require_manifest), each of its records a cell of `release`: the
    reader of every command that looks records up in release.yaml (check_release_names)."""
    return check_release_names(require_manifest(path, missing_fix), path,
                               platforms=[*release.platforms, *release.mobile_targets], variants=release.variants)


def require_manifest(path: Path, missing_fix: str) -> Manifest:
    """The manifest at `path`; InputError (one line, exit 2) when there is none or it is not one."""
    manifest = read_manifest(path)
    if manifest is None:
        raise input_error(path, "(file)", "file not found", missing_fix)
    return manifest


# What to do about a recorded path that leads out of its dist/ folder (through a symlink).
RECORDED_PATH_FIX = ("a manifest records files inside its dist/ folder, never through a symlink out of it: remove the "
                     "symlink and build again, or merge the jobs' fragments again")


def recorded_file(dist: Path, record: ArtifactRecord, relative: str, key: str) -> Path:
    """`dist / relative`, a path `record` holds at `key` (path, provenance, build.sbom), once it
    really lies inside `dist` (plumbing/confined_paths.py); InputError (one line, exit 2) naming
    dist/manifest.json, the record's key and the value otherwise."""
    return confined(dist, relative, file=dist / "manifest.json", key=f"artifacts.{record.cell_id}.{key}",
                    fix=RECORDED_PATH_FIX)


def artifact_file(path: Path, record: ArtifactRecord, *, missing: Callable[[], Exception],
                  changed: Callable[[str], Exception]) -> Path:
    """`path`, the local file of `record`, once it is there and holds the bytes the manifest records
    (what ships is what was built and tested). Else raises `missing()`, or `changed(its sha256)`:
    the caller's error, in the words of its command."""
    if not path.is_file():
        raise missing()
    digest = sha256_of(path)
    if digest != record.sha256:
        raise changed(digest)
    return path


def rebuilt_record(old: ArtifactRecord | None, new: ArtifactRecord) -> ArtifactRecord:
    """The record of a cell that two builds both recorded: `new`. When both are the same bytes and
    neither was tested itself (a package every conda job of a variant builds, e.g. the mutex, is
    proven by the packages that depend on it in each job: `proven_by`), the cells of both that
    prove it: one job's (the pure packages') has none, and a merge keeping only that one would
    leave the package unproven."""
    if old is None or old.sha256 != new.sha256 or old.tests is not None or new.tests is not None:
        return new
    return new.model_copy(update={"proven_by": tuple(sorted({*old.proven_by, *new.proven_by}))})


def merge_artifacts(path: Path, *, release: str, version: str, records: Iterable[ArtifactRecord],
                    not_applicable: Iterable[NotApplicableRecord] = ()) -> Manifest:
    """Replace the records of the same cells, keep every other, write atomically. A cell is either
    an artifact or not applicable: the newer record of a cell replaces the other kind too."""
    with exclusive(path.with_name(f".{path.name}.lock")):
        current = read_manifest(path)
        same = current is not None and current.version == version
        by_cell = current.by_cell() if current and same else {}
        ruled_out = {r.cell_id: r for r in current.not_applicable} if current and same else {}
        for record in records:
            by_cell[record.cell_id] = rebuilt_record(by_cell.get(record.cell_id), record)
            ruled_out.pop(record.cell_id, None)
        for skipped in not_applicable:
            ruled_out[skipped.cell_id] = skipped
            by_cell.pop(skipped.cell_id, None)
        manifest = Manifest(release=release, version=version,
                            artifacts=tuple(by_cell[k] for k in sorted(by_cell)),
                            not_applicable=tuple(ruled_out[k] for k in sorted(ruled_out)))
        write_atomic(path, json.dumps(manifest.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")
        return manifest
