"""The real release: ember's wheels built, repaired, checked and tested on every Python.

These are the README's main job (`nox -s build-cpu`) and `nox -s build-cuda11`, run against
this repository, so CI proves them from a clean clone. Their output goes to a temporary dist
folder and the suite's state folder, never into the checkout's dist/ and .shipyard/.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tempfile
import zipfile
from pathlib import Path

import pytest
from support.report_release import expected_cell_count
from support.sysroot_debs import deb_versions, installed_sysroot

from shipyard.cli import main
from shipyard.host.toolchains.discover import discover
from shipyard.host.toolchains.glibc import glibc_required, glibc_tuple
from shipyard.record.manifest import read_manifest
from shipyard.release.validate import load_spec
from shipyard.supply.keys import public_key_path

pytestmark = pytest.mark.slow

NATIVE_COMPONENTS = ("ember", "embervision")
# one py3-none-any cell each, for every variant
PURE_COMPONENTS = ("emberaudio", "emberelastic", "ember-variant-provider")


def _manifest(dist: Path) -> dict[str, dict]:
    data = json.loads((dist / "manifest.json").read_text())
    return {a["cell_id"]: a for a in data["artifacts"]}


def _pythons(repo: Path) -> list[str]:
    return [p for p in load_spec(repo).release.pythons if discover().interpreter(p)]


def test_build_cpu_main_job(repo, tmp_path, suite_state, capsys, monkeypatch):
    # As the nox session does, provenance gets signed; the key comes as CI passes it (the
    # variable release.yaml names), so that no key file is written into the checkout.
    key = tmp_path / "keys" / "provenance-ed25519.pem"
    assert main(["--root", str(repo), "keygen", "--out", str(key)]) == 0
    supply_chain = load_spec(repo).release.supply_chain
    assert supply_chain is not None and supply_chain.signing_key_env
    monkeypatch.setenv(supply_chain.signing_key_env, key.read_text())
    dist = tmp_path / "dist"
    # --install-toolchain as the nox session passes: the bullseye sysroot and zig's wrappers for glibc 2.17
    code = main(["--root", str(repo), "build", "--variant", "cpu", "--install-toolchain", "--dist", str(dist),
                 "--state", str(suite_state)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "provenance: " in out and "signed" in out, out
    pythons = _pythons(repo)
    assert pythons == ["3.9", "3.10", "3.11", "3.12", "3.13"]
    cells = _manifest(dist)
    expected = {f"{c}-cpu-linux-x86_64-cp{p.replace('.', '')}-wheel": "1.7.0+cpu"
                for c in NATIVE_COMPONENTS for p in pythons} | {f"{c}-any-wheel": "1.7.0" for c in PURE_COMPONENTS}
    # and ember's manylinux2014 wheels (zig's clang for glibc 2.17), each tested with its own wheel
    older = {f"ember-cpu-linux-x86_64-manylinux2014-cp{p.replace('.', '')}-wheel": "1.7.0+cpu" for p in pythons}
    expected |= older
    assert {c for c in cells if c.endswith("-wheel")} >= set(expected)
    for cell_id, installed in expected.items():
        record = cells[cell_id]
        assert record["build"]["result"] in ("passed", "cached"), record["build"]
        assert record["tests"]["installed"] == installed
        failed = {f: r for f, r in record["tests"]["features"].items() if r["result"] == "failed"}
        assert not {f for f, r in failed.items() if r["status"] == "stable"}, failed
    for cell_id in older:  # the C++ API's consumer built with zig's c++, as libember was
        assert cells[cell_id]["tests"]["features"]["ember.cpp-api"]["result"] == "passed", cells[cell_id]["tests"]
        assert cells[cell_id]["name"].endswith("-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"), cells[cell_id]
        for member, needed in _glibc_needs(dist / "whl" / "cpu" / "ember" / cells[cell_id]["name"]).items():
            assert not needed or glibc_tuple(needed) <= (2, 17), (cell_id, member, needed)
    # The Windows prototype's native tests (mingw + wine) ran and passed; a skip is no pass.
    windows = cells["ember-cpu-linux-x86_64-cp313-wheel"]["tests"]["features"]["distributed.windows"]
    assert windows["result"] == "passed" and windows["skipped"] == 0, windows
    ember = dist / "whl" / "cpu" / "ember" / "ember-1.7.0+cpu-cp311-cp311-manylinux_2_31_x86_64.whl"
    with zipfile.ZipFile(ember) as zf:
        names = set(zf.namelist())
        info = json.loads(zf.read("ember/_build_info.json"))
    # Compiled against the bullseye sysroot: no ELF file of any wheel needs a glibc newer than 2.31.
    for wheel in (dist / "whl" / "cpu").glob("*/*-manylinux_*.whl"):
        assert wheel.name.endswith("-manylinux_2_31_x86_64.whl"), wheel.name
        needs = _glibc_needs(wheel)
        assert any(needs.values()), needs  # the core and vendored libraries do call into glibc
        for member, needed in needs.items():
            assert not needed or glibc_tuple(needed) <= (2, 31), (wheel.name, member, needed)
    assert "ember/include/ember/kernels.h" in names
    assert any(n.startswith("ember/lib/libember") for n in names)
    assert info["variant"] == "cpu" and info["cuda_archs"] == []
    vision = next((dist / "whl" / "cpu" / "embervision").glob("*cp311*.whl"))
    with zipfile.ZipFile(vision) as zf:
        vendored = [n for n in zf.namelist() if n.startswith("embervision.libs/")]
        extension = next(n for n in zf.namelist() if n.startswith("embervision/_C."))
        needed = {name: _needed(zf.read(name)) for name in (extension, "embervision/lib/libembervision.so")}
    assert any("libpng" in n for n in vendored) and any("libjpeg" in n for n in vendored), vendored
    # The codecs live in the core, built once per variant and shipped in the wheel; the
    # per-Python extension links only the core.
    assert "libembervision.so" in needed[extension], needed
    assert not any("png" in lib or "jpeg" in lib for lib in needed[extension]), needed
    assert any("libpng" in lib for lib in needed["embervision/lib/libembervision.so"]), needed
    _assert_sbom_lists_what_is_vendored(vision, vendored)
    # Every artifact of the main job: signature, signed digest, RECORD and SBOM.
    public_key = public_key_path(key)
    capsys.readouterr()
    code = main(["verify", str(dist), "--public-key", str(public_key)])
    out = capsys.readouterr().out
    assert code == 0, out
    # What `nox -s report` and `nox -s notes` run after this job, on its real manifest.
    assert main(["--root", str(repo), "report", "--dist", str(dist)]) == 0
    page = (dist / "report" / "index.html").read_text()
    states = dict(re.findall(r'data-cell="([^"]+)" data-state="([a-z]+)"', page))
    assert len(states) == expected_cell_count(load_spec(repo), read_manifest(dist / "manifest.json"))
    assert {states[cell_id] for cell_id in expected} == {"passed"}, states  # a cached build says so apart
    assert main(["--root", str(repo), "notes", "--dist", str(dist)]) == 0
    notes = (dist / "RELEASE_NOTES.md").read_text()
    assert "\n## Stable features\n\n- **CPU kernels" in notes and "\n## Known issues\n" in notes


def _glibc_needs(wheel: Path) -> dict[str, str]:
    """The newest GLIBC_ symbol version each shared library in a wheel needs."""
    found = {}
    with zipfile.ZipFile(wheel) as zf, tempfile.TemporaryDirectory() as tmp:
        for name in zf.namelist():
            if ".so" in name.rsplit("/", 1)[-1]:
                found[name] = glibc_required(Path(zf.extract(name, tmp)))
    assert found, wheel.name
    return found


def _assert_sbom_lists_what_is_vendored(wheel: Path, vendored: list[str]) -> None:
    """The wheel's SBOM names each vendored library with the bullseye .deb (and its version) that
    put the original into the sysroot the wheel was linked against, not this host's package."""
    sysroot = installed_sysroot("bullseye")
    debs = deb_versions(sysroot)
    with zipfile.ZipFile(wheel) as zf:
        sbom = next(n for n in zf.namelist() if ".dist-info/sboms/" in n)
        bom = json.loads(zf.read(sbom))
    listed = {}
    for component in bom["components"]:
        props = {p["name"]: p["value"] for p in component.get("properties", [])}
        if props.get("shipyard:role") == "vendored":
            listed[props["shipyard:wheel-path"]] = (component["name"], component["version"])
            # its path in the suite, and that file of the sysroot is the one auditwheel copied
            original = sysroot.tree / props["shipyard:original-file"].lstrip("/")
            assert hashlib.sha256(original.read_bytes()).hexdigest() == component["hashes"][0]["content"], props
            assert component["purl"].endswith("?arch=amd64&distro=bullseye"), component["purl"]
    assert set(listed) == set(vendored), (listed, vendored)
    packages = {name: version for name, version in listed.values()}
    assert set(packages) == {"libpng16-16", "libjpeg62-turbo"}, packages
    for package, version in packages.items():
        assert version == debs[package], (package, version, debs[package])


def _needed(elf: bytes) -> list[str]:
    """The DT_NEEDED entries of a shared library."""
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    sections = ELFFile(io.BytesIO(elf)).iter_sections()
    return [t.needed for s in sections if isinstance(s, DynamicSection) for t in s.iter_tags()
            if t.entry.d_tag == "DT_NEEDED"]
