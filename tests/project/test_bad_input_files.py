"""Every file every command reads, broken each way a file can be: bad bytes, bad encoding, bad
JSON or YAML (or PEM), bad shape, missing. Each answer must be one line that names the file
(`file[:line]: key: message; fix`), exit status 2, no traceback, and never a byte of a key.

The test keeps a tally per command × input × class (tried, clear error, traceback, wrongly
accepted, unclear, secret echoed), prints it, and fails on any case that is not a clear error.
A missing file that is a normal state is not a case: the report and the notes of a release not
built yet (no dist/manifest.json), a merge into an empty dist/, a first publish (no journal),
keygen without a key (it makes one). A missing envelope or SBOM is verify's verdict on the
artifact (FAILED, exit 1), and is checked as such at the end.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key
from support.input_world import (
    BINARY,
    COMMANDS,
    GOOD_SBOM,
    JOURNAL,
    KEY_FILE,
    PUBLIC_KEY,
    SBOM_MEMBER,
    WHEEL,
    build_world,
    restore,
    signed_dist,
    snapshot,
    yaml_breaks,
)
from support.synthetic_release import features, record, write_manifest
from wheel.wheelfile import WheelFile

from shipyard.cli import main
from shipyard.errors import VERIFY_FAILED, ShipyardError
from shipyard.publish.journal import Journal
from shipyard.supply.keys import signer_from_pem
from shipyard.supply.provenance import STATEMENT_TYPE, sign_statement
from shipyard.wheel.repair import source_date_epoch

CLASSES = ("bytes", "encoding", "syntax", "shape", "missing")
# What a key file may hold that must never be shown: a line of base64 as a PEM body has.
SECRET = "c2hpcHlhcmQtc2VjcmV0LWtleS1ib2R5LW5ldmVyLXNob3du"
# `file[:line]: key: message; fix`, after the file's name.
SHAPE = re.compile(r"(:\d+)?: [^;]+?: .+; .+")
# load_spec's heading before its problems (validate's format, which tests/project/test_bad_input.py reads).
HEADING = re.compile(r"\d+ problems? in the release description:")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_world(tmp_path_factory.mktemp("world"))


def _json_breaks(good: bytes, shapes: list[bytes]) -> Iterator[tuple[str, bytes | None]]:
    yield "bytes", BINARY
    yield "encoding", b"\xff" + good
    yield "syntax", good[: len(good) // 2]
    yield "syntax", b"[" * 900 + b"]" * 900
    if good.startswith(b"{"):  # its first key twice: which of the two was meant is unknowable
        yield "syntax", b"{" + json.dumps(next(iter(json.loads(good)))).encode() + b": null," + good[1:]
    for shape in shapes:
        yield "shape", shape
    yield "missing", None


def _pem(body: str, kind: str = "PRIVATE KEY") -> bytes:
    return f"-----BEGIN {kind}-----\n{body}\n-----END {kind}-----\n".encode()


def _ec_private() -> bytes:
    key = generate_private_key(SECP256R1())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _key_breaks(shapes: list[bytes]) -> Iterator[tuple[str, bytes | None]]:
    yield "bytes", BINARY + SECRET.encode()
    yield "encoding", b"\xff" + _pem(SECRET)
    yield "syntax", _pem(SECRET)
    for shape in shapes:
        yield "shape", shape
    yield "missing", None


@dataclass
class Case:
    command: str  # the tally's row: the command as a user types it
    input: str  # the file it reads
    cls: str  # bytes | encoding | syntax | shape | missing
    break_: Callable[[Path], None]  # breaks the file in the world (restored after the case)
    run: Callable[[Path], list[str]] | Callable[[Path], Callable[[], object]]
    shown: Callable[[Path], str]  # what the error line must start with (the file)
    secrets: Callable[[Path], list[str]] = field(default=lambda root: [SECRET])


def _put(relative: str, content: bytes | None) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        path = root / relative
        path.unlink(missing_ok=True)
        if content is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
    return apply


def _cases(world: Path) -> list[Case]:
    cases: list[Case] = []
    at = lambda relative: (lambda root: str(root / relative))  # noqa: E731

    # release.yaml and feature_status.yaml: every command that loads the release description.
    for name in ("release.yaml", "feature_status.yaml"):
        good = (world / name).read_bytes()
        for command in ("matrix", "report", "notes", "manifest gate", "manifest merge", "publish", "promote",
                        "attest", "keygen", "variants"):
            wrong_type = good.replace(b"schema_version: 1", b"schema_version: [1]")
            breaks = [*yaml_breaks(good).items(), ("shape", wrong_type)]
            cases += [Case(command, name, cls, _put(name, content), COMMANDS[command], at(name))
                      for cls, content in breaks]

    # dist/manifest.json: every command that reads the record of the release.
    manifest = (world / "dist/manifest.json").read_bytes()
    data = json.loads(manifest)
    shapes = [b"[]", json.dumps({"release": "ember"}).encode()]
    wrong_type = json.loads(manifest)
    wrong_type["artifacts"][0]["size"] = "big"
    wrong_features = json.loads(manifest)
    wrong_features["artifacts"][0]["tests"]["features"] = ["ember.kernels"]
    no_count = json.loads(manifest)
    next(iter(no_count["artifacts"][0]["tests"]["features"].values()))["passed"] = None
    not_a_wheel = json.loads(manifest)
    not_a_wheel["artifacts"][0]["name"] = "not-a-wheel.whl"
    shapes += [json.dumps(no_count).encode(), json.dumps(not_a_wheel).encode()]
    shapes += [json.dumps(wrong_type).encode(), json.dumps(wrong_features).encode(),
               json.dumps({**data, "schema_version": True}).encode(),
               json.dumps({**data, "version": "banana"}).encode()]
    assert data["artifacts"], "the world's manifest records the wheel"
    normal_when_missing = {"report", "notes", "manifest merge"}  # nothing built yet; a merge into an empty dist/
    for command in ("report", "notes", "manifest gate", "publish", "promote", "attest", "verify dist/",
                    "verify <artifact>", "manifest merge", "variants"):
        for cls, content in _json_breaks(manifest, shapes):
            if cls == "missing" and command in normal_when_missing:
                continue
            # manifest merge reads the manifest of the dist/ it merges into (here <root>/merged).
            relative = "merged/manifest.json" if command == "manifest merge" else "dist/manifest.json"
            # An artifact recorded in no manifest is named itself.
            shown = at(WHEEL) if (command, cls) == ("verify <artifact>", "missing") else at(relative)
            cases.append(Case(command, "dist/manifest.json", cls, _put(relative, content), COMMANDS[command], shown))
    # manifest merge: the fragments' manifests.
    cases += [Case("manifest merge", "fragment manifest.json", cls, _put("dist/manifest.json", content),
                   COMMANDS["manifest merge"], at("dist/manifest.json"))
              for cls, content in _json_breaks(manifest, shapes)]

    # dist/variant-wheels.json (`shipyard variants`' record): publish reads it for the static tree's
    # variants index. Without one (variants never made) a publish is normal: not a case.
    record = json.dumps({"release": "ember", "version": "1.7.0", "files": []}).encode()
    record_shapes = [b"[]", json.dumps({"release": "ember"}).encode(),
                     json.dumps({"release": "ember", "version": "1.7.0", "files": [{"kind": "variant"}]}).encode()]
    cases += [Case("publish", "dist/variant-wheels.json", cls, _put("dist/variant-wheels.json", content),
                   COMMANDS["publish"], at("dist/variant-wheels.json"))
              for cls, content in _json_breaks(record, record_shapes) if cls != "missing"]

    # verify: the provenance envelope, the SBOM inside the wheel, the public key.
    envelope_path = "dist/" + data["artifacts"][0]["provenance"]
    envelope = (world / envelope_path).read_bytes()
    signer = signer_from_pem((world / KEY_FILE).read_bytes(), "test key")
    signed_nonsense = sign_statement({"_type": STATEMENT_TYPE, "subject": "ember"}, signer)
    envelope_shapes = [b"[]", json.dumps({"payload": "not base64!", "payloadType": "x", "signatures": []}).encode(),
                       signed_nonsense]
    for cls, content in _json_breaks(envelope, envelope_shapes):
        if cls != "missing":
            cases.append(Case("verify dist/", "provenance envelope", cls, _put(envelope_path, content),
                              COMMANDS["verify dist/"], at(envelope_path)))
    sbom = json.dumps(GOOD_SBOM).encode()
    sbom_shapes = [b"{}", json.dumps({**GOOD_SBOM, "components": "none"}).encode(),
                   json.dumps({**GOOD_SBOM, "components": [{"name": "libz", "properties": [
                       {"name": "shipyard:role", "value": "vendored"}]}]}).encode()]
    for cls, content in _json_breaks(sbom, sbom_shapes):
        if cls != "missing":
            cases.append(Case("verify dist/", "SBOM in the wheel", cls, lambda root, c=content: signed_dist(root, c),
                              COMMANDS["verify dist/"], at(f"{WHEEL}/{SBOM_MEMBER}")))
    private = (world / KEY_FILE).read_bytes()
    private_body = private.decode().splitlines()[1]
    ec = _ec_private()
    for cls, content in _key_breaks([private, ec]):
        cases.append(Case("verify dist/", "--public-key", cls, _put(PUBLIC_KEY, content), COMMANDS["verify dist/"],
                          at(PUBLIC_KEY), lambda root, ec=ec: [SECRET, private_body, ec.decode().splitlines()[1]]))

    # The signing key: attest signs with it; keygen reads it to write a missing public key.
    for cls, content in _key_breaks([ec]):
        # No key at all is release.yaml's supply_chain naming a file that is not there (or an unset variable).
        cases.append(Case("attest", "signing key", cls, _put(KEY_FILE, content), COMMANDS["attest"],
                          at("release.yaml" if cls == "missing" else KEY_FILE),
                          lambda root, ec=ec: [SECRET, ec.decode().splitlines()[1]]))
        if cls != "missing":  # without a key keygen makes one
            def brk(root: Path, content: bytes | None = content) -> None:
                _put(KEY_FILE, content)(root)
                (root / PUBLIC_KEY).unlink()
            cases.append(Case("keygen", "signing key", cls, brk, COMMANDS["keygen"], at(KEY_FILE),
                              lambda root, ec=ec: [SECRET, ec.decode().splitlines()[1]]))

    # notes --previous: a feature_status.yaml file, or a git ref whose feature_status.yaml is broken.
    good = (world / "feature_status.yaml").read_bytes()
    for cls, content in [*yaml_breaks(good).items(), ("shape", b"schema_version: 1\nfeatures:\n  - id: x\n")]:
        cases.append(Case("notes --previous FILE", "feature_status.yaml (previous)", cls, _put("old.yaml", content),
                          lambda root: [*COMMANDS["notes"](root), "--previous", str(root / "old.yaml")],
                          at("old.yaml")))
    for cls in CLASSES:
        ref = f"prev-{cls}"
        cases.append(Case("notes --previous REF", "feature_status.yaml at a git ref", cls, lambda root: None,
                          lambda root, ref=ref: [*COMMANDS["notes"](root), "--previous", ref],
                          (lambda root, ref=ref: f"{ref}:feature_status.yaml") if cls != "missing"
                          else (lambda root, ref=ref: ref)))

    # The publish journal: read by the pypi and docker targets on a re-run (no server here, so
    # through the reader those targets call, with the CLI's rendering of its error).
    journal = (world / JOURNAL).read_bytes()
    first, rest = journal.split(b"\n", 1)
    journal_breaks = [("bytes", BINARY + b"\n" + journal), ("encoding", first + b"\xff\n" + rest),
                      ("syntax", first[:-3] + b"\n" + rest), ("shape", b"[1, 2]\n" + journal),
                      ("shape", first.replace(b'"sha256"', b'"sha"') + b"\n" + rest),
                      ("shape", first.replace(b'"' + b"0" * 64 + b'"', b'"zero"') + b"\n" + rest),
                      ("syntax", first.replace(b'{"event"', b'{"sha256": "1", "event"') + b"\n" + rest)]
    for cls, content in journal_breaks:
        cases.append(Case("publish (journal reader)", ".shipyard/publish/<target>.jsonl", cls, _put(JOURNAL, content),
                          lambda root: lambda: Journal(root / JOURNAL).verified("stage"), at(JOURNAL)))
    return cases


@dataclass
class Answer:
    code: int
    out: str
    err: str
    escaped: BaseException | None = None


def _answer(case: Case, root: Path, capsys: pytest.CaptureFixture[str]) -> Answer:
    what = case.run(root)
    capsys.readouterr()
    try:
        if callable(what):
            try:
                what()
                code = 0
            except ShipyardError as exc:  # what cli.main prints for one
                print(f"error: {exc}", file=sys.stderr)
                code = exc.exit_code
        else:
            code = main(what)
    except BaseException as exc:  # noqa: BLE001 - an exception out of main is the traceback a user sees
        captured = capsys.readouterr()
        return Answer(-1, captured.out, captured.err, exc)
    captured = capsys.readouterr()
    return Answer(code, captured.out, captured.err)


def _verdict(case: Case, root: Path, answer: Answer) -> tuple[str, str]:
    """(tally column, detail) for one answer."""
    everything = answer.out + answer.err
    if answer.escaped is not None or "Traceback" in everything:
        escaped = answer.escaped
        return "traceback", f"{type(escaped).__name__}: {escaped}" if escaped else everything[-300:]
    if answer.code == 0:
        return "wrongly accepted", everything[-300:]
    text = answer.err.strip().removeprefix("error: ")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if lines and HEADING.fullmatch(lines[0]):
        lines = lines[1:]
    shown = case.shown(root)
    clear = (answer.code == 2 and len(lines) == 1 and lines[0].startswith(shown)
             and SHAPE.fullmatch(lines[0][len(shown):]) is not None)
    return ("clear error", lines[0]) if clear else ("unclear", f"exit {answer.code}: {answer.err.strip()!r}")


def test_every_input_file_answers_one_line_and_exit_2(world: Path,
                                                       capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SHIPYARD_SIGNING_KEY", raising=False)
    for variable in ("SHIPYARD_PYPI_USERNAME", "SHIPYARD_PYPI_PASSWORD"):
        monkeypatch.delenv(variable, raising=False)
    # The intact world passes each reading command: a case fails only by what it breaks.
    for command in ("report", "notes", "manifest gate", "verify dist/", "verify <artifact>"):
        assert main(COMMANDS[command](world)) == 0, (command, capsys.readouterr())
    tally: Counter[tuple[str, str, str, str]] = Counter()
    failures = []
    root = world
    intact = snapshot(world)
    for case in _cases(world):
        try:
            case.break_(root)
            answer = _answer(case, root, capsys)
        finally:
            restore(world, intact)  # each case starts from the intact world (a copy per case is slow on this disk)
        column, detail = _verdict(case, root, answer)
        leaked = [s for s in case.secrets(root) if s and s in answer.out + answer.err]
        tally[(case.command, case.input, case.cls, column)] += 1
        if leaked:
            tally[(case.command, case.input, case.cls, "secret echoed")] += 1
        if column != "clear error" or leaked:
            failures.append(f"{case.command} × {case.input} × {case.cls}: {column}"
                            + (" and a secret echoed" if leaked else "") + f": {detail}")
    print("\n" + _table(tally))
    assert not failures, f"{len(failures)} of {sum(n for k, n in tally.items() if k[3] != 'secret echoed')} " \
                         f"cases are not a clear one-line error:\n" + "\n".join(failures)


def _table(tally: Counter[tuple[str, str, str, str]]) -> str:
    """command × input × class: tried / clear / traceback / wrongly accepted / unclear / secret echoed."""
    columns = ("clear error", "traceback", "wrongly accepted", "unclear", "secret echoed")
    rows = sorted({k[:3] for k in tally}, key=lambda k: (k[0], k[1], CLASSES.index(k[2])))
    lines = ["command | input | class | tried | " + " | ".join(columns)]
    totals = Counter()
    for row in rows:
        counts = {c: tally[(*row, c)] for c in columns}
        tried = sum(v for c, v in counts.items() if c != "secret echoed")
        totals.update({"tried": tried, **counts})
        lines.append(" | ".join([*row, str(tried), *(str(counts[c]) for c in columns)]))
    lines.append(" | ".join(["all", "", "", str(totals["tried"]), *(str(totals[c]) for c in columns)]))
    return "\n".join(lines)


def test_a_missing_envelope_or_sbom_is_verifys_failed_verdict(world: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Not bad input: an unsigned artifact, or one without an SBOM, is what verify exists to find."""
    root = tmp_path / "root"
    shutil.copytree(world, root, symlinks=True)
    manifest = json.loads((root / "dist/manifest.json").read_text())
    (root / "dist" / manifest["artifacts"][0]["provenance"]).unlink()
    capsys.readouterr()
    assert main(COMMANDS["verify dist/"](root)) == VERIFY_FAILED
    assert "ember-1.7.0-py3-none-any.whl: provenance: FAILED: no signed provenance" in capsys.readouterr().err
    shutil.rmtree(root)
    shutil.copytree(world, root, symlinks=True)
    with source_date_epoch(1603800000):
        wheel = root / WHEEL
        wheel.unlink()
        with WheelFile(wheel, "w") as wf:
            wf.writestr("ember/__init__.py", "VERSION = '1.7.0'\n")
    dist = root / "dist"
    write_manifest(dist, [record(dist, wheel, component="ember", package_type="wheel", variant="cpu", tag="cpu",
                                 tests=features())])
    assert main(["--root", str(root), "attest", "--dist", str(dist)]) == 0
    capsys.readouterr()
    assert main(COMMANDS["verify dist/"](root)) == VERIFY_FAILED
    assert "sbom: FAILED: no CycloneDX SBOM" in capsys.readouterr().err


