"""The real release's CUDA variants: ember's and embervision's wheels compiled with nvcc for
every arch, linked and arch-checked on every Python, and (cuda11) tested on one Python with no
GPU here.

`nox -s build-cuda11` run against this repository (with `--test-python`), so CI proves it from a
clean clone. With no GPU a component's suite exercises the CPU fallback, which the main job
(test_release_build.py) already runs on every Python; here it runs once, and the other Pythons'
cells say they were not tested. Output goes to a temporary dist folder and the suite's state
folder, never into the checkout.
"""

from __future__ import annotations

import io
import json
import re
import tempfile
import zipfile
from pathlib import Path

import pytest

from shipyard.cli import main
from shipyard.host.toolchains.cuobjdump import cuda_device_code
from shipyard.host.toolchains.discover import discover
from shipyard.host.toolchains.resolve import Toolchain, resolve
from shipyard.release.cuda_archs import DeviceCode, expected_device_code
from shipyard.release.matrix import expand
from shipyard.release.validate import load_spec

pytestmark = [pytest.mark.slow, pytest.mark.cuda_toolkit]  # --install-toolchain assembles each

COMPONENTS = ("ember", "embervision")
TESTED = "3.11"


def _manifest(dist: Path) -> dict[str, dict]:
    data = json.loads((dist / "manifest.json").read_text())
    return {a["cell_id"]: a for a in data["artifacts"]}


def _pythons(repo: Path) -> list[str]:
    return [p for p in load_spec(repo).release.pythons if discover().interpreter(p)]


def _has_fatbin(elf: bytes) -> bool:
    from elftools.elf.elffile import ELFFile

    return ELFFile(io.BytesIO(elf)).get_section_by_name(".nv_fatbin") is not None


def _device_code(wheel: Path, cuobjdump: Path) -> DeviceCode:
    """The SASS and PTX archs of every binary in the wheel, as the toolkit's cuobjdump lists them."""
    found = DeviceCode()
    with zipfile.ZipFile(wheel) as zf, tempfile.TemporaryDirectory() as tmp:
        for name in zf.namelist():
            if ".so" in name.rsplit("/", 1)[-1] and _has_fatbin(zf.read(name)):
                found |= cuda_device_code(Path(zf.extract(name, tmp)), cuobjdump)
    return found


def test_build_cuda11_checks_the_archs_of_every_python_and_tests_one(repo, tmp_path, suite_state, capsys):
    dist = tmp_path / "dist"
    code = main(["--root", str(repo), "build", "--variant", "cuda11", "--install-toolchain",
                 "--component", "ember", "--component", "embervision", "--test-python", TESTED,
                 "--dist", str(dist), "--state", str(suite_state)])
    out = capsys.readouterr().out
    assert code == 0, out
    spec = load_spec(repo)
    variant = spec.release.variants["cuda11"]
    pythons = _pythons(repo)
    assert TESTED in pythons and len(pythons) > 1, pythons
    cells = _manifest(dist)
    expected_code = expected_device_code(variant.archs)
    for component in COMPONENTS:
        for python in pythons:
            cell_id = f"{component}-cu118-linux-x86_64-cp{python.replace('.', '')}-wheel"
            record = cells[cell_id]
            wheel = dist / record["path"]
            assert wheel.name.startswith(f"{component}-1.7.0+cu118-cp{python.replace('.', '')}-"), wheel.name
            # Every Python's wheel holds code for exactly the variant's arch list (+PTX for the highest).
            cell = next(c for c in expand(spec.release) if c.id == cell_id)
            toolchain = resolve(cell, spec.release, discover())
            assert isinstance(toolchain, Toolchain) and toolchain.cuda and toolchain.cuda.cuobjdump, toolchain
            assert _device_code(wheel, toolchain.cuda.cuobjdump) == expected_code, cell_id
            # ...and the manifest records what its binaries carry, as the arch check read them.
            assert record["cuda_archs"] == {
                "sass": sorted(expected_code.sass, key=lambda n: int(n[3:])),
                "ptx": [p.replace("sm_", "compute_") for p in expected_code.ptx]}, record["cuda_archs"]
            if python == TESTED:
                # Installed from the cu118 index by name, imported and tested with no GPU here: the CPU fallback.
                assert record["build"]["result"] in ("passed", "cached"), record["build"]
                assert record["tests"]["result"] == "passed", record["tests"]
                assert record["tests"]["installed"] == "1.7.0+cu118"
                failed = {f for f, r in record["tests"]["features"].items() if r["result"] == "failed"}
                assert not failed, failed
            else:
                # Built and arch-checked, not tested, and saying so: never "passed", never "cached".
                assert record["tests"] is None, record["tests"]
                assert record["build"]["result"] == "not tested", record["build"]
                assert f"--test-python {TESTED}" in record["build"]["detail"], record["build"]
    # What the user reads: the summary table and its count, then the report's grid.
    text = " ".join(out.split())
    untested = len(COMPONENTS) * (len(pythons) - 1)
    assert re.search(r"ember-cu118-linux-x86_64-cp39-wheel │ not tested │", text), out
    assert f"{untested} built and checked, not tested (--test-python {TESTED})" in text, out
    assert main(["--root", str(repo), "report", "--dist", str(dist)]) == 0
    page = (dist / "report" / "index.html").read_text()
    states = dict(re.findall(r'data-cell="([^"]+)" data-state="([a-z-]+)"', page))
    assert states["ember-cu118-linux-x86_64-cp39-wheel"] == "skipped", states  # shown as "built, not tested"
    assert states[f"ember-cu118-linux-x86_64-cp{TESTED.replace('.', '')}-wheel"] == "passed", states
    # embervision's CUDA kernels are compiled once, into the core; the per-Python extension has none.
    vision = next((dist / "whl" / "cu118" / "embervision").glob("*cp311*.whl"))
    with zipfile.ZipFile(vision) as zf:
        extension = next(n for n in zf.namelist() if n.startswith("embervision/_C."))
        fatbins = {name: _has_fatbin(zf.read(name)) for name in (extension, "embervision/lib/libembervision.so")}
    assert fatbins == {extension: False, "embervision/lib/libembervision.so": True}, fatbins


@pytest.mark.parametrize("variant", ["cuda12", "cuda13"])
def test_newer_cuda_variants_compile_link_and_pass_the_arch_check(repo, variant, tmp_path, suite_state, capsys):
    dist = tmp_path / "dist"
    code = main(["--root", str(repo), "build", "--variant", variant, "--install-toolchain", "--python", "3.11",
                 "--component", "ember", "--component", "embervision", "--no-tests",
                 "--dist", str(dist), "--state", str(suite_state)])
    out = capsys.readouterr().out
    assert code == 0, out
    tag = load_spec(repo).release.variants[variant].tag
    for component in ("ember", "embervision"):
        wheel = next((dist / "whl" / tag / component).glob("*cp311*.whl"))
        with zipfile.ZipFile(wheel) as zf:
            info = json.loads(zf.read(f"{component}/_build_info.json"))
        assert info["variant_tag"] == tag and info["cuda_archs"], info
