"""Files a command is handed are read within bounds: a FIFO, device or folder where a file
should be is one line at once (never a read that waits forever), a file over its kind's size
limit, JSON nested too deeply or holding a key twice, and values of the wrong type are one line
and exit status 2. A ref given to `notes --previous` never reaches git as an option, and
`verify` names every damaged artifact FAILED instead of stopping at the first.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from support.release_copy import SpecCopy
from support.shipyard_process import run_shipyard
from support.synthetic_release import features, record, write_manifest

from shipyard.cli import main
from shipyard.errors import VERIFY_FAILED
from shipyard.publish.journal import Journal

KEY_FILE = ".shipyard/keys/provenance-ed25519.pem"
PUBLIC_KEY = ".shipyard/keys/provenance-ed25519.pub.pem"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A release root with a signing key and a signed dist/ of two artifacts (a mobile tarball
    and a conda package) whose bytes are not archives: signed as they are, damaged inside."""
    root = SpecCopy(tmp_path_factory.mktemp("bounded")).root
    saved = os.environ.pop("SHIPYARD_SIGNING_KEY", None)
    try:
        assert main(["--root", str(root), "keygen"]) == 0
        dist = root / "dist"
        dist.mkdir()
        tarball = dist / "mobile" / "ember-lite-1.7.0-android-arm64.tar.gz"
        package = dist / "conda" / "linux-64" / "ember-1.7.0-py311_cpu_0.conda"
        for path, junk in ((tarball, b"not a gzip stream"), (package, b"not a zip archive")):
            path.parent.mkdir(parents=True)
            path.write_bytes(junk)
        write_manifest(dist, [record(dist, path, component="ember", package_type=kind, variant="cpu", tag="cpu",
                                     tests=features()) for path, kind in ((tarball, "mobile"), (package, "conda"))])
        assert main(["--root", str(root), "attest", "--dist", str(dist)]) == 0
    finally:
        if saved is not None:
            os.environ["SHIPYARD_SIGNING_KEY"] = saved
    return root


