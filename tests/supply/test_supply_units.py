"""The provenance key: made once, found where release.yaml says, never printed; statements sign and verify;
a library vendored from a sysroot traced to the suite's .deb."""

from __future__ import annotations

import hashlib
import json
import subprocess
import tarfile
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError

from shipyard.errors import VERIFY_FAILED, BuildError, SigningKeyError
from shipyard.host.toolchains.sysroot import DebPackage, Sysroot, record_deb_owners
from shipyard.release.destinations import SupplyChain
from shipyard.supply.grafted import identify
from shipyard.supply.image_repro import Entry, SavedImage, compare_images, save_image
from shipyard.supply.keys import generate_key, load_public_key, load_signer
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


def test_repro_counts_an_sdist_and_a_mobile_tarball_by_their_records_not_their_common_ending(tmp_path):
    """Both end in .tar.gz: the manifest's record says which kind each is; an unrecorded one is
    counted by no kind's name it may not have."""
    from support.synthetic_release import record, write_manifest

    from shipyard.supply.repro import compare, summary_lines

    for run in ("one", "two"):
        dist = tmp_path / run / "dist"
        for folder, name in (("sdist", "x-1.0.tar.gz"), ("mobile", "x-lite-1.0-host.tar.gz"),
                             ("mobile", "x-lite-1.0-host-stray.tar.gz")):
            (dist / folder).mkdir(parents=True, exist_ok=True)
            (dist / folder / name).write_bytes(b"same bytes " + name.encode())
        write_manifest(dist, [record(dist, dist / "sdist" / "x-1.0.tar.gz", component="x", package_type="sdist",
                                     variant="any", tag="any", tests=None),
                              record(dist, dist / "mobile" / "x-lite-1.0-host.tar.gz", component="x-lite",
                                     package_type="mobile", variant="cpu", tag="cpu", tests=None)])
    report = compare(tmp_path / "one" / "dist", tmp_path / "two" / "dist")
    assert report.ok
    lines = list(summary_lines(report))
    assert "sdist: 1 of 1 identical" in lines and "mobile: 1 of 1 identical" in lines, lines
    assert "other: 1 of 1 identical" in lines, lines  # the unrecorded tarball: no kind guessed for it


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
    from shipyard.host import docker_base
    from shipyard.host.docker_base import docker_client

    base = docker_base.bootstrap_base_image()
    (tmp_path / "copied").mkdir()
    (tmp_path / "copied" / "file").write_text("copied\n")
    (tmp_path / "Dockerfile").write_text(f"FROM {base}\nRUN echo same > /same && date +%s%N > /clock\n"
                                         "RUN mkdir -p /opt/d && echo one > /opt/d/one\n"
                                         "COPY copied/ /srv/c/\n")
    client = docker_client()
    ids = []
    try:
        for n in range(2):
            if n:
                # The COPY stamps the folders it writes into with the build's clock, in whole
                # seconds: two builds within one second gave the same folders (a race: the
                # comparison then found nothing to say of them).
                time.sleep(1.1)
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


# --- verify: the default key, and every check on every kind of artifact ----------------------

MINIRELEASE = Path(__file__).parent.parent / "fixtures" / "minirelease"
EPOCH = 1603800000


def _release(tmp_path: Path) -> Path:
    """The fixture release's description (no build), with its signing key made by `shipyard keygen`."""
    import shutil

    from shipyard.cli import main

    root = tmp_path / "release"
    shutil.copytree(MINIRELEASE, root, ignore=shutil.ignore_patterns("dist", ".shipyard", "__pycache__"))
    assert main(["--root", str(root), "keygen"]) == 0
    return root


