"""The world the bad-input tests break, one file at a time: a release root (a git repository whose
previous releases are tags holding feature_status.yaml broken each way, a signing key, a signed
dist/, a publish journal), the commands that read its files, and a snapshot to put it back
after each case. project/test_bad_input_files.py breaks it by hand, input_fuzz by hypothesis."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from support.release_copy import SpecCopy
from support.synthetic_release import features, record, write_manifest
from wheel.wheelfile import WheelFile

from shipyard.cli import main
from shipyard.publish.journal import Journal
from shipyard.wheel.repair import source_date_epoch

KEY_FILE = ".shipyard/keys/provenance-ed25519.pem"
PUBLIC_KEY = ".shipyard/keys/provenance-ed25519.pub.pem"
WHEEL = "dist/whl/cpu/ember/ember-1.7.0-py3-none-any.whl"
SBOM_MEMBER = "ember-1.7.0.dist-info/sboms/ember.cdx.json"
GOOD_SBOM = {"metadata": {"component": {"name": "ember", "version": "1.7.0"}}, "components": []}
JOURNAL = ".shipyard/publish/pypi.jsonl"
BINARY = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00"


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def _write_wheel(root: Path, sbom: bytes) -> Path:
    path = root / WHEEL
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    with source_date_epoch(1603800000), WheelFile(path, "w") as wf:
        wf.writestr("ember/__init__.py", "VERSION = '1.7.0'\n")
        wf.writestr("ember-1.7.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: ember\nVersion: 1.7.0\n")
        wf.writestr("ember-1.7.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: shipyard-tests\n"
                                                    "Root-Is-Purelib: true\nTag: py3-none-any\n")
        wf.writestr(SBOM_MEMBER, sbom)
    return path


def signed_dist(root: Path, sbom: bytes) -> None:
    """dist/ with one wheel carrying `sbom`, its manifest and its signed provenance."""
    dist = root / "dist"
    wheel = _write_wheel(root, sbom)
    write_manifest(dist, [record(dist, wheel, component="ember", package_type="wheel", variant="cpu", tag="cpu",
                                 tests=features())])
    assert main(["--root", str(root), "attest", "--dist", str(dist)]) == 0


def build_world(folder: Path) -> Path:
    """A release root in `folder` (git repository, signing key, a signed dist/, a publish journal),
    whose previous releases are tags holding feature_status.yaml broken each way."""
    root = SpecCopy(folder).root
    saved = os.environ.pop("SHIPYARD_SIGNING_KEY", None)
    try:
        _git(root, "init", "-q", "-b", "main")
        _git(root, "config", "user.email", "t@example.invalid")
        _git(root, "config", "user.name", "t")
        good = (root / "feature_status.yaml").read_bytes()
        for cls, content in yaml_breaks(good).items():
            (root / "feature_status.yaml").unlink(missing_ok=True)
            if content is not None:
                (root / "feature_status.yaml").write_bytes(content)
            _git(root, "add", "-A")
            _git(root, "commit", "-q", "--allow-empty", "-m", cls)
            _git(root, "tag", f"prev-{cls}")
        (root / "feature_status.yaml").write_bytes(good)
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", "release")
        assert main(["--root", str(root), "keygen"]) == 0
        signed_dist(root, json.dumps(GOOD_SBOM).encode())
        journal = Journal(root / JOURNAL)
        journal.record("verified", target="pypi", where="stage", file="a.whl", sha256="0" * 64)
        journal.record("switched", target="pypi", channel="nightly")
    finally:
        if saved is not None:
            os.environ["SHIPYARD_SIGNING_KEY"] = saved
    return root


def yaml_breaks(good: bytes) -> dict[str, bytes | None]:
    """feature_status.yaml (`good`) broken each way a file can be, by class (None: missing)."""
    return {"bytes": b"schema_version: 1\n" + BINARY, "encoding": b"\xff" + good,
            "syntax": b"schema_version: 1\nfeatures: [\n  {id: x\n", "shape": b"- a list\n- not a mapping\n",
            "missing": None}


def _argv(*args: str) -> Callable[[Path], list[str]]:
    return lambda root: [a.format(root=root, dist=root / "dist", state=root / ".shipyard") for a in args]


COMMANDS: dict[str, Callable[[Path], list[str]]] = {
    "matrix": _argv("--root", "{root}", "matrix"),
    "report": _argv("--root", "{root}", "report", "--format", "text", "--dist", "{dist}"),
    "notes": _argv("--root", "{root}", "notes", "--dist", "{dist}"),
    "manifest gate": _argv("--root", "{root}", "manifest", "gate", "--channel", "nightly", "--dist", "{dist}"),
    "manifest merge": _argv("--root", "{root}", "manifest", "merge", "--dist", "{root}/merged", "{dist}"),
    "publish": _argv("--root", "{root}", "publish", "--channel", "nightly", "--dist", "{dist}", "--state", "{state}"),
    "promote": _argv("--root", "{root}", "promote", "1.7.0", "--from", "nightly", "--to", "test", "--dist", "{dist}",
                     "--state", "{state}"),
    "attest": _argv("--root", "{root}", "attest", "--dist", "{dist}"),
    "keygen": _argv("--root", "{root}", "keygen"),
    "variants": _argv("--root", "{root}", "variants", "--dist", "{dist}"),
    "verify dist/": _argv("verify", "{dist}", "--public-key", "{root}/" + PUBLIC_KEY),
    "verify <artifact>": _argv("verify", "{root}/" + WHEEL, "--public-key", "{root}/" + PUBLIC_KEY),
}


def snapshot(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and ".git" not in p.relative_to(root).parts}


def restore(root: Path, intact: dict[Path, bytes]) -> None:
    """Put `root` back as `snapshot` found it: what a case wrote goes, what it broke comes back."""
    for path in [p for p in root.rglob("*") if p.is_file() and ".git" not in p.relative_to(root).parts]:
        if path not in intact:
            path.unlink()
    for path, content in intact.items():
        if not path.is_file() or path.read_bytes() != content:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
