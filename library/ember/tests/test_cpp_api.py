"""The C++ API: a downstream CMake project finds the INSTALLED wheel's libember and runs."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import ember

pytestmark = pytest.mark.feature("ember.cpp-api")

SOURCE = Path(__file__).resolve().parent / "cpp_api"
# Ninja where it is installed (as every build of ember uses), else make: cmake's default
# generator needs make, which a machine with cmake may lack (Debian's cmake only recommends it).
GENERATOR = ["-G", "Ninja"] if shutil.which("ninja") else []
# The consumer links libember's C++ API, so it must use the C++ library libember was built with: the
# compiler shipyard built the wheel with (SHIPYARD_CXX: zig's clang and libc++ for a manylinux2014
# wheel, the sysroot's g++ and libstdc++ for manylinux_2_31), else g++ (a wheel built elsewhere).
CXX = os.environ.get("SHIPYARD_CXX") or "g++"
MISSING = [tool for tool in ("cmake", CXX) if shutil.which(tool) is None]
if not (GENERATOR or shutil.which("make")):
    MISSING.append("ninja or make")


def _run(argv, **kwargs):
    """Run a build step; a failure shows what the tool printed."""
    done = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{' '.join(argv)}: exit {done.returncode}\n{done.stdout}{done.stderr}"


def test_wheel_ships_the_cpp_api():
    # <package>/share/cmake in a wheel, <env>/lib/cmake in a conda environment (libember).
    prefix = Path(ember.cmake_prefix_path)
    package = prefix.parent.parent
    assert (prefix / "ember" / "emberConfig.cmake").is_file()
    assert (prefix / "ember" / "emberConfigVersion.cmake").is_file()
    assert (package / "include" / "ember" / "kernels.h").is_file()
    assert (package / "lib" / "libember.so").is_file()


@pytest.mark.skipif(bool(MISSING), reason=f"needs {', '.join(MISSING)} on PATH")
def test_cpp_program_builds_against_installed_wheel_and_runs(tmp_path):
    build = tmp_path / "build"
    env = dict(os.environ, CXX=shutil.which(CXX))
    _run(["cmake", "-S", str(SOURCE), "-B", str(build), *GENERATOR, "-DCMAKE_BUILD_TYPE=Release",
          f"-DCMAKE_PREFIX_PATH={ember.cmake_prefix_path}"], env=env)
    _run(["cmake", "--build", str(build), "-j2"], env=env)
    exe = build / "ember_cpp_api_check"
    result = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 failure(s)" in result.stdout
    # The program uses the wheel's libember, not some other copy.
    ldd = subprocess.run(["ldd", str(exe)], capture_output=True, text=True).stdout
    lib = Path(ember.cmake_prefix_path).parent.parent / "lib" / "libember.so"
    assert str(lib) in ldd or os.path.realpath(str(lib)) in ldd
