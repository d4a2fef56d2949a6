"""The core's toolchain probes (FindThreads' results, native_core.toolchain_probes) and CMake's
platform files (native_core.cmake_platform) handed to each Python's configure: CMake skips the
checks and reaches the answers it reached by itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from shipyard.plumbing import command
from shipyard.wheel.native_core import cmake_platform, seed_cmake_platform, toolchain_probes

# As CMake 3.25 writes them (the bullseye sysroot: pthread_create needs -lpthread before glibc 2.34).
CACHE = """\
//Test CMAKE_HAVE_LIBC_PTHREAD
CMAKE_HAVE_LIBC_PTHREAD:INTERNAL=
//Have library pthreads
CMAKE_HAVE_PTHREADS_CREATE:INTERNAL=
//Have library pthread
CMAKE_HAVE_PTHREAD_CREATE:INTERNAL=1
CMAKE_CXX_COMPILER:FILEPATH=/usr/bin/g++
HAVE_PNG_H:INTERNAL=1
"""


def _configure(source: Path, build: Path, defines: dict[str, str], *options: str) -> str:
    """What `cmake -S source -B build` prints, given `defines` as -D options."""
    return command.run(["cmake", "-S", source, "-B", build, *options, *[f"-D{k}={v}" for k, v in defines.items()]],
                       timeout=300).stdout


def test_only_findthreads_results_are_taken_from_the_cores_cache(tmp_path):
    (tmp_path / "CMakeCache.txt").write_text(CACHE)
    assert toolchain_probes(tmp_path) == {"CMAKE_HAVE_LIBC_PTHREAD": "", "CMAKE_HAVE_PTHREADS_CREATE": "",
                                          "CMAKE_HAVE_PTHREAD_CREATE": "1"}


def test_a_core_without_threads_or_without_a_cache_hands_over_nothing(tmp_path):
    assert toolchain_probes(tmp_path) == {}
    (tmp_path / "CMakeCache.txt").write_text("CMAKE_CXX_COMPILER:FILEPATH=/usr/bin/g++\n")
    assert toolchain_probes(tmp_path) == {}


@pytest.mark.slow
def test_a_configure_given_the_probes_skips_the_checks_and_links_threads_the_same_way(tmp_path):
    source = tmp_path / "project"
    source.mkdir()
    (source / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(probe LANGUAGES CXX)\nfind_package(Threads REQUIRED)\n"
        'message(STATUS "threads link: [${CMAKE_THREAD_LIBS_INIT}]")\n')

    def configure(build: Path, defines: dict[str, str]) -> str:
        return _configure(source, build, defines)

    first = configure(tmp_path / "core", {})
    assert "Performing Test CMAKE_HAVE_LIBC_PTHREAD" in first
    probes = toolchain_probes(tmp_path / "core")
    assert "CMAKE_HAVE_LIBC_PTHREAD" in probes
    second = configure(tmp_path / "python", probes)
    assert "Performing Test" not in second and "Looking for pthread_create" not in second
    assert [ln for ln in second.splitlines() if "threads link:" in ln] == \
        [ln for ln in first.splitlines() if "threads link:" in ln]


def test_a_build_tree_without_platform_files_hands_over_nothing(tmp_path):
    (tmp_path / "CMakeCache.txt").write_text("CMAKE_STRIP:FILEPATH=/usr/bin/strip\n")
    assert cmake_platform(tmp_path) == {}
    assert seed_cmake_platform(tmp_path / "python", {}) == {}
    assert not (tmp_path / "python").exists()


@pytest.mark.slow
def test_a_configure_given_the_cores_platform_files_skips_compiler_detection_and_builds_the_same(tmp_path):
    source = tmp_path / "project"
    source.mkdir()
    (source / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(probe LANGUAGES CXX)\n"
        "add_library(probe SHARED probe.cpp)\ninstall(TARGETS probe LIBRARY DESTINATION lib)\n")
    (source / "probe.cpp").write_text("int probe() { return 42; }\n")

    def configure(build: Path, defines: dict[str, str]) -> str:
        return _configure(source, build, defines, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release")

    def commands(build: Path) -> str:
        """What ninja would run (compile, link), with the build folder's own path taken out."""
        return command.run(["ninja", "-C", build, "-t", "commands"], timeout=60).stdout.replace(str(build), "B")

    first = configure(tmp_path / "core", {})
    assert "The CXX compiler identification" in first
    platform = cmake_platform(tmp_path / "core")
    assert any(name.endswith("/CMakeCXXCompiler.cmake") for name in platform["files"])
    defines = seed_cmake_platform(tmp_path / "python", platform)
    assert defines["CMAKE_PLATFORM_INFO_INITIALIZED"] == "1" and defines["CMAKE_STRIP"]
    second = configure(tmp_path / "python", defines)
    assert "compiler identification" not in second and "Detecting CXX compiler ABI" not in second
    # CMake kept the files it was handed and the tools it found (CMAKE_STRIP: an install that
    # strips), and compiles and links as the core's configure would.
    assert cmake_platform(tmp_path / "python") == platform
    assert commands(tmp_path / "python") == commands(tmp_path / "core")
    unseeded = configure(tmp_path / "again", {})
    assert "The CXX compiler identification" in unseeded
    assert cmake_platform(tmp_path / "again")["files"] == platform["files"]
