"""Verified CUDA architectures: what a CUDA wheel's binaries really carry (the arch check's reading
with the toolkit's cuobjdump, never release.yaml's list) travels in the manifest, the wheel's
_build_info.json, its CycloneDX SBOM and the report's artifact table.

One small build of the fixture's CUDA kernel for two archs on one Python, no tests: fixcuda gets
a second kernel-bearing library compiled for the higher arch only. The arch check holds the
union of the binaries to the list (it passes), while a GPU of the lower arch could not run the
second library: what the wheel records is what every binary carries, the fewer."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest
from support.minirelease import make_checkout

from shipyard.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.cuda_toolkit]

DECLARED = "7.0;8.0"
CELL = "fixcuda-cu118-linux-x86_64-cp311-wheel"
# A second library with the kernel, for sm_80 (and its PTX) only.
HIGHER_ONLY = """
set(_extra_obj ${CMAKE_CURRENT_BINARY_DIR}/kernel_extra.o)
add_custom_command(
  OUTPUT ${_extra_obj}
  COMMAND ${SHIPYARD_NVCC} -c ${CMAKE_CURRENT_SOURCE_DIR}/csrc/kernel.cu -o ${_extra_obj}
          -ccbin ${SHIPYARD_CUDA_HOST_CXX} -O2 -Xcompiler -fPIC
          -gencode arch=compute_80,code=sm_80 -gencode arch=compute_80,code=compute_80
  DEPENDS csrc/kernel.cu)
add_library(fixcuda_extra SHARED ${_extra_obj})
target_link_libraries(fixcuda_extra PRIVATE ${SHIPYARD_CUDA_HOME}/lib64/libcudart.so)
set_target_properties(fixcuda_extra PROPERTIES LINKER_LANGUAGE CXX)
install(TARGETS fixcuda_extra DESTINATION fixcuda)
"""


@pytest.fixture(scope="module")
def cuda_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_checkout(tmp_path_factory.mktemp("archs") / "release")
    spec = root / "release.yaml"
    spec.write_text(spec.read_text().replace('arch_list: "3.7;5.0;6.0;7.0;7.5;8.0;8.6;9.0"',
                                             f'arch_list: "{DECLARED}"'))
    cmake = root / "library" / "fixcuda" / "CMakeLists.txt"
    cmake.write_text(cmake.read_text() + HIGHER_ONLY)
    assert main(["--root", str(root), "toolchain", "install", "cuda11"]) == 0  # kept when there
    code = main(["--root", str(root), "build", "--variant", "cuda11", "--python", "3.11", "--component", "fixcuda",
                 "--no-tests"])
    assert code == 0
    return root


def _wheel(root: Path) -> Path:
    return next((root / "dist" / "whl" / "cu118" / "fixcuda").glob("*cp311*.whl"))


def test_the_manifest_records_what_every_binary_carries_not_the_declared_list(cuda_build):
    manifest = json.loads((cuda_build / "dist" / "manifest.json").read_text())
    record = next(a for a in manifest["artifacts"] if a["cell_id"] == CELL)
    assert record["cuda_archs"] == {"sass": ["sm_80"], "ptx": ["compute_80"]}, record
    with zipfile.ZipFile(_wheel(cuda_build)) as zf:
        info = json.loads(zf.read("fixcuda/_build_info.json"))
        assert {n for n in zf.namelist() if n.endswith(".so") and "libcudart" not in n} >= {
            "fixcuda/libfixcuda_extra.so"}
    assert info["verified_cuda_archs"] == {"sass": ["sm_80"], "ptx": ["compute_80"]}, info
    assert info["cuda_archs"] == ["7.0", "8.0"]  # the declared list, as the library reports it


def test_the_wheel_sbom_and_the_report_name_the_verified_archs(cuda_build):
    with zipfile.ZipFile(_wheel(cuda_build)) as zf:
        bom = json.loads(zf.read(next(n for n in zf.namelist() if "/sboms/" in n)))
    properties = {p["name"]: p["value"] for p in bom["metadata"]["component"]["properties"]}
    assert properties == {"shipyard:cuda:sass": "sm_80", "shipyard:cuda:ptx": "compute_80"}
    assert main(["--root", str(cuda_build), "report", "--dist", str(cuda_build / "dist")]) == 0
    page = (cuda_build / "dist" / "report" / "index.html").read_text()
    row = next(r for r in re.findall(r"<tr>.*?</tr>", page, flags=re.S) if _wheel(cuda_build).name in r)
    assert "sm_80" in row and "compute_80" in row and "sm_70" not in row, row