def _sign_into(dist: Path, root: Path, artifacts: list[tuple[Path, str, str]]) -> None:
    """Record `artifacts` ((file in dist, package type, version)) in dist/manifest.json and sign
    each with the release's key, as a build does at its end."""
    from shipyard.record.manifest import ArtifactRecord, merge_artifacts
    from shipyard.supply.keys import signer_from_pem
    from shipyard.supply.provenance import BuildDefinition, envelope_path, statement

    key = root / ".shipyard" / "keys" / "provenance-ed25519.pem"
    signer = signer_from_pem(key.read_bytes(), str(key))
    definition = BuildDefinition("0" * 64, "0" * 40, "https://example.invalid/src", "https://example.invalid/b")
    records = []
    for path, kind, version in artifacts:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        record = ArtifactRecord(name=path.name, path=path.relative_to(dist).as_posix(), sha256=digest,
                                size=path.stat().st_size, cell_id=f"{path.name}-cell", component="demo",
                                package_type=kind, variant="cpu", variant_tag="cpu", platform="linux-x86_64",
                                python=None, version=version, features=(), tests=None, build={})
        envelope = envelope_path(dist, record)
        envelope.parent.mkdir(parents=True, exist_ok=True)
        envelope.write_bytes(sign_statement(statement(record, digest, definition), signer))
        records.append(record.model_copy(update={"provenance": envelope.relative_to(dist).as_posix()}))
    merge_artifacts(dist / "manifest.json", release="fixtures", version="0.3.0", records=records)


def _run_verify(capsys, *args: str) -> tuple[int, str]:
    from shipyard.cli import main

    capsys.readouterr()
    code = main(["verify", *args])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _elf(tmp_path: Path, name: str, source: str = "int demo(void) { return 1; }\n", *,
         compiler: str = "gcc") -> bytes:
    """A real shared library, compiled here (a few hundred ms)."""
    suffix = ".cpp" if compiler.endswith("++") else ".c"
    src = tmp_path / f"{name}{suffix}"
    src.write_text(source)
    out = tmp_path / name
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-o", out, src], check=True, capture_output=True)
    return out.read_bytes()


def _wheel(tmp_path: Path, members: dict[str, bytes], name: str = "demo") -> Path:
    """A platform wheel holding `members`, packed by wheel's WheelFile (RECORD included)."""
    from wheel.wheelfile import WheelFile

    tree = tmp_path / "tree"
    if tree.exists():
        import shutil

        shutil.rmtree(tree)
    info = tree / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "WHEEL").write_text("Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
                                "Tag: cp311-cp311-linux_x86_64\n")
    for member, data in members.items():
        (tree / member).parent.mkdir(parents=True, exist_ok=True)
        (tree / member).write_bytes(data)
    wheel = tmp_path / "raw" / f"{name}-1.0-cp311-cp311-linux_x86_64.whl"
    wheel.parent.mkdir(exist_ok=True)
    with WheelFile(wheel, "w") as wf:
        wf.write_files(str(tree))
    return wheel


