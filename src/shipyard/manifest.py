"""dist/manifest.json: every artifact with its cell, hashes, features and test results.

The one record between build, test and publish: build writes it, later stages read it.
Runs of different variants merge into the same file; writes are atomic and locked.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from shipyard.file_lock import exclusive

SCHEMA_VERSION = 1


class FeatureRecord(BaseModel):
    model_config = ConfigDict(frozen=True)
    id: str
    title: str
    status: str


class ArtifactRecord(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str  # file name
    path: str  # relative to the dist folder
    sha256: str
    size: int
    cell_id: str
    component: str
    package_type: str
    variant: str
    variant_tag: str
    platform: str
    python: str | None
    version: str
    features: tuple[FeatureRecord, ...]
    tests: dict[str, Any] | None  # testing.TestRun.to_json(), None when not tested
    build: dict[str, Any]  # cache key, cached or not, seconds, git sha
    # The signed provenance (DSSE envelope), relative to the dist folder (shipyard.supply.provenance).
    provenance: str | None = None


class Manifest(BaseModel):
    model_config = ConfigDict(frozen=True)
    schema_version: int = SCHEMA_VERSION
    release: str
    version: str
    artifacts: tuple[ArtifactRecord, ...] = ()

    def by_cell(self) -> dict[str, ArtifactRecord]:
        return {a.cell_id: a for a in self.artifacts}


def read_manifest(path: Path) -> Manifest | None:
    if not path.is_file():
        return None
    return Manifest.model_validate_json(path.read_text())


def merge_artifacts(path: Path, *, release: str, version: str, records: Iterable[ArtifactRecord]) -> Manifest:
    """Replace the records of the same cells, keep every other, write atomically."""
    with exclusive(path.with_name(f".{path.name}.lock")):
        current = read_manifest(path)
        by_cell = current.by_cell() if current and current.version == version else {}
        for record in records:
            by_cell[record.cell_id] = record
        manifest = Manifest(release=release, version=version,
                            artifacts=tuple(by_cell[k] for k in sorted(by_cell)))
        fd, tmp = tempfile.mkstemp(prefix=".manifest.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(manifest.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        return manifest
