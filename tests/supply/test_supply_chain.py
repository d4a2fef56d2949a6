"""Supply chain on the fixture release: the SBOM inside a wheel, signed provenance, `shipyard
verify` on good artifacts and on each kind of tampering, and `shipyard repro`: the suite's one
proof that two builds in different folders are the same bytes.

The SBOM and verify tests read the suite's one build of the fixture release (conftest's
minirelease_build: signed, as `nox -s build-cpu` does); tampering happens in copies of its dist/."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support.minirelease import make_checkout
from support.sysroot_debs import deb_versions, installed_sysroot
from support.user_installs import plain_pip_env

from shipyard.cli import main
from shipyard.errors import VERIFY_FAILED
from shipyard.supply.keys import generate_key
from shipyard.supply.repro import CLONE_PATHS, ReproRequest, reproduce, summary_lines

pytestmark = pytest.mark.slow

FIXCEXT = "fixcext-0.3.0+cpu-cp313-cp313-manylinux_2_31_x86_64.whl"
FIXCEXT_CELL = "fixcext-cpu-linux-x86_64-cp313-wheel"


@pytest.fixture
def signed_build(minirelease_build):
    """The fixture release's CPU wheels for Pythons 3.9 and 3.13, built and signed as `nox -s
    build-cpu` does. Read only: a test that changes an artifact changes a copy."""
    return minirelease_build


def _public_key(root: Path) -> str:
    return str(root / ".shipyard" / "keys" / "provenance-ed25519.pub.pem")


def _verify(target: Path, key: str, capsys) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["verify", str(target), "--public-key", key])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _copy(root: Path, tmp_path: Path) -> Path:
    dist = tmp_path / "dist"
    shutil.copytree(root / "dist", dist)
    return dist


def test_the_wheel_sbom_names_the_libpng_inside_it(signed_build):
    wheel = signed_build / "dist" / "whl" / "cpu" / "fixcext" / FIXCEXT
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        sboms = [n for n in names if "/sboms/" in n]
        bom = json.loads(zf.read(sboms[0]))
        record = zf.read("fixcext-0.3.0+cpu.dist-info/RECORD").decode()
    # Ours only: auditwheel's own SBOM named the version before relabelling.
    assert sboms == ["fixcext-0.3.0+cpu.dist-info/sboms/fixcext.cdx.json"]
    assert f"{sboms[0]},sha256=" in record
    assert bom["metadata"]["component"]["version"] == "0.3.0+cpu"
    vendored = [n for n in names if n.startswith("fixcext.libs/")]
    assert len(vendored) == 1 and "libpng16" in vendored[0], vendored
    libs = {c["name"]: c for c in bom["components"]
            if {"name": "shipyard:role", "value": "vendored"} in c["properties"]}
    assert set(libs) == {"libpng16-16"}
    png = libs["libpng16-16"]
    # Linked against the bullseye sysroot: its libpng, from the bullseye .deb (1.6.37-3), not this host's.
    sysroot = installed_sysroot("bullseye")
    assert png["version"] == deb_versions(sysroot)["libpng16-16"]
    # named by its path in the suite (not this machine's cache path), and it is that file of the sysroot
    original = next(p["value"] for p in png["properties"] if p["name"] == "shipyard:original-file")
    assert original.startswith("/usr/lib/x86_64-linux-gnu/libpng16.so.16"), original
    assert hashlib.sha256((sysroot.tree / original.lstrip("/")).read_bytes()).hexdigest() == png["hashes"][0]["content"]
    assert png["purl"] == f"pkg:deb/debian/libpng16-16@{png['version']}?arch=amd64&distro=bullseye", png["purl"]
    assert {"name": "shipyard:wheel-path", "value": vendored[0]} in png["properties"]
    # Nothing in it depends on where this machine keeps its toolchains (the sysroot, its g++).
    assert str(sysroot.root) not in json.dumps(bom) and "/.cache/" not in json.dumps(bom), bom
    # The component's own binaries are in it too, as built files with their sha256: the extension
    # and the native core beside it (outside fixcext.libs/).
    with zipfile.ZipFile(wheel) as zf:
        own = {n: hashlib.sha256(zf.read(n)).hexdigest() for n in names
               if n.startswith("fixcext/") and ".so" in n}
    built = {c["name"]: c["hashes"][0]["content"] for c in bom["components"]
             if {"name": "shipyard:role", "value": "built"} in c["properties"]}
    assert built == own and "fixcext/lib/libfixcore.so" in built, (built, own)
    tools = {c["name"]: c["version"] for c in bom["components"] if c.get("scope") == "excluded"}
    assert tools["cpython"].startswith("3.13.") and tools["gcc"].split(".")[0].isdigit(), tools


def test_verify_passes_on_the_built_dist_and_on_one_artifact(signed_build, capsys, monkeypatch):
    key = _public_key(signed_build)
    monkeypatch.chdir(signed_build)
    capsys.readouterr()
    code = main(["verify", "dist"])  # the key beside release.yaml's, as `shipyard keygen` wrote it
    out = capsys.readouterr().out
    assert code == 0, out
    assert "3 of 3 artifacts verified" in out
    envelope = json.loads((signed_build / "dist" / "provenance" / f"{FIXCEXT_CELL}.intoto.jsonl").read_text())
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    code, out = _verify(signed_build / "dist" / "whl" / "cpu" / "fixcext" / FIXCEXT, key, capsys)
    assert code == 0, out
    assert "1 of 1 artifacts verified" in out


def test_a_flipped_byte_fails_the_subject_check(signed_build, tmp_path, capsys):
    dist = _copy(signed_build, tmp_path)
    wheel = dist / "whl" / "cpu" / "fixcext" / FIXCEXT
    data = bytearray(wheel.read_bytes())
    data[len(data) // 2] ^= 0x01
    wheel.write_bytes(bytes(data))
    code, out = _verify(dist, _public_key(signed_build), capsys)
    assert code == VERIFY_FAILED
    assert f"{FIXCEXT}: subject: FAILED" in out and "changed after signing" in out
    assert "2 of 3 artifacts verified" in out


def test_a_wrong_key_fails_the_signature_check(signed_build, tmp_path, capsys):
    _, other, _ = generate_key(tmp_path / "other.pem")
    code, out = _verify(signed_build / "dist", str(other), capsys)
    assert code == VERIFY_FAILED
    assert f"{FIXCEXT}: signature: FAILED" in out and "not signed by the given public key" in out
    assert "fixpure-0.3.0-py3-none-any.whl: signature: FAILED" in out


def test_a_missing_sbom_entry_fails_the_sbom_check_even_when_re_signed(signed_build, tmp_path, capsys):
    """Drop libpng from the SBOM, rebuild RECORD and re-sign: signature and digest pass, the SBOM check fails."""
    from wheel.wheelfile import WheelFile

    dist = _copy(signed_build, tmp_path)
    wheel = dist / "whl" / "cpu" / "fixcext" / FIXCEXT
    tree = tmp_path / "tree"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(tree)
    sbom = tree / "fixcext-0.3.0+cpu.dist-info" / "sboms" / "fixcext.cdx.json"
    bom = json.loads(sbom.read_text())
    bom["components"] = [c for c in bom["components"] if c["name"] != "libpng16-16"]
    sbom.write_text(json.dumps(bom))
    (tree / "fixcext-0.3.0+cpu.dist-info" / "RECORD").unlink()
    wheel.unlink()
    with WheelFile(wheel, "w") as wf:
        wf.write_files(str(tree))
    # The manifest follows the new bytes, and the artifact is signed again with the right key.
    manifest = json.loads((dist / "manifest.json").read_text())
    for artifact in manifest["artifacts"]:
        if artifact["name"] == FIXCEXT:
            artifact["sha256"] = hashlib.sha256(wheel.read_bytes()).hexdigest()
            artifact["size"] = wheel.stat().st_size
    (dist / "manifest.json").write_text(json.dumps(manifest))
    assert main(["--root", str(signed_build), "attest", "--dist", str(dist)]) == 0
    code, out = _verify(dist, _public_key(signed_build), capsys)
    assert code == VERIFY_FAILED
    assert f"{FIXCEXT}: signature: FAILED" not in out and f"{FIXCEXT}: subject: FAILED" not in out
    assert f"{FIXCEXT}: sbom: FAILED" in out
    assert "fixcext.libs/libpng16-" in out and "is vendored but not listed" in out


def test_a_tampered_statement_fails_the_signature_check(signed_build, tmp_path, capsys):
    import base64

    dist = _copy(signed_build, tmp_path)
    path = dist / "provenance" / f"{FIXCEXT_CELL}.intoto.jsonl"
    envelope = json.loads(path.read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["runDetails"]["builder"]["id"] = "https://attacker.invalid"
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    path.write_text(json.dumps(envelope))
    code, out = _verify(dist, _public_key(signed_build), capsys)
    assert code == VERIFY_FAILED
    assert f"{FIXCEXT}: signature: FAILED" in out


def test_repro_reports_every_artifact_identical(tmp_path):
    """Two clean builds from clones at paths of different lengths, compared byte for byte."""
    root = make_checkout(tmp_path / "release")
    work = tmp_path / "repro"
    report = reproduce(root, ReproRequest(variant="cpu", pythons=("3.11",), work=work))
    lines = "\n".join(summary_lines(report))
    assert report.ok, lines
    # fixcext for 3.11, and fixpure in the index of every variant it stands for (cpu, cu102, cu118).
    assert report.by_kind()["wheel"] == (4, 4), lines
    assert sorted(p for p in report.identical if p.endswith(".whl")) == [
        "whl/cpu/fixcext/fixcext-0.3.0+cpu-cp311-cp311-manylinux_2_31_x86_64.whl",
        *(f"whl/{tag}/fixpure/fixpure-0.3.0-py3-none-any.whl" for tag in ("cpu", "cu102", "cu118"))]
    assert report.by_kind()["index"][0] == report.by_kind()["index"][1] > 0, lines
    assert "(100 %)" in lines
    # The two builds were made in folders whose paths differ in length.
    one, two = (work / clone for clone in CLONE_PATHS)
    assert (one / "dist" / "manifest.json").is_file() and (two / "dist" / "manifest.json").is_file()
    assert len(str(one)) != len(str(two))


@pytest.mark.cuda_toolkit  # shipyard toolchain install cuda11
def test_repro_of_a_cuda_wheel_is_identical(tmp_path):
    """nvcc's output, built twice from clones at paths of different lengths: the fixture's CUDA
    kernel (8 archs and +PTX) in fixcuda's cu118 wheel, vendored cudart included. The suite's one
    cu118 build of the fixture release: what the wheel holds is checked here too, and pip, given
    the cu118 index, installs the pure fixpure with the cu118 build of its native dependency
    fixcext (that the index resolves a variant's own wheels by name, and that their tests pass with
    no GPU, is ember's cuda11 build in test_release_cuda)."""
    root = make_checkout(tmp_path / "release")
    assert main(["--root", str(root), "toolchain", "install", "cuda11"]) == 0  # kept when there (any test order)
    work = tmp_path / "repro"
    report = reproduce(root, ReproRequest(variant="cuda11", pythons=("3.11",),
                                          components=("fixcuda", "fixcext", "fixpure"), work=work))
    lines = "\n".join(summary_lines(report))
    assert report.ok, lines
    name = "fixcuda-0.3.0+cu118-cp311-cp311-manylinux_2_31_x86_64.whl"
    assert f"whl/cu118/fixcuda/{name}" in report.identical, lines
    index = work / CLONE_PATHS[0] / "dist" / "whl" / "cu118"
    _check_cu118_wheel(index / "fixcuda" / name, tmp_path / "x")
    assert _pip_resolves(index, "fixpure", tmp_path / "pip-report.json") == {
        "fixpure": "0.3.0", "fixcext": "0.3.0+cu118"}


def _pip_resolves(index: Path, requirement: str, report: Path) -> dict[str, str]:
    """What `pip install <requirement>` with `index` as its only index would install (pip's own
    resolution, --dry-run): {name: version}. This machine's pip settings are left out."""
    subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                    "--disable-pip-version-check", "--isolated", "--index-url", index.as_uri(), "--report",
                    str(report), requirement], env=plain_pip_env(), check=True, timeout=300)
    return {item["metadata"]["name"]: item["metadata"]["version"] for item in json.loads(report.read_text())["install"]}


def _check_cu118_wheel(wheel: Path, scratch: Path) -> None:
    """fixcuda's cu118 wheel: the release's arch list in its build info, exactly that SASS and the
    highest arch's PTX in its binary, cudart vendored and the driver not, and the arch check
    on it fails a list that does not match, naming the wheel."""
    from shipyard.host.toolchains.cuobjdump import cuda_device_code
    from shipyard.host.toolchains.discover import discover
    from shipyard.wheel import checks

    with zipfile.ZipFile(wheel) as zf:
        members = zf.namelist()
        info = json.loads(zf.read("fixcuda/_build_info.json"))
        so = next(m for m in members if m.startswith("fixcuda/_fixcuda"))
        path = Path(zf.extract(so, scratch))
    assert info["cuda_version"] == "11.8" and info["cuda_archs"] == ["3.7", "5.0", "6.0", "7.0", "7.5", "8.0",
                                                                      "8.6", "9.0"]
    # cudart is vendored by auditwheel; the driver never is.
    assert any(m.startswith("fixcuda.libs/libcudart") for m in members)
    assert not any("libcuda.so" in m or "libcuda-" in m for m in members)
    toolkit = discover().cuda_toolkit("11.8")
    assert toolkit is not None
    code = cuda_device_code(path, toolkit.cuobjdump)
    assert code.sass == {"sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"}
    assert code.ptx == {"sm_90"}  # the implicit +PTX of the highest arch, for GPUs newer than 9.0
    # A list that misses the binary's archs is caught both ways, and so is PTX that is not for
    # the list's highest arch.
    failures = [str(f) for f in checks.check_cuda_archs(wheel, ("3.7", "5.0", "12.0"),
                                                          lambda p: cuda_device_code(p, toolkit.cuobjdump))]
    assert f"{wheel.name}: CUDA archs: missing SASS for sm_120" in failures
    assert (f"{wheel.name}: CUDA archs: SASS for archs not in the list: sm_60, sm_70, sm_75, sm_80, sm_86, sm_90"
            in failures)
    assert any(f.startswith(f"{wheel.name}: CUDA +PTX: missing PTX for sm_120") for f in failures)
    assert (f"{wheel.name}: CUDA +PTX: PTX for sm_90: only the highest arch of the list (sm_120) ships PTX"
            in failures)
