"""CUDA 10.2 can compile: nvcc 10.2 takes C++14 at most, so the C++ standard a native build gives
nvcc follows the toolkit (resources/cuda_toolkits.toml's cxx_standard, handed to CMake as
SHIPYARD_CUDA_CXX_STANDARD). No CUDA 10.2 nvcc exists on this machine: the check reads the nvcc
command ember's own CMake writes for a cuda10.2 build (`ninja -t commands`), and compiles ember's
kernels as C++14 with the CUDA 11.8 nvcc that is here."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from shipyard.host.toolchains.cuda_recipes import cuda_toolkit_recipe, nvcc_cxx_standard
from shipyard.host.toolchains.discover import Compiler, CudaToolkit
from shipyard.host.toolchains.obtain import obtain_cuda_toolkit
from shipyard.host.toolchains.resolve import Toolchain
from shipyard.release.validate import load_spec
from shipyard.wheel.native_core import shipyard_cmake_defines

REPO = Path(__file__).resolve().parents[2]
CORE = REPO / "library" / "ember" / "core"


def test_the_standard_follows_the_toolkit():
    assert nvcc_cxx_standard("10.2") == 14
    assert [nvcc_cxx_standard(v) for v in ("11.0", "11.8", "12.4", "13.0")] == [17, 17, 17, 17]
    assert nvcc_cxx_standard("12.6") == 17  # a host toolkit without a recipe: the newest older recipe's
    assert cuda_toolkit_recipe("10.2").cxx_standard == 14


def _cuda_defines(tmp_path: Path, variant_name: str) -> dict[str, str]:
    variant = load_spec(REPO).release.variants[variant_name]
    assert variant.cuda is not None
    root = tmp_path / f"cuda-{variant.cuda}"
    (root / "lib64").mkdir(parents=True, exist_ok=True)  # what ember's CMake looks for; nothing is linked
    (root / "lib64" / "libcudart_static.a").touch()
    host = Compiler(major=8, cc=Path("/usr/bin/gcc-8"), cxx=Path("/usr/bin/g++-8"), version="8.4.0")
    toolkit = CudaToolkit(version=variant.cuda, root=root, nvcc=root / "bin" / "nvcc", cuobjdump=None,
                          origin="CUDA_HOME", identity="test")
    return shipyard_cmake_defines(variant, Toolchain(interpreter=None, compiler=None, cuda=toolkit,
                                                     cuda_host_compiler=host))


@pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ninja")), reason="cmake and ninja are "
                    "ci/bootstrap.sh's apt packages; run it")
def test_ember_gives_nvcc_10_2_cxx14_and_the_host_compiler_shipyard_names(tmp_path):
    defines = _cuda_defines(tmp_path, "cuda10.2")
    assert defines["SHIPYARD_CUDA_CXX_STANDARD"] == "14"
    build = tmp_path / "build"
    configure = ["cmake", "-G", "Ninja", "-S", str(CORE), "-B", str(build), "-DEMBER_CORE_DISTRIBUTED=OFF",
                 *(f"-D{name}={value}" for name, value in defines.items())]
    done = subprocess.run(configure, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    commands = subprocess.run(["ninja", "-C", str(build), "-t", "commands"], capture_output=True, text=True,
                              timeout=60, check=True).stdout
    nvcc = [shlex.split(line.split("&&")[-1]) for line in commands.splitlines() if defines["SHIPYARD_NVCC"] in line]
    assert nvcc, commands[-3000:]
    argv = next(a for a in nvcc if a[0] == defines["SHIPYARD_NVCC"])
    print(" ".join(argv))
    assert "-std=c++14" in argv and not [a for a in argv if a.startswith("-std=") and a != "-std=c++14"]
    assert argv[argv.index("-ccbin") + 1] == "/usr/bin/g++-8"
    # SASS for each of 10.2's archs, PTX of the highest
    assert "arch=compute_37,code=sm_37" in argv and "arch=compute_75,code=compute_75" in argv
    # From CUDA 11 on, C++17 as before.
    assert _cuda_defines(tmp_path, "cuda11")["SHIPYARD_CUDA_CXX_STANDARD"] == "17"


@pytest.mark.slow
def test_embers_kernels_compile_as_cxx14(tmp_path):
    """With CUDA 11.8's nvcc, assembled here as `shipyard toolchain install cuda11` does (kept when there)."""
    toolkit = obtain_cuda_toolkit(load_spec(REPO).release.variants["cuda11"], progress=lambda _: None)
    kernels = sorted((CORE / "src" / "cuda").glob("*.cu"))
    assert kernels
    for source in kernels:
        done = subprocess.run([str(toolkit.nvcc), "-std=c++14", "-ccbin", str(toolkit.host_cxx), "-c", str(source),
                               "-o", str(tmp_path / f"{source.stem}.o"), "-I", str(CORE / "include"),
                               "-DEMBER_BUILDING", "-DEMBER_SHARED", "-gencode", "arch=compute_60,code=sm_60"],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