def test_verify_without_flags_uses_the_public_key_beside_release_yamls_signing_key(tmp_path, monkeypatch, capsys):
    root = _release(tmp_path)
    dist = root / "dist"
    (dist / "misc").mkdir(parents=True)
    blob = dist / "misc" / "notes.txt"
    blob.write_text("an artifact with nothing inside to check\n")
    _sign_into(dist, root, [(blob, "other", "0.3.0")])
    monkeypatch.chdir(root)
    code, out = _run_verify(capsys, "dist")  # as a user first types it
    assert code == 0, out
    assert "notes.txt" in out and "1 of 1 artifacts verified" in out
    # --public-key picks another key: the signature check then fails.
    _, other, _ = generate_key(tmp_path / "other.pem")
    code, out = _run_verify(capsys, "dist", "--public-key", str(other))
    assert code == VERIFY_FAILED and "notes.txt: signature: FAILED" in out
    # No public key beside the signing key: one line with the fix, exit 2.
    public = root / ".shipyard" / "keys" / "provenance-ed25519.pub.pem"
    public.unlink()
    code, out = _run_verify(capsys, "dist")
    lines = [line for line in out.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, out
    assert out.startswith("error: .shipyard/keys/provenance-ed25519.pub.pem: no such public key file (beside "
                          "supply_chain.signing_key_file .shipyard/keys/provenance-ed25519.pem); run `shipyard "
                          "keygen` to write it, or pass --public-key FILE"), out
    assert "Traceback" not in out
    # A --public-key that does not exist: the same, exit 2.
    code, out = _run_verify(capsys, "dist", "--public-key", str(tmp_path / "nowhere.pub.pem"))
    assert code == 2 and "nowhere.pub.pem: (file): file not found; pass the .pub.pem" in out
    # Outside a release's folder, with no flag: where the key would come from, and the flag.
    monkeypatch.chdir(tmp_path)
    code, out = _run_verify(capsys, str(dist))
    assert code == 2 and "release.yaml: not found" in out and "--public-key FILE" in out


def test_a_library_anywhere_in_a_wheel_is_in_its_sbom_and_verify_finds_one_that_is_not(tmp_path, capsys):
    """The SBOM lists every binary of the wheel: a copy of a host library outside `.libs` as
    vendored and traced to its .deb, the component's own extension as built (its sha256); verify
    fails a wheel that holds a library its SBOM does not name, wherever it lies."""
    from shipyard.host.toolchains.resolve import Toolchain
    from shipyard.supply.sbom import read_wheel_sbom, wheel_sbom_files
    from shipyard.wheel.repair import relabel_wheel

    root = _release(tmp_path)
    dist = root / "dist"
    zlib = Path("/lib/x86_64-linux-gnu/libz.so.1").resolve()  # zlib1g: on every Debian
    extension = _elf(tmp_path, "_ext.so")

    def packed(members: dict[str, bytes]) -> Path:
        raw = _wheel(tmp_path, {"demo/__init__.py": b"", **members})
        sbom = wheel_sbom_files(raw, Toolchain(None, None, None, None), version="1.0", epoch=EPOCH)
        return relabel_wheel(raw, label=None, extra_files=sbom, out_dir=dist / "whl" / "cpu" / "demo", epoch=EPOCH)

    wheel = packed({"demo/_ext.cpython-311-x86_64-linux-gnu.so": extension, "demo/lib/libz.so.1": zlib.read_bytes()})
    import zipfile

    with zipfile.ZipFile(wheel) as zf:
        listing = read_wheel_sbom(zf)
    assert listing is not None
    assert listing.vendored == {"demo/lib/libz.so.1": f"zlib1g {_deb_version('zlib1g')}"}
    assert listing.built == {"demo/_ext.cpython-311-x86_64-linux-gnu.so": hashlib.sha256(extension).hexdigest()}
    _sign_into(dist, root, [(wheel, "wheel", "1.0")])
    public = str(root / ".shipyard" / "keys" / "provenance-ed25519.pub.pem")
    code, out = _run_verify(capsys, str(dist), "--public-key", public)
    assert code == 0, out
    assert "lists every binary: 1 built, vendored: zlib1g" in out

    # A library bundled beside the extension after the SBOM was made: RECORD and signature agree
    # (the wheel was re-packed and re-signed), the SBOM check does not.
    import shutil

    shutil.rmtree(dist)
    raw = _wheel(tmp_path, {"demo/__init__.py": b"", "demo/_ext.cpython-311-x86_64-linux-gnu.so": extension})
    sbom = wheel_sbom_files(raw, Toolchain(None, None, None, None), version="1.0", epoch=EPOCH)
    smuggled = _wheel(tmp_path, {"demo/__init__.py": b"", "demo/_ext.cpython-311-x86_64-linux-gnu.so": extension,
                                 "demo/plugins/libextra.so.2": _elf(tmp_path, "libextra.so.2")})
    wheel = relabel_wheel(smuggled, label=None, extra_files=sbom, out_dir=dist / "whl" / "cpu" / "demo", epoch=EPOCH)
    _sign_into(dist, root, [(wheel, "wheel", "1.0")])
    code, out = _run_verify(capsys, str(dist), "--public-key", public)
    assert code == VERIFY_FAILED, out
    assert f"{wheel.name}: sbom: FAILED" in out
    assert "record: FAILED" not in out and "subject: FAILED" not in out and "signature: FAILED" not in out
    assert "demo/plugins/libextra.so.2 is a shared library or ELF file the SBOM does not list" in out
    assert "0 of 1 artifacts verified" in out


def _deb_version(package: str) -> str:
    return subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package], check=True, capture_output=True,
                          text=True).stdout


