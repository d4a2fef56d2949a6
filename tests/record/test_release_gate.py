"""The gate lets through only what its tests proved (#48): `manifest gate`, `publish` and
`promote` refuse an artifact whose blocking feature did not pass (not run, a result the gate does
not know, a cell whose run failed while its features say passed, a vocabulary's own blocking
status), and the report's and the notes' blockers name the same artifacts. Each refusal happens
before anything is uploaded: the release's targets are never contacted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.release_copy import declare_api_statuses
from support.synthetic_release import VERSION, make_wheel, write_manifest

from shipyard.cli import main
from shipyard.plumbing.hashing import sha256_of
from shipyard.record.manifest import ArtifactRecord, FeatureRecord
from shipyard.release.validate import load_spec
from shipyard.report.notes import release_notes

GATE_BLOCKED = 9  # errors.GateBlocked's exit status


def _result(status: str, result: str) -> dict:
    return {"status": status, "result": result, "summary": f"{result} (1 of 1)", "passed": int(result == "passed"),
            "failed": int(result == "failed"), "skipped": 0, "skip_reasons": [], "not_run": int(result == "not-run"),
            "not_run_reasons": ["the interpreter died"] if result == "not-run" else []}


def _dist(tmp_path: Path, *, stable: str = "passed", cell: str = "passed", status: str = "stable",
          proven_by: tuple[str, ...] = ()) -> Path:
    """dist/ with one cpu wheel of ember whose stable feature ember.kernels has the result `stable`
    and whose cell's run says `cell`, and (with `proven_by`) a second artifact proven by those cells."""
    dist = tmp_path / "dist"
    wheel = make_wheel(dist / "whl" / "cpu" / "ember", "ember", f"{VERSION}+cpu")
    features = (FeatureRecord(id="ember.kernels", title="kernels", status=status),
                FeatureRecord(id="ember.fft", title="fft", status="beta" if status == "stable" else "API-Unstable"))
    common = {"component": "ember", "package_type": "wheel", "variant": "cpu", "variant_tag": "cpu",
              "platform": "linux-x86_64", "python": "3.11", "version": VERSION, "features": features, "build": {}}
    records = [ArtifactRecord(
        name=wheel.name, path=wheel.relative_to(dist).as_posix(), sha256=sha256_of(wheel), size=wheel.stat().st_size,
        cell_id="ember-cpu-linux-x86_64-py3.11-wheel",
        tests={"result": cell, "problems": [] if cell == "passed" else ["pytest exited 2 (interrupted)"],
               "features": {"ember.kernels": _result(status, stable),
                            "ember.fft": _result(features[1].status, "passed")}},
        **common)]
    if proven_by:
        image = {**common, "package_type": "docker", "python": "3.11"}
        records.append(ArtifactRecord(name="ember:1.7.0-cpu-runtime", path="", sha256="0" * 64, size=1,
                                      cell_id="ember-cpu-linux-x86_64-runtime-docker", tests=None,
                                      proven_by=proven_by, **image))
    write_manifest(dist, records)
    return dist


def _commands(root: Path, dist: Path, state: Path) -> dict[str, list[str]]:
    base = ["--root", str(root)]
    return {
        "manifest gate": [*base, "manifest", "gate", "--channel", "release", "--dist", str(dist)],
        "publish": [*base, "publish", "--channel", "release", "--dist", str(dist), "--state", str(state)],
        "promote": [*base, "promote", VERSION, "--from", "test", "--to", "release", "--dist", str(dist),
                    "--state", str(state)],
    }


BLOCKED = {
    # (what the record says, how the refusal names it)
    "stable feature not run": ({"stable": "not-run"}, "ember.kernels (stable) not-run"),
    "cell failed, features passed": ({"cell": "failed"}, "its tests did not pass (result 'failed'"),
    "unknown result string": ({"stable": "FAILED"}, "ember.kernels (stable) not proven: result 'FAILED'"),
    "stable feature skipped": ({"stable": "skipped"}, "ember.kernels (stable) skipped"),
    "proving cell missing": ({"proven_by": ("ember-cpu-linux-x86_64-py3.12-wheel",)},
                             "proven by cell ember-cpu-linux-x86_64-py3.12-wheel, which the manifest does not hold"),
}