def _shipyard(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`python -m shipyard.cli ARGS` in a child: a read that blocks fails the test at `timeout`,
    never hangs the suite."""
    env = {k: v for k, v in os.environ.items() if k != "SHIPYARD_SIGNING_KEY"}
    return run_shipyard(*args, env=env, timeout=timeout)


def _one_line(err: str) -> str:
    lines = [line.strip() for line in err.strip().removeprefix("error: ").splitlines() if line.strip()]
    if len(lines) == 2 and lines[0].endswith("in the release description:"):
        lines = lines[1:]  # load_spec's heading before its one problem
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def copy(world: Path, tmp_path: Path) -> Path:
    """A copy of the world a test may break."""
    import shutil

    root = tmp_path / "root"
    shutil.copytree(world, root, symlinks=True)
    return root


def _fifo_in_place_of(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


@pytest.mark.parametrize("name, argv", [
    ("release.yaml", ("--root", "{root}", "matrix")),
    ("dist/manifest.json", ("--root", "{root}", "manifest", "gate", "--channel", "nightly", "--dist", "{root}/dist")),
    (PUBLIC_KEY, ("verify", "{root}/dist", "--public-key", "{root}/" + PUBLIC_KEY)),
])
def test_a_fifo_where_a_file_should_be_is_one_line_at_once(copy: Path, name: str, argv: tuple[str, ...]) -> None:
    _fifo_in_place_of(copy / name)
    done = _shipyard(*(a.format(root=copy) for a in argv), timeout=30)
    assert done.returncode == 2, done.stderr
    line = _one_line(done.stderr)
    assert line.startswith(f"{copy / name}: (file): is a FIFO (named pipe), not a regular file; "), line


def test_a_file_over_its_kinds_size_limit_is_one_line(copy: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from shipyard.plumbing.input_files import INPUT_LIMITS

    size = (copy / "dist/manifest.json").stat().st_size
    monkeypatch.setitem(INPUT_LIMITS, "manifest", size - 1)
    assert main(_gate(copy)) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"{copy / 'dist/manifest.json'}: (file): larger than the {size - 1} bytes a manifest "
                           f"may hold; "), line
    monkeypatch.setitem(INPUT_LIMITS, "manifest", size)
    assert main(_gate(copy)) == 0, capsys.readouterr()


def test_the_limit_variable_lowers_every_limit(copy: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    key = copy / PUBLIC_KEY
    monkeypatch.setenv("SHIPYARD_INPUT_LIMIT", str(key.stat().st_size - 1))
    assert main(["verify", str(copy / "dist"), "--public-key", str(key)]) == 2
    assert _one_line(capsys.readouterr().err).startswith(f"{key}: (file): larger than the ")


def _gate(root: Path) -> list[str]:
    return ["--root", str(root), "manifest", "gate", "--channel", "nightly", "--dist", str(root / "dist")]


def _manifest(root: Path) -> dict:
    return json.loads((root / "dist/manifest.json").read_text())


@pytest.mark.parametrize("text, expected", [
    ("[" * 900 + "]" * 900, ":1: (syntax): nested more than 64 levels deep;"),
    ("[" * 100_000, ":1: (syntax): nested more than 64 levels deep;"),
    ('{"release": "ember", "version": "1.7.0", "release": "other"}',
     ":1: (syntax): the key 'release' appears twice in one object;"),
], ids=["nested-900", "100000-brackets", "key-twice"])
def test_json_nested_too_deeply_or_with_a_key_twice_is_one_line(copy: Path, capsys: pytest.CaptureFixture[str],
                                                               text: str, expected: str) -> None:
    (copy / "dist/manifest.json").write_text(text)
    assert main(_gate(copy)) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"{copy / 'dist/manifest.json'}{expected}"), line


def test_a_plan_of_100000_brackets_is_one_line(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = copy / "plan.json"
    plan.write_text("[" * 100_000)
    assert main(["--root", str(copy), "ci", "fragments", "--plan", str(plan), str(copy / "fragments")]) == 2
    assert _one_line(capsys.readouterr().err).startswith(f"{plan}:1: (syntax): nested more than 64 levels deep;")


@pytest.mark.parametrize("key, value, expected", [
    ("schema_version", True, "schema_version: Input should be a valid integer; "),
    ("version", "banana", "version: not a version (PEP 440, e.g. 1.7.0 or 1.7.0.dev20261205); "),
])
def test_a_manifest_value_of_the_wrong_kind_is_refused(copy: Path, capsys: pytest.CaptureFixture[str],
                                                       key: str, value: object, expected: str) -> None:
    data = _manifest(copy)
    data[key] = value
    (copy / "dist/manifest.json").write_text(json.dumps(data))
    assert main(_gate(copy)) == 2
    assert _one_line(capsys.readouterr().err).startswith(f"{copy / 'dist/manifest.json'}: {expected}")


def test_release_yaml_schema_version_true_is_refused(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = copy / "release.yaml"
    path.write_text(path.read_text().replace("schema_version: 1", "schema_version: true", 1))
    assert main(["--root", str(copy), "matrix"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert re.match(rf"{re.escape(str(path))}:\d+: schema_version: must be the whole number 1, not a boolean; ",
                    line), line


def test_a_journal_digest_that_is_not_one_is_refused(tmp_path: Path) -> None:
    from shipyard.errors import InputError

    journal = Journal(tmp_path / "t.jsonl")
    journal.record("verified", target="t", where="stage", file="a.whl", sha256="not-a-digest")
    with pytest.raises(InputError, match=r"t\.jsonl: verified\.sha256: not a sha256 digest"):
        journal.verified("stage")


def test_notes_previous_that_looks_like_an_option_writes_nothing_and_names_the_ref(
        copy: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    subprocess.run(["git", "init", "-q", str(copy)], check=True)
    monkeypatch.chdir(copy)
    code = main(["--root", str(copy), "notes", "--dist", str(copy / "dist"), "--previous=--output=x"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert not list(copy.glob("x*")), "git took the ref for --output and wrote a file"
    assert _one_line(err).startswith("--output=x: --previous: no such file, and not a git ref"), err


def test_verify_names_every_damaged_artifact_failed(world: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["verify", str(world / "dist"), "--public-key", str(world / PUBLIC_KEY)]) == VERIFY_FAILED
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for name in ("ember-lite-1.7.0-android-arm64.tar.gz", "ember-1.7.0-py311_cpu_0.conda"):
        assert any(line.startswith(name) and ": FAILED: " in line for line in err.splitlines()), (name, err)


@pytest.mark.parametrize("option", ["--state", "--dist"])
def test_a_state_or_dist_folder_that_is_a_file_is_one_line(copy: Path, capsys: pytest.CaptureFixture[str],
                                                          option: str) -> None:
    (copy / "file").write_text("a file")
    for given in (copy / "file", copy / "file" / "below"):
        assert main(["--root", str(copy), "publish", "--channel", "nightly", option, str(given)]) == 2
        line = _one_line(capsys.readouterr().err)
        assert line.startswith(f"{given}: {option}: ") and "is a file, not a folder; " in line, line


def test_keygen_into_a_folder_or_below_a_file_is_one_line(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (copy / "file").write_text("a file")
    (copy / "folder").mkdir()
    for given, said in ((copy / "folder", "is a directory, not a file"),
                        (copy / "file" / "key.pem", f"{copy / 'file'} is a file, not a folder")):
        assert main(["--root", str(copy), "keygen", "--out", str(given), "--force"]) == 2
        line = _one_line(capsys.readouterr().err)
        assert line.startswith(f"{given}: (file): {said}; "), line


def test_a_fragment_record_outside_its_fragment_is_one_line(copy: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    data = _manifest(copy)
    data["artifacts"][0]["path"] = "../dist/" + data["artifacts"][0]["path"]
    fragment = tmp_path / "fragment"
    fragment.mkdir()
    (fragment / "manifest.json").write_text(json.dumps(data))
    assert main(["--root", str(copy), "manifest", "merge", "--dist", str(tmp_path / "merged"), str(fragment)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"{fragment / 'manifest.json'}: artifacts.0.path: ") and "../dist/" in line, line
    assert not (tmp_path / "merged").exists()