def _conda(path: Path, payload: dict[str, bytes | str], listed: dict[str, bytes | str] | None = None) -> Path:
    """A .conda package (zip of metadata.json, pkg- and info- tar.zst) whose payload is `payload`
    ({path: bytes, or the target of a soft link}) and whose info/paths.json describes `listed`
    (default: the payload), then given its SBOM and normalised as the conda build does."""
    import io
    import zipfile

    import zstandard

    from shipyard.conda.normalize import normalize_conda_package
    from shipyard.supply.sbom import CONDA_SBOM, conda_sbom

    def tar_zst(files: dict[str, bytes | str]) -> bytes:
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
            for name, data in sorted(files.items()):
                info = tarfile.TarInfo(name)
                if isinstance(data, str):
                    info.type, info.linkname = tarfile.SYMTYPE, data
                    tar.addfile(info)
                else:
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        return zstandard.ZstdCompressor().compress(raw.getvalue())

    def entry(name: str, data: bytes | str, files: dict[str, bytes | str]) -> dict:
        if isinstance(data, str):
            target = files[str(Path(name).parent / data)]
            assert isinstance(target, bytes)
            return {"_path": name, "path_type": "softlink", "sha256": hashlib.sha256(target).hexdigest(),
                    "size_in_bytes": len(data)}
        return {"_path": name, "path_type": "hardlink", "sha256": hashlib.sha256(data).hexdigest(),
                "size_in_bytes": len(data)}

    described = payload if listed is None else listed
    paths = {"paths": [entry(n, d, described) for n, d in sorted(described.items())], "paths_version": 1}
    index = {"name": "demo", "version": "1.0", "build": "h0_0", "build_number": 0, "depends": [],
             "subdir": "linux-64", "arch": "x86_64", "platform": "linux"}
    stem = path.name.removesuffix(".conda")
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("metadata.json", json.dumps({"conda_pkg_format_version": 2}))
        zf.writestr(f"pkg-{stem}.tar.zst", tar_zst(payload))
        zf.writestr(f"info-{stem}.tar.zst", tar_zst({"info/index.json": json.dumps(index).encode(),
                                                     "info/paths.json": json.dumps(paths).encode()}))
    normalize_conda_package(path, epoch=EPOCH, info_files={CONDA_SBOM: conda_sbom(path, epoch=EPOCH)})
    return path


@pytest.mark.parametrize(("change", "named"), [
    ("none", None),
    ("a changed byte", "lib/libdemo.so.1.0 has sha256"),
    ("an extra file", "lib/extra.so is in the package but not listed"),
    ("a missing file", "bin/demo is listed but not in the package"),
    ("a link elsewhere", "lib/libdemo.so.1 has sha256"),
])
def test_a_conda_package_is_checked_file_by_file_against_its_paths_json(tmp_path, capsys, change, named):
    root = _release(tmp_path)
    dist = root / "dist"
    (dist / "conda" / "linux-64").mkdir(parents=True)
    good: dict[str, bytes | str] = {"lib/libdemo.so.1.0": b"\x7fELF demo", "lib/libdemo.so.1": "libdemo.so.1.0",
                                    "lib/other.so": b"\x7fELF other", "bin/demo": b"#!/bin/sh\n"}
    payload = dict(good)
    if change == "a changed byte":
        payload["lib/libdemo.so.1.0"] = b"\x7fELF demO"
    elif change == "an extra file":
        payload["lib/extra.so"] = b"\x7fELF extra"
    elif change == "a missing file":
        del payload["bin/demo"]
    elif change == "a link elsewhere":
        payload["lib/libdemo.so.1"] = "other.so"
    package = _conda(dist / "conda" / "linux-64" / "demo-1.0-h0_0.conda", payload, good)
    _sign_into(dist, root, [(package, "conda", "1.0")])
    code, out = _run_verify(capsys, str(dist), "--public-key",
                            str(root / ".shipyard" / "keys" / "provenance-ed25519.pub.pem"))
    if named is None:
        assert code == 0, out
        assert "every file matches info/paths.json" in out
    else:
        assert code == VERIFY_FAILED, out
        # Signed as it is: only the paths check fails.
        assert "demo-1.0-h0_0.conda: paths: FAILED: info/paths.json: " in out and named in out, out
        assert "subject: FAILED" not in out and "signature: FAILED" not in out and "sbom: FAILED" not in out


