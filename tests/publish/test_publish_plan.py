"""The parts of publishing that need no server (#13): the PyPI flavour's rewrite, the gate,
credentials, and what release.yaml's publish section accepts."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support.release_copy import SpecCopy
from support.synthetic_release import VERSION, synthetic_dist

from shipyard.cli import main
from shipyard.errors import GateBlocked, MissingCredential, PublishError
from shipyard.plumbing.hashing import sha256_of
from shipyard.publish.credentials import Credentials, read_credentials, scrub
from shipyard.publish.plain_version import plain_name, plain_version_wheel
from shipyard.publish.plan import PLAIN_INDEX, files_for
from shipyard.record.gate import gate
from shipyard.release.fields import DEFAULT_STATUSES
from shipyard.release.validate import load_spec

R = "release.yaml"


def test_the_pypi_flavour_rewrites_version_dist_info_and_record_and_gives_the_same_bytes_twice(tmp_path: Path):
    records = synthetic_dist(tmp_path / "dist")
    source = tmp_path / "dist" / next(r.path for r in records if r.name == f"ember-{VERSION}+cpu-py3-none-any.whl")
    first = plain_version_wheel(source, tmp_path / "a")
    second = plain_version_wheel(source, tmp_path / "b")
    assert first.name == f"ember-{VERSION}-py3-none-any.whl" == plain_name(source.name)
    assert sha256_of(first) == sha256_of(second)
    with zipfile.ZipFile(first) as zf:
        names = zf.namelist()
        assert f"ember-{VERSION}.dist-info/RECORD" in names and not any("+cpu" in n for n in names)
        assert f"Version: {VERSION}\n" in zf.read(f"ember-{VERSION}.dist-info/METADATA").decode()
    # `wheel unpack` checks every entry against RECORD: the rewritten RECORD holds.
    done = subprocess.run([sys.executable, "-m", "wheel", "unpack", "-d", str(tmp_path / "unpacked"), str(first)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert plain_version_wheel(tmp_path / "a" / first.name, tmp_path / "c") == tmp_path / "a" / first.name


def test_files_for_each_target_put_pure_wheels_in_every_variant_and_the_default_variant_in_the_plain_index(
        repo: Path, tmp_path: Path):
    records = synthetic_dist(tmp_path / "dist")
    spec = load_spec(repo, targets_file=repo / "local-targets.yaml")
    pypi = files_for(spec.release.publish["pypi"], records, tmp_path / "dist", tmp_path / "derived")
    by_index: dict[str, set[str]] = {}
    for f in pypi:
        by_index.setdefault(f.index, set()).add(f.filename)
    pure = f"emberaudio-{VERSION}-py3-none-any.whl"
    assert by_index == {"cpu": {f"ember-{VERSION}+cpu-py3-none-any.whl", pure},
                        "cu118": {f"ember-{VERSION}+cu118-py3-none-any.whl", pure},
                        PLAIN_INDEX: {f"ember-{VERSION}-py3-none-any.whl", pure}}
    tree = files_for(spec.release.publish["wheels-tree"], records, tmp_path / "dist", tmp_path / "derived")
    assert {f.index for f in tree} == {"cpu", "cu118"}


def test_a_release_of_pure_packages_only_puts_them_in_every_variant_index(repo: Path, tmp_path: Path):
    """With no native wheel to stand beside, a pure wheel goes into each of the release's variant
    indexes (and the plain one); without the release's tags it is refused, naming the fix."""
    records = [r for r in synthetic_dist(tmp_path / "dist") if r.variant_tag == "any"]
    target = load_spec(repo, targets_file=repo / "local-targets.yaml").release.publish["pypi"]
    files = files_for(target, records, tmp_path / "dist", tmp_path / "derived", ("cpu",))
    assert {(f.index, f.filename) for f in files} == {("cpu", f"emberaudio-{VERSION}-py3-none-any.whl"),
                                                      (PLAIN_INDEX, f"emberaudio-{VERSION}-py3-none-any.whl")}
    with pytest.raises(PublishError, match="only pure wheels and no variant to put them beside"):
        files_for(target, records, tmp_path / "dist", tmp_path / "derived")


