"""Names are identifiers and recorded paths stay in their folder (docs/identifiers-and-paths.md).

A component or variant key, a cell id, a record's path, a fragment's file, a journal's file and a
component's tests folder are each joined into a path somewhere. Each case here is one a command
once took: it must now answer one line naming the file, key and value, exit 2, and write nothing
outside the folder it was given.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.release_copy import SpecCopy
from support.synthetic_release import features, make_wheel, record, write_manifest

from shipyard.cli import main
from shipyard.errors import InputError
from shipyard.publish.journal import Journal

R = "release.yaml"


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = [line for line in (captured.out + captured.err).splitlines() if line.strip()]
    assert "Traceback" not in captured.err, captured.err
    problems = [line for line in lines if not line.endswith(":") and "problem" not in line.split(":")[0]]
    assert len(problems) == 1, lines
    return problems[0].strip()


# --- release.yaml: names are identifiers, the tests folder lies in the release -----------------

def test_validate_refuses_a_component_key_that_climbs_out(spec_copy: SpecCopy, capsys):
    spec_copy.edit(R, "  ember-lite:\n", "  ../../tmp/x:\n    path: library/ember-lite\n    kind: native\n"
                                        "    package_types: [mobile]\n  ember-lite:\n")
    assert main(["--root", str(spec_copy.root), "validate"]) == 2
    line = _one_line(capsys)
    assert "components.../../tmp/x: is not a name; use letters, digits" in line, line
    assert "(got '../../tmp/x')" in line, line


def test_validate_refuses_a_variant_key_with_a_space_and_a_slash(spec_copy: SpecCopy, capsys):
    # 'cu da/13' would slip out of every `cuda*` exclusion and name a folder whl/…/13.
    spec_copy.edit(R, "  cuda13:\n", "  cu da/13:\n    tag: cpu\n  cuda13:\n")
    assert main(["--root", str(spec_copy.root), "validate"]) == 2
    line = _one_line(capsys)
    assert "variants.cu da/13: is not a name" in line and "(got 'cu da/13')" in line, line


def test_validate_refuses_a_tests_folder_that_is_a_symlink_out_of_the_release(spec_copy: SpecCopy, capsys):
    tests = spec_copy.root / "library" / "emberaudio" / "tests"
    os.rename(tests, tests.with_name("tests-real"))
    tests.symlink_to("/etc")
    assert main(["--root", str(spec_copy.root), "validate"]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err, captured.err
    problems = [line.strip() for line in captured.err.splitlines() if line.startswith("  ")]
    assert "components.emberaudio.tests: the tests folder lies outside the release" in problems[0], problems
    # and the stable features' test ids, which are not there to be read: nothing under /etc is read as a test
    assert all("give the feature the status beta until it exists" in line for line in problems[1:]), problems


# --- dist/manifest.json: cell ids are identifiers, paths stay inside dist/ -------------------

def _dist(tmp_path: Path, *, path: str | None = None, cell_id: str | None = None) -> tuple[Path, Path]:
    """dist/ with one pure wheel and its manifest; `path` or `cell_id` replace what is recorded."""
    dist = tmp_path / "dist"
    wheel = make_wheel(dist / "whl" / "cpu" / "ember", "ember", "1.7.0")
    one = record(dist, wheel, component="ember", package_type="wheel", variant="cpu", tag="cpu", tests=features())
    manifest = write_manifest(dist, [one])
    data = json.loads(manifest.read_text())
    if path is not None:
        data["artifacts"][0]["path"] = path
    if cell_id is not None:
        data["artifacts"][0]["cell_id"] = cell_id
    manifest.write_text(json.dumps(data))
    return dist, wheel


def _outside_file(tmp_path: Path) -> Path:
    outside = tmp_path / "outside.whl"
    outside.write_bytes(b"not what was built")
    return outside


@pytest.mark.parametrize("kind", ["relative", "absolute", "symlink"])
def test_verify_and_publish_refuse_a_recorded_path_outside_dist(spec_copy: SpecCopy, tmp_path, capsys, kind):
    outside = _outside_file(tmp_path)
    if kind == "symlink":
        dist, wheel = _dist(tmp_path)
        wheel.unlink()
        wheel.symlink_to(outside)
        says = "leads outside"
    else:
        dist, _ = _dist(tmp_path, path="../outside.whl" if kind == "relative" else str(outside))
        says = "is not a normalised relative path" if kind == "relative" else "is an absolute path"
    root = str(spec_copy.root)
    assert main(["--root", root, "keygen"]) == 0
    capsys.readouterr()
    assert main(["--root", root, "verify", str(dist)]) == 2
    line = _one_line(capsys)
    assert str(dist / "manifest.json") in line and ".path: " in line and says in line, line
    state = tmp_path / "state"
    assert main(["--root", root, "publish", "--channel", "test", "--target", "wheels-tree", "--dist", str(dist),
                 "--state", str(state)]) == 2
    line = _one_line(capsys)
    assert ".path: " in line and says in line, line
    assert not (spec_copy.root / "dist" / "site").exists()


def test_attest_with_a_cell_id_that_climbs_out_writes_nothing(spec_copy: SpecCopy, tmp_path, capsys):
    dist, _ = _dist(tmp_path / "deep" / "er", cell_id="../../x")
    root = str(spec_copy.root)
    assert main(["--root", root, "keygen"]) == 0
    capsys.readouterr()
    before = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    assert main(["--root", root, "attest", "--dist", str(dist)]) == 2
    line = _one_line(capsys)
    assert "cell_id: is not a name" in line and "(got '../../x')" in line, line
    assert sorted(p for p in tmp_path.rglob("*") if p.is_file()) == before


def test_attest_refuses_a_provenance_folder_that_is_a_symlink_out_of_dist(spec_copy: SpecCopy, tmp_path, capsys):
    dist, _ = _dist(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (dist / "provenance").symlink_to(elsewhere)
    root = str(spec_copy.root)
    assert main(["--root", root, "keygen"]) == 0
    capsys.readouterr()
    assert main(["--root", root, "attest", "--dist", str(dist)]) == 2
    assert "leads outside" in _one_line(capsys)
    assert not any(elsewhere.iterdir())


# --- manifest merge: a fragment holds no symlink ---------------------------------------------

def test_merge_refuses_a_fragment_holding_a_symlink_to_a_file_outside(repo, tmp_path, capsys):
    fragment, _ = _dist(tmp_path / "job")
    secret = tmp_path / "hostname"
    secret.write_text("a file outside every fragment\n")
    (fragment / "sboms").mkdir()
    (fragment / "sboms" / "x.cdx.json").symlink_to(secret)
    merged = tmp_path / "merged"
    assert main(["--root", str(repo), "manifest", "merge", "--dist", str(merged), str(fragment)]) == 2
    line = _one_line(capsys)
    assert f"{fragment / 'sboms' / 'x.cdx.json'}: (file): is a symlink inside a fragment" in line, line
    assert not merged.exists()


# --- the publish journal: a verified file is a file name or an image --------------------------

def test_a_journal_line_naming_a_path_out_is_refused(tmp_path):
    journal = Journal(tmp_path / "state" / "publish" / "pypi.jsonl")
    journal.record("verified", target="pypi", where="stage", file="ember-1.7.0-py3-none-any.whl",
                   sha256="0" * 64)
    journal.record("verified", target="pypi", where="stage", file="ember:1.7.0-cpu-runtime",
                   sha256="1" * 64)
    assert journal.verified("stage") == {"ember-1.7.0-py3-none-any.whl": "0" * 64,
                                         "ember:1.7.0-cpu-runtime": "1" * 64}
    journal.record("verified", target="pypi", where="stage", file="../../../etc/passwd", sha256="2" * 64)
    with pytest.raises(InputError) as info:
        journal.verified("stage")
    assert str(info.value).startswith(f"{journal.path}: verified.file: names no file a publish sends")
    assert "(got '../../../etc/passwd')" in str(info.value)
    assert info.value.exit_code == 2
