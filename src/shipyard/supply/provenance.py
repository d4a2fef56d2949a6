"""Provenance: an in-toto Statement v1 with a SLSA Provenance v1 predicate for each artifact of
dist/manifest.json, signed offline as a DSSE envelope with the Ed25519 key release.yaml names.

The envelope of a cell lives at `dist/provenance/<cell id>.intoto.jsonl` (one JSON line, as the
SLSA GitHub generator writes them) and the manifest records that path: `manifest merge` carries
it like any other file of a fragment. On GitHub Actions the same statement would be signed
keylessly with Sigstore (the job's OIDC identity, Fulcio certificate, Rekor entry); that path is
described in docs/supply-chain.md and was not run here: this machine reaches neither Fulcio nor Rekor.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, StrictStr
from securesystemslib.dsse import Envelope
from securesystemslib.signer import Signer

from shipyard.errors import InputError
from shipyard.host.source_tree import git_info
from shipyard.plumbing.hashing import sha256_of
from shipyard.plumbing.input_files import input_error, parse_json_input, read_json_input, validated
from shipyard.record.manifest import ArtifactRecord, Manifest, merge_artifacts, recorded_file, release_manifest
from shipyard.release.spec import Spec

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
BUILD_TYPE = "https://github.com/ember-ml/shipyard/buildtypes/cell/v1"
PROVENANCE_DIR = "provenance"


@dataclass(frozen=True)
class BuildDefinition:
    """What every statement of one signing run shares."""

    release_yaml_sha256: str
    git_sha: str
    source: str  # the repository URL the git sha belongs to
    builder_id: str


def envelope_path(dist: Path, record: ArtifactRecord) -> Path:
    """Where the envelope of `record` is written: `dist/provenance/<cell id>.intoto.jsonl`, refused
    (InputError) when a symlink on the way leads out of dist/ (attest writes only under dist/)."""
    return recorded_file(dist, record, f"{PROVENANCE_DIR}/{record.cell_id}.intoto.jsonl", "provenance")


def subject_digest(dist: Path, record: ArtifactRecord) -> str:
    """The sha256 a statement names: of the file, or an image's id (its config digest)."""
    return sha256_of(recorded_file(dist, record, record.path, "path")) if record.path else record.sha256


# What to do about an envelope that cannot be read: `shipyard attest` writes every one again.
ENVELOPE_FIX = "sign the artifacts again: shipyard attest"


class _EnvelopeSignature(BaseModel):
    keyid: StrictStr
    sig: StrictStr


class _EnvelopeShape(BaseModel):
    """What a DSSE envelope must hold before securesystemslib reads it: it takes a list for
    payloadType or None for a keyid, and verifying such an envelope then crashes."""

    payload: StrictStr
    payloadType: StrictStr  # noqa: N815 - DSSE's own name
    signatures: list[_EnvelopeSignature]


def read_envelope(path: Path) -> Envelope:
    """The DSSE envelope in `path`; InputError (one line, exit 2) when it is missing or not one."""
    data = read_json_input(path, limit="envelope", missing_fix=ENVELOPE_FIX, restore_fix=ENVELOPE_FIX)
    validated(_EnvelopeShape, data, path, fix=ENVELOPE_FIX)
    try:
        return Envelope.from_dict(data)
    except (ValueError, KeyError, TypeError, AttributeError):
        raise input_error(path, "(top level)", "not a DSSE envelope (payload in base64, payloadType, signatures "
                                               "with keyid and sig)", ENVELOPE_FIX) from None


def envelope_statement(envelope: Envelope, path: Path) -> dict[str, Any]:
    """The statement an envelope (read from `path`) carries, with its subjects readable."""
    try:
        text = envelope.payload.decode("utf-8")
    except UnicodeDecodeError:
        raise input_error(path, "payload", "is not UTF-8 text", ENVELOPE_FIX) from None
    data = parse_json_input(text, path, restore_fix=ENVELOPE_FIX)
    try:
        statement_subjects(data)
    except (KeyError, TypeError, AttributeError):
        raise input_error(path, "payload.subject", "not a list of subjects, each with a name and a sha256 digest",
                          ENVELOPE_FIX) from None
    return dict(data)


def statement_subjects(data: dict[str, Any]) -> dict[str, str | None]:
    """What a statement signs: each subject's name and the sha256 it names."""
    return {s["name"]: s["digest"].get("sha256") for s in data.get("subject", [])}