def test_a_damaged_manifest_in_dist_stops_a_merge_before_anything_is_written(world: Path, tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    merged = tmp_path / "merged"
    merged.mkdir()
    (merged / "manifest.json").write_bytes(b"\xff{}")
    capsys.readouterr()
    assert main(["--root", str(world), "manifest", "merge", "--dist", str(merged), str(world / "dist")]) == 2
    assert f"{merged / 'manifest.json'}:1: (file): is not UTF-8 text" in capsys.readouterr().err
    assert [p.name for p in merged.iterdir()] == ["manifest.json"]


def test_only_the_journal_line_a_kill_cut_short_is_ignored(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "t.jsonl")
    journal.record("verified", target="t", where="stage", file="a.whl", sha256="a" * 64)
    with (tmp_path / "t.jsonl").open("ab") as fh:
        fh.write(b'{"event": "verified", "file": "b.wh')  # kill -9 in mid-write: no newline after it
    assert journal.verified("stage") == {"a.whl": "a" * 64}
    with (tmp_path / "t.jsonl").open("ab") as fh:
        fh.write(b"\n")  # the same bytes, but a later line follows: the journal is damaged
    journal.record("switched", target="t", channel="nightly")
    with pytest.raises(ShipyardError, match=r"t\.jsonl:2: \(syntax\): not valid JSON: .*; delete the journal") as info:
        journal.verified("stage")
    assert info.value.exit_code == 2
