"""The provenance key: made once, found where release.yaml says, never printed; statements sign and verify;
a library vendored from a sysroot traced to the suite's .deb."""

from __future__ import annotations

import hashlib
import json
import subprocess
import tarfile
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError

from shipyard.errors import BuildError
from shipyard.spec import SupplyChain
from shipyard.supply.grafted import identify
from shipyard.supply.image_repro import Entry, SavedImage, compare_images, save_image
from shipyard.supply.keys import SigningKeyError, generate_key, load_public_key, load_signer
from shipyard.supply.provenance import sign_statement
from shipyard.toolchains.sysroot import DebPackage, Sysroot, record_deb_owners


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


def _deb(folder: Path, package: str, version: str, source: str, files: dict[str, bytes]) -> Path:
    """A real .deb (dpkg-deb --build) holding `files` and, for each, its soname-style symlink."""
    root = folder / package
    for rel, data in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        (target.parent / target.name.rsplit(".", 2)[0]).symlink_to(target.name)  # libfoo.so.1 -> libfoo.so.1.2.3
    (root / "DEBIAN").mkdir()
    (root / "DEBIAN" / "control").write_text(
        f"Package: {package}\nVersion: {version}\nArchitecture: amd64\nSource: {source}\n"
        f"Maintainer: t <t@example.invalid>\nDescription: test\n")
    deb = folder / f"{package}_{version}_amd64.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", root, deb], check=True, capture_output=True)
    return deb


def test_a_library_grafted_from_a_sysroot_is_traced_to_the_suites_deb_not_the_hosts(tmp_path):
    library = b"\x7fELF bullseye libpng"
    digest = hashlib.sha256(library).hexdigest()
    deb = _deb(tmp_path / "debs", "libpng16-16", "1.6.37-3", "libpng1.6",
               {"usr/lib/x86_64-linux-gnu/libpng16.so.16.37.0": library})
    sysroot = Sysroot("bullseye", tmp_path / "sysroot", "2.31", 10, "10.2.1", "0123456789abcdef")
    sysroot.tree.mkdir(parents=True)
    subprocess.run(["dpkg-deb", "-x", deb, sysroot.tree], check=True)
    record_deb_owners([deb], "bullseye", sysroot.root / "owners.json")
    grafted = identify(f"embervision.libs/libpng16-{digest[:8]}.so.16.37.0", sysroot=sysroot)
    assert (grafted.package, grafted.version, grafted.arch, grafted.source_package, grafted.distro) == (
        "libpng16-16", "1.6.37-3", "amd64", "libpng1.6", "bullseye")
    # Its path in the suite, not in this machine's cache (the SBOM is the same wherever it was assembled).
    assert grafted.original_path == "/usr/lib/x86_64-linux-gnu/libpng16.so.16.37.0"
    assert grafted.sha256 == digest
    # Through its soname symlink, too (the loader's name for it).
    assert sysroot.debian_package(sysroot.tree / "usr/lib/x86_64-linux-gnu/libpng16.so.16") == DebPackage(
        "libpng16-16", "1.6.37-3", "amd64", "libpng1.6", "bullseye")
    # Other bytes than the ones grafted: named, never traced to the wrong file.
    with pytest.raises(BuildError, match=r"no libpng16\.so\.16\.37\.0 whose sha256 starts with 00000000 in .*sysroot"):
        identify("embervision.libs/libpng16-00000000.so.16.37.0", sysroot=sysroot)
    # A file no .deb of the sysroot unpacked.
    stray = sysroot.tree / "usr/lib/x86_64-linux-gnu/libstray.so.1.0.0"
    stray.write_bytes(b"stray")
    stray_hash = hashlib.sha256(b"stray").hexdigest()[:8]
    with pytest.raises(BuildError, match="belongs to no .deb of the bullseye sysroot"):
        identify(f"x.libs/libstray-{stray_hash}.so.1.0.0", sysroot=sysroot)


# --- images in repro ---------------------------------------------------------------------------

def _entry(content: bytes, mode: int = 0o644) -> Entry:
    return Entry(kind=b"0", mode=mode, owner=(0, 0), size=len(content), link="",
                 content=hashlib.sha256(content).hexdigest())


def _saved(created: str, container: str, diff_ids: list[str], layers: list[dict[str, tuple[Entry, int]]]) -> SavedImage:
    config = {"created": created, "container": container, "architecture": "amd64",
              "config": {"User": "ember", "Image": f"sha256:{container}", "Labels": {"a": "1"}},
              "container_config": {"Hostname": container[:12], "Image": f"sha256:{container}"},
              "history": [{"created": created, "created_by": f"step {i}"} for i in range(len(layers))],
              "rootfs": {"type": "layers", "diff_ids": diff_ids}}
    return SavedImage(config, tuple(layers))