def test_the_gate_blocks_a_failing_stable_feature_and_only_marks_it_on_nightly(repo: Path, tmp_path: Path):
    records = synthetic_dist(tmp_path / "dist", stable="failed", beta="failed")
    channels = load_spec(repo).release.channels
    with pytest.raises(GateBlocked) as blocked:
        gate(channels["release"], records, statuses=DEFAULT_STATUSES)
    assert "ember.kernels (stable)" in str(blocked.value) and "nothing was uploaded" in str(blocked.value)
    nightly = gate(channels["nightly"], records, statuses=DEFAULT_STATUSES)
    assert {n.feature for n in nightly.marked} == {"ember.kernels"}
    assert {n.feature for n in nightly.other_failures} == {"ember.fft"}


def test_credentials_come_from_the_named_variables_and_a_missing_one_is_named(repo: Path):
    target = load_spec(repo, targets_file=repo / "local-targets.yaml").release.publish["pypi"]
    creds = read_credentials(target, {"SHIPYARD_PYPI_USERNAME": "ci", "SHIPYARD_PYPI_PASSWORD": "pw-1234567"})
    assert creds.basic_auth() == ("ci", "pw-1234567") and "pw-1234567" not in repr(creds)
    with pytest.raises(MissingCredential) as missing:
        read_credentials(target, {"SHIPYARD_PYPI_USERNAME": "ci", "SHIPYARD_PYPI_PASSWORD": ""})
    message = str(missing.value)
    assert "publish.pypi.password_env" in message and "SHIPYARD_PYPI_PASSWORD" in message
    assert scrub("GET http://h/t/tok123/conda/x pw-1234567", [creds]) == "GET http://h/t/***/conda/x ***"
    assert scrub("nothing", [Credentials()]) == "nothing"


@pytest.mark.parametrize(("old", "new", "expected"), [
    ("    path: dist/site/whl\n", "",
     "publish.wheels-tree: a static target writes files that a web server serves; set path"),
    ("    default_variant: cpu\n", "    default_variant: cpux\n",
     "publish.pypi.default_variant: names no variant; use one of cpu"),
    ("    token_env: SHIPYARD_CONDA_TOKEN\n", "", "publish.conda-channel: a conda target needs token_env"),
    ("  release: {gate: block}\n", "  release: {gate: maybe}\n", "channels.release.gate"),
], ids=["static without path", "unknown default variant", "conda without token", "unknown gate"])
def test_publish_settings_are_checked_with_file_key_and_fix(spec_copy: SpecCopy, capsys, old: str, new: str,
                                                            expected: str):
    spec_copy.edit(R, old, new)
    assert main(["--root", str(spec_copy.root), "validate"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "release.yaml:" in err and expected in err, err


def test_publish_names_an_unknown_channel_or_target_with_the_nearest(repo: Path, capsys):
    assert main(["--root", str(repo), "publish", "--channel", "nighty"]) == 2
    assert "did you mean 'nightly'" in capsys.readouterr().err
    assert main(["--root", str(repo), "publish", "--channel", "nightly", "--target", "pypy"]) == 2
    assert "did you mean 'pypi'" in capsys.readouterr().err
    assert main(["--root", str(repo), "promote", "1.7.0", "--from", "release", "--to", "test"]) == 2
    assert "forward only (nightly → test → release)" in capsys.readouterr().err


def test_an_unchanged_rewrite_is_kept_and_a_changed_one_is_made_again(tmp_path: Path):
    """A re-publish does not rewrite the PyPI flavour's wheels again: the rewrite of the same
    source bytes is kept (its file untouched); a rewrite whose bytes changed since, or a
    different source, is made again and gives the function's bytes."""
    records = synthetic_dist(tmp_path / "dist")
    source = tmp_path / "dist" / next(r.path for r in records if r.name == f"ember-{VERSION}+cpu-py3-none-any.whl")
    first = plain_version_wheel(source, tmp_path / "out")
    made = sha256_of(first)
    stamp = first.stat().st_mtime_ns
    assert plain_version_wheel(source, tmp_path / "out") == first
    assert first.stat().st_mtime_ns == stamp  # kept, not written again
    first.write_bytes(b"damaged")
    assert sha256_of(plain_version_wheel(source, tmp_path / "out")) == made