def statement(record: ArtifactRecord, digest: str, definition: BuildDefinition) -> dict[str, Any]:
    """The in-toto Statement v1 (SLSA Provenance v1 predicate) of one artifact."""
    git_sha = str(record.build.get("git_sha") or definition.git_sha)
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": record.name, "digest": {"sha256": digest}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {
                    "release": {"path": "release.yaml", "digest": {"sha256": definition.release_yaml_sha256}},
                    "cell": record.cell_id, "component": record.component, "package_type": record.package_type,
                    "variant": record.variant, "platform": record.platform, "python": record.python,
                    "version": record.version,
                },
                "internalParameters": {"toolchain": record.build.get("toolchain"),
                                       "cache_key": record.build.get("cache_key")},
                "resolvedDependencies": [{"uri": f"git+{definition.source}@{git_sha}",
                                          "digest": {"gitCommit": git_sha}}],
            },
            "runDetails": {"builder": {"id": definition.builder_id}},
        },
    }


def sign_statement(data: dict[str, Any], signer: Signer) -> bytes:
    """The DSSE envelope of a statement as one JSON line."""
    envelope = Envelope(json.dumps(data, sort_keys=True, separators=(",", ":")).encode(), PAYLOAD_TYPE, {})
    envelope.sign(signer)
    return (json.dumps(envelope.to_dict(), sort_keys=True) + "\n").encode()


def build_definition(spec: Spec) -> BuildDefinition:
    settings = spec.release.supply_chain
    assert settings is not None
    source = spec.release.images.source if spec.release.images else spec.root.resolve().as_uri()
    return BuildDefinition(release_yaml_sha256=sha256_of(spec.root / "release.yaml"),
                           git_sha=git_info(spec.root).sha, source=source, builder_id=settings.builder_id)


@dataclass(frozen=True)
class AttestReport:
    signed: int
    kept: int  # already signed for the same bytes
    key: str  # where the key came from (a path or $NAME)
    refused: tuple[str, ...] = ()  # artifacts left unsigned: missing, or not the bytes the manifest records


def attest_manifest(spec: Spec, dist: Path, signer: Signer, key_source: str, *,
                    keep_signed: bool = False) -> AttestReport:
    """Sign a provenance statement for every artifact in `dist/manifest.json` that has none for its
    current bytes; record each envelope's path in the manifest.

    With `keep_signed` (what a build does at its end), an envelope already there whose statement
    names the file's current sha256 is kept whoever signed it: a CI job that merged another job's
    fragment into its dist/ does not re-sign, and so re-upload under the same name, what it did
    not build. `shipyard attest` re-signs everything with the current key."""
    manifest: Manifest = release_manifest(dist / "manifest.json", spec.release, "build first, or pass --dist")
    for record in manifest.artifacts:  # a path out of dist/ stops the run before anything is signed or written
        envelope_path(dist, record)
        for key, relative in (("path", record.path), ("provenance", record.provenance)):
            if relative:
                recorded_file(dist, record, relative, key)
    definition = build_definition(spec)
    updated, kept, refused = [], 0, []
    for record in manifest.artifacts:
        # Never sign what the manifest does not describe: such an artifact stays unsigned, and verify says so.
        if record.path and not recorded_file(dist, record, record.path, "path").is_file():
            refused.append(f"{dist / record.path}: recorded in the manifest (cell {record.cell_id}) but missing; "
                           f"rebuild it")
            continue
        digest = subject_digest(dist, record)
        if digest != record.sha256:
            refused.append(f"{record.name}: its sha256 is {digest} but the manifest records {record.sha256}; "
                           f"the file changed after it was recorded: rebuild it")
            continue
        path = envelope_path(dist, record)
        if keep_signed and record.provenance and path.is_file() and _signed_digest(path, record.name) == digest:
            kept += 1
            continue
        data = statement(record, digest, definition)
        envelope = sign_statement(data, signer)
        # Ed25519 signatures are deterministic: the same statement and key give the same bytes.
        if path.is_file() and path.read_bytes() == envelope and record.provenance:
            kept += 1
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(envelope)
        updated.append(record.model_copy(update={"provenance": path.relative_to(dist).as_posix()}))
    if updated:
        merge_artifacts(dist / "manifest.json", release=manifest.release, version=manifest.version,
                        records=updated)
    return AttestReport(signed=len(updated), kept=kept, key=key_source, refused=tuple(refused))


def _signed_digest(envelope: Path, name: str) -> str | None:
    """The sha256 the envelope's statement names for `name`; None when it cannot be read as one."""
    try:
        return statement_subjects(envelope_statement(read_envelope(envelope), envelope)).get(name)
    except InputError:
        return None  # re-signed


def sign_dist(spec: Spec, dist: Path, *, keep_signed: bool = False) -> AttestReport | None:
    """Sign every artifact of `dist` with release.yaml's key; None when the release names no
    supply_chain. A missing key raises SigningKeyError with the fix."""
    from shipyard.supply.keys import load_signer

    if spec.release.supply_chain is None:
        return None
    signer, source = load_signer(spec.release.supply_chain, spec.root)
    return attest_manifest(spec, dist, signer, source, keep_signed=keep_signed)