def test_an_image_that_differs_only_in_build_times_is_identical_and_a_changed_file_is_named():
    same = {"usr/bin/tool": (_entry(b"tool"), 100)}
    first = _saved("2026-01-01T00:00:00Z", "a" * 64, ["sha256:1", "sha256:2"],
                   [same, {"opt/x": (_entry(b"x"), 100), "opt/y": (_entry(b"y"), 100)}])
    later = _saved("2026-01-01T01:00:00Z", "b" * 64, ["sha256:1", "sha256:2"],
                   [same, {"opt/x": (_entry(b"x"), 100), "opt/y": (_entry(b"y"), 100)}])
    assert compare_images("img:1", ("sha256:i1", "sha256:i2"), first, later).identical

    touched = _saved("2026-01-01T01:00:00Z", "b" * 64, ["sha256:1", "sha256:3"],
                     [same, {"opt/x": (_entry(b"x"), 200), "opt/y": (_entry(b"Y"), 100), "opt/z": (_entry(b"z"), 1)}])
    result = compare_images("img:1", ("sha256:i1", "sha256:i2"), first, touched)
    assert not result.identical and result.config_differences == ()
    assert [layer.identical for layer in result.layers] == [True, False]
    assert result.layers[1].mtimes_only == ("opt/x",) and result.layers[1].differing == ("opt/y", "opt/z")
    assert "layer 1: DIFFERENT (step 1): 1 entries differ only in mtime: opt/x; 2 differ in content or " \
           "metadata: opt/y, opt/z" in "\n".join(result.lines())

    relabelled = _saved("2026-01-01T00:00:00Z", "a" * 64, ["sha256:1", "sha256:2"], first.layers)
    relabelled.config["config"]["Labels"] = {"a": "2"}
    assert compare_images("img:1", ("sha256:i1", "sha256:i3"), first, relabelled).config_differences == (
        "config.Labels.a",)


def _directory(mode: int = 0o755) -> Entry:
    return Entry(kind=tarfile.DIRTYPE, mode=mode, owner=(0, 0), size=0, link="", content="")


def test_only_the_mtimes_of_a_copys_destination_directories_are_normalised():
    copy = "/bin/sh -c #(nop) COPY dir:0123abcd in /opt/python/ "
    files = {"opt/python/lib/x.py": (_entry(b"x"), 100)}

    def saved(stamp: int, extra: dict[str, tuple[Entry, int]], diff_id: str) -> SavedImage:
        image = _saved("2026-01-01T00:00:00Z", "a" * 64, ["sha256:base", diff_id],
                       [{}, {"opt": (_directory(), stamp), "opt/python": (_directory(), stamp), **files, **extra}])
        image.config["history"][1]["created_by"] = copy
        return image

    result = compare_images("img:1", ("sha256:i1", "sha256:i2"), saved(100, {}, "sha256:c1"),
                            saved(200, {}, "sha256:c2"))
    assert not result.identical and result.reproducible and result.verdict() == "identical (normalised)"
    assert result.layers[1].copy_directories == ("opt", "opt/python")
    assert "identical but for the mtimes of the directories a COPY writes into" in result.lines()[0]
    # A file's mtime, or a directory the COPY does not write into, is never normalised.
    for extra in ({"opt/python/lib/y.py": (_entry(b"y"), 0)}, {"srv": (_directory(), 0)}):
        later = {path: (entry, 300) for path, (entry, _) in extra.items()}
        other = compare_images("img:1", ("sha256:i1", "sha256:i2"), saved(100, extra, "sha256:c1"),
                               saved(200, later, "sha256:c2"))
        assert not other.reproducible and other.verdict() == "DIFFERENT", other.lines()
    # The same directories touched by a RUN step are not normalised either.
    run = saved(200, {}, "sha256:c2")
    run.config["history"][1]["created_by"] = "/bin/sh -c mkdir -p /opt/python"
    assert not compare_images("img:1", ("sha256:i1", "sha256:i2"), saved(100, {}, "sha256:c1"), run).reproducible


def test_two_builds_of_one_dockerfile_are_compared_layer_by_layer_in_the_engine(docker_engine, tmp_path):
    """The classic builder of docker.io 20.10, as `shipyard repro --images` uses it: a step that
    writes the same bytes gives a layer that differs only in mtimes, one that writes the clock
    differs in that file; the base layer is identical."""
    from shipyard import docker_base
    from shipyard.image.build import docker_client

    base = docker_base.bootstrap_base_image()
    (tmp_path / "copied").mkdir()
    (tmp_path / "copied" / "file").write_text("copied\n")
    (tmp_path / "Dockerfile").write_text(f"FROM {base}\nRUN echo same > /same && date +%s%N > /clock\n"
                                         "RUN mkdir -p /opt/d && echo one > /opt/d/one\n"
                                         "COPY copied/ /srv/c/\n")
    client = docker_client()
    ids = []
    try:
        for _ in range(2):
            image, _log = client.images.build(path=str(tmp_path), nocache=True, rm=True, forcerm=True, pull=False)
            ids.append(image.id)
        saved = [save_image(client, image, tmp_path / f"saved-{n}.tar") for n, image in enumerate(ids)]
    finally:
        for image in set(ids):
            client.images.remove(image, force=True)
    result = compare_images("probe", (ids[0], ids[1]), *saved)
    assert ids[0] != ids[1] and not result.identical and result.config_differences == ()
    base_layers = len(saved[0].layers) - 3
    assert all(layer.identical for layer in result.layers[:base_layers])
    clock, written, copied = result.layers[base_layers:]
    assert clock.differing == ("clock",) and clock.mtimes_only == ("same",)  # same bytes, later mtime
    assert written.differing == () and set(written.mtimes_only) == {"opt", "opt/d", "opt/d/one"}
    assert not written.normalised  # a RUN step's clock is the Dockerfile's to fix (LAYER_EPOCH)
    # The COPY keeps the file's time and stamps the directories it writes into with the clock.
    assert copied.differing == () and set(copied.mtimes_only) == {"srv", "srv/c"} and copied.normalised
