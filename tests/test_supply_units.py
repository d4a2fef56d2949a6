"""The provenance key: made once, found where release.yaml says, never printed; statements sign and verify."""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError

from shipyard.spec import SupplyChain
from shipyard.supply.keys import SigningKeyError, generate_key, load_public_key, load_signer
from shipyard.supply.provenance import sign_statement


def test_keygen_keeps_an_existing_key_and_writes_it_private(tmp_path):
    private, public, made = generate_key(tmp_path / "keys" / "k.pem")
    assert made and private.stat().st_mode & 0o777 == 0o600
    assert public.name == "k.pub.pem" and b"BEGIN PUBLIC KEY" in public.read_bytes()
    before = private.read_bytes()
    assert generate_key(private) == (private, public, False)
    assert private.read_bytes() == before


def test_the_variable_wins_over_the_file_and_the_key_is_never_in_an_error(tmp_path, monkeypatch):
    file_key, file_pub, _ = generate_key(tmp_path / "file.pem")
    env_key, env_pub, _ = generate_key(tmp_path / "env.pem")
    settings = SupplyChain(signing_key_file="file.pem", signing_key_env="SHIPYARD_TEST_SIGNING_KEY",
                           builder_id="https://example.invalid/b")
    monkeypatch.delenv("SHIPYARD_TEST_SIGNING_KEY", raising=False)
    signer, where = load_signer(settings, tmp_path)
    assert where == str(file_key)
    monkeypatch.setenv("SHIPYARD_TEST_SIGNING_KEY", env_key.read_text())
    signer, where = load_signer(settings, tmp_path)
    assert where == "$SHIPYARD_TEST_SIGNING_KEY"
    envelope = Envelope.from_dict(json.loads(sign_statement({"_type": "x"}, signer)))
    envelope.verify([load_public_key(env_pub)], 1)
    with pytest.raises(VerificationError):
        envelope.verify([load_public_key(file_pub)], 1)
    # Not an Ed25519 key: the error names where it came from, and no byte of it.
    ec = generate_private_key(SECP256R1()).private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                         serialization.NoEncryption()).decode()
    monkeypatch.setenv("SHIPYARD_TEST_SIGNING_KEY", ec)
    with pytest.raises(SigningKeyError) as info:
        load_signer(settings, tmp_path)
    assert "$SHIPYARD_TEST_SIGNING_KEY" in str(info.value) and "not an Ed25519 key" in str(info.value)
    assert ec.splitlines()[1] not in str(info.value)


def test_no_key_anywhere_says_how_to_make_one(tmp_path, monkeypatch):
    monkeypatch.delenv("SHIPYARD_TEST_SIGNING_KEY", raising=False)
    settings = SupplyChain(signing_key_file="keys/k.pem", signing_key_env="SHIPYARD_TEST_SIGNING_KEY",
                           builder_id="https://example.invalid/b")
    with pytest.raises(SigningKeyError, match=r"no signing key in the file keys/k.pem or \$SHIPYARD_TEST_SIGNING_KEY; "
                                              r"run `shipyard keygen`"):
        load_signer(settings, tmp_path)


def test_compare_names_each_differing_file_and_shows_diffoscope(tmp_path):
    import shutil
    import zipfile

    from shipyard.supply.repro import compare, summary_lines

    for run, payload in (("one", b"\x00" * 12), ("two", b"\x00" * 24)):
        dist = tmp_path / run / "dist"
        (dist / "whl" / "cpu" / "x").mkdir(parents=True)
        with zipfile.ZipFile(dist / "whl" / "cpu" / "x" / "x-1.0-py3-none-any.whl", "w") as zf:
            zf.writestr("x/_ext.so", b"ELF" + payload)
        (dist / "whl" / "cpu" / "index.html").write_text("same\n")
        (dist / "manifest.json").write_text(run)  # timings: never compared
    report = compare(tmp_path / "one" / "dist", tmp_path / "two" / "dist")
    assert not report.ok
    assert report.identical == ["whl/cpu/index.html"]
    assert list(report.different) == ["whl/cpu/x/x-1.0-py3-none-any.whl"]
    lines = "\n".join(summary_lines(report))
    assert "wheel: 0 of 1 identical" in lines and "DIFFERENT: whl/cpu/x/x-1.0-py3-none-any.whl" in lines
    assert shutil.which("diffoscope"), "diffoscope is missing: run ci/bootstrap.sh (it installs diffoscope-minimal)"
    # diffoscope's report names the member that differs.
    assert "x/_ext.so" in report.different["whl/cpu/x/x-1.0-py3-none-any.whl"], lines


def test_image_sbom_lists_wheels_pins_and_bases_and_is_stable():
    from shipyard.supply.sbom import ImageContents, image_sbom

    contents = ImageContents(
        repository="ember", version="1.7.0",
        release_wheels=(("ember-1.7.0+cpu-cp311-cp311-manylinux_2_35_x86_64.whl", "ab" * 32),
                        ("emberaudio-1.7.0-py3-none-any.whl", "cd" * 32)),
        pins=("numpy==2.1.3",), bases=(("base", "debian:bookworm-slim", "sha256:" + "ef" * 32),))
    first, second = image_sbom(contents, epoch=1603800000), image_sbom(contents, epoch=1603800000)
    assert first == second  # no clock, no random serial: the image's label can name its sha256
    bom = json.loads(first)
    assert bom["metadata"]["component"]["purl"] == "pkg:docker/ember@1.7.0"
    by_name = {c["name"]: c for c in bom["components"]}
    assert by_name["ember"]["version"] == "1.7.0+cpu" and by_name["ember"]["hashes"][0]["content"] == "ab" * 32
    assert by_name["numpy"]["version"] == "2.1.3"
    assert by_name["debian:bookworm-slim"]["type"] == "container"
    assert by_name["debian:bookworm-slim"]["hashes"][0]["content"] == "ef" * 32