@pytest.mark.parametrize("case", list(BLOCKED))
def test_manifest_gate_publish_and_promote_refuse_what_was_not_proven(repo, tmp_path, capsys, case):
    record, named = BLOCKED[case]
    dist = _dist(tmp_path, **record)
    for command, argv in _commands(repo, dist, tmp_path / "state").items():
        capsys.readouterr()
        code = main(argv)
        err = " ".join(capsys.readouterr().err.split())
        assert code == GATE_BLOCKED, (command, code, err)
        assert "refuses artifacts with a stable feature not proven by its tests" in err, (command, err)
        assert named in err and "nothing was uploaded" in err, (command, err)
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").rglob("*.jsonl"))


def test_what_passed_goes_through_and_an_image_is_proven_by_its_wheels(repo, tmp_path, capsys):
    """The control: the same records with every result passed go through the gate (so the cases
    above are refused for what they say, not for their shape)."""
    dist = _dist(tmp_path, proven_by=("ember-cpu-linux-x86_64-py3.11-wheel",))
    assert main(_commands(repo, dist, tmp_path / "state")["manifest gate"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "gate passed: 2 artifacts may go to release (gate: block; every stable feature proven)" in out, out


def test_a_vocabulary_of_its_own_blocks_with_its_own_status(spec_copy, tmp_path, capsys):
    declare_api_statuses(spec_copy)
    dist = _dist(tmp_path, stable="not-run", status="API-Stable")
    for command, argv in _commands(spec_copy.root, dist, tmp_path / "state").items():
        capsys.readouterr()
        code = main(argv)
        err = " ".join(capsys.readouterr().err.split())
        assert code == GATE_BLOCKED, (command, code, err)
        assert "ember.kernels (API-Stable) not-run" in err, (command, err)


@pytest.mark.parametrize("case", ["stable feature not run", "unknown result string", "proving cell missing"])
def test_the_notes_and_the_report_name_what_the_gate_refuses(repo, tmp_path, case):
    from support.report_release import host_without_tools

    from shipyard.report.document import build_report
    from shipyard.report.summary import blockers

    record, _ = BLOCKED[case]
    dist = _dist(tmp_path, **record)
    spec = load_spec(repo)
    report = build_report(spec, dist / "manifest.json", host_without_tools())
    notes = release_notes(report, spec.features)
    assert "## Release blockers" in notes, notes
    section = notes.split("## Release blockers", 1)[1].split("\n## ", 1)[0]
    words = {"stable feature not run": "`ember.kernels`, stable): not run on linux-x86_64",
             "unknown result string": "ember.kernels (stable) not proven: result 'FAILED'",
             "proving cell missing": "which the manifest does not hold"}[case]
    assert words in section, section
    shown = [f"{b.what}: {b.detail}" for b in blockers(report.cells, report.unproven)]
    expected = {"stable feature not run": "ember.kernels (stable): not-run (1 of 1)",
                "unknown result string": "ember.kernels (stable): not proven: result 'FAILED'",
                "proving cell missing": "ember-cpu-linux-x86_64-runtime-docker: proven by cell "
                                        "ember-cpu-linux-x86_64-py3.12-wheel, which the manifest does not hold"}[case]
    assert expected in shown, shown


@pytest.mark.parametrize("key, value", [("platform", "atlantis"), ("variant", "cuda99")])
def test_a_record_of_no_cell_of_the_release_is_refused_by_every_reader(repo, tmp_path, capsys, key, value):
    """A record for platform 'atlantis' showed as passed in a column of its own, and the gate
    judged a cell nobody declared: the report, the notes, the gate, publish and promote refuse it."""
    dist = _dist(tmp_path)
    manifest = json.loads((dist / "manifest.json").read_text())
    manifest["artifacts"][0][key] = value
    (dist / "manifest.json").write_text(json.dumps(manifest))
    argvs = [*_commands(repo, dist, tmp_path / "state").values(),
             ["--root", str(repo), "report", "--format", "text", "--dist", str(dist)],
             ["--root", str(repo), "notes", "--dist", str(dist), "--out", str(tmp_path / "notes.md")],
             ["--root", str(repo), "variants", "--dist", str(dist)]]  # the fuzzer's KeyError: a traceback
    for argv in argvs:
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = " ".join(capsys.readouterr().err.split())
        assert f"manifest.json: artifacts.0.{key}: is no {key} of release.yaml" in err and repr(value) in err, err
    assert not (tmp_path / "notes.md").exists()