def test_a_mobile_tarball_carries_an_sbom_of_its_binaries_and_what_they_link(tmp_path, capsys):
    from shipyard.mobile.packaging import write_reproducible_tarball
    from shipyard.supply.binaries import archive_files
    from shipyard.supply.grafted import SYSTEM_LIBRARY_DIRS
    from shipyard.supply.sbom import MOBILE_SBOM, mobile_sbom, read_mobile_sbom

    root = _release(tmp_path)
    dist = root / "dist"
    library = _elf(tmp_path, "libember_lite.so", '#include <string>\nextern "C" int el(const char* s) '
                   '{ return (int) std::string(s).size(); }\n', compiler="g++")

    def package(stage_files: dict[str, bytes], *, sbom_of: dict[str, bytes] | None = None) -> Path:
        """ember-lite's tarball as the mobile build writes it; `sbom_of`: the files its SBOM was made from."""
        import shutil

        for name in ("stage", "sbom-stage"):
            shutil.rmtree(tmp_path / name, ignore_errors=True)
        stage = tmp_path / "stage"
        for name, data in stage_files.items():
            (stage / name).parent.mkdir(parents=True, exist_ok=True)
            (stage / name).write_bytes(data)
        source = stage
        if sbom_of is not None:
            source = tmp_path / "sbom-stage"
            for name, data in sbom_of.items():
                (source / name).parent.mkdir(parents=True, exist_ok=True)
                (source / name).write_bytes(data)
        (stage / MOBILE_SBOM).parent.mkdir(parents=True, exist_ok=True)
        (stage / MOBILE_SBOM).write_bytes(mobile_sbom(source, name="ember-lite", version="1.7.0", target="host",
                                                      library_dirs=SYSTEM_LIBRARY_DIRS, provided_by=None,
                                                      epoch=EPOCH))
        return write_reproducible_tarball(stage, dist / "mobile" / "ember-lite-1.7.0-host.tar.gz",
                                          top_dir="ember-lite-1.7.0-host", epoch=EPOCH)

    public = str(root / ".shipyard" / "keys" / "provenance-ed25519.pub.pem")
    files = {"lib/libember_lite.so": library, "include/ember_lite.h": b"int el(const char*);\n"}
    tarball = package(files)
    with tarfile.open(tarball) as tar:
        listing = read_mobile_sbom(archive_files(tar))
    assert listing is not None and listing.version == "1.7.0"
    assert listing.built == {"lib/libember_lite.so": hashlib.sha256(library).hexdigest()}
    # What the runtime links, traced to the .debs that install it here.
    assert listing.linked["libstdc++.so.6"] == f"libstdc++6 {_deb_version('libstdc++6')}"
    assert listing.linked["libc.so.6"] == f"libc6 {_deb_version('libc6')}"
    _sign_into(dist, root, [(tarball, "mobile", "1.7.0")])
    code, out = _run_verify(capsys, str(dist), "--public-key", public)
    assert code == 0, out
    assert "libstdc++.so.6" in out

    # A library added after the SBOM was made, signed anyway: named.
    extra = _elf(tmp_path, "libextra.so")
    tarball = package({**files, "lib/libextra.so": extra}, sbom_of=files)
    _sign_into(dist, root, [(tarball, "mobile", "1.7.0")])
    code, out = _run_verify(capsys, str(dist), "--public-key", public)
    assert code == VERIFY_FAILED, out
    assert "ember-lite-1.7.0-host.tar.gz: sbom: FAILED" in out
    assert "lib/libextra.so is a shared library or ELF file the SBOM does not list" in out

    # An SBOM that leaves out what the runtime links (made for a build that linked nothing).
    tarball = package(files, sbom_of={"lib/libember_lite.so": library[:4]})
    _sign_into(dist, root, [(tarball, "mobile", "1.7.0")])
    code, out = _run_verify(capsys, str(dist), "--public-key", public)
    assert code == VERIFY_FAILED and "libstdc++.so.6 is linked but not listed" in out, out
    assert "lib/libember_lite.so has sha256" in out

    # A tarball without one (as built before mobile SBOMs).
    import shutil

    stage = tmp_path / "bare"
    shutil.copytree(tmp_path / "stage", stage)
    (stage / MOBILE_SBOM).unlink()
    tarball = write_reproducible_tarball(stage, dist / "mobile" / "ember-lite-1.7.0-host.tar.gz",
                                         top_dir="ember-lite-1.7.0-host", epoch=EPOCH)
    _sign_into(dist, root, [(tarball, "mobile", "1.7.0")])
    code, out = _run_verify(capsys, str(dist), "--public-key", public)
    assert code == VERIFY_FAILED and f"no CycloneDX SBOM at <top folder>/{MOBILE_SBOM}" in out, out
