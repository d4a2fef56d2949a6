"""ember's C++ core in the configurations the wheel build does not cover.

- The portable C++17 paths (``-DEMBER_PORTABLE_ONLY=ON``: no GCC vector extensions, no
  ``__atomic`` builtins, no AVX kernels; what MSVC compiles) give bit-for-bit the results of
  the GNU vector paths on the same instruction set.
- The whole core (kernels, fft, distributed) builds with clang++ ``-Wall -Wextra -Werror``.
- The whole core builds as Windows DLLs with mingw-w64, and its checks pass under wine.
- ember's C++ tests (core, distributed, ember-lite) pass under ASan+UBSan, and the thread
  pool and the process group under TSan; any sanitizer report fails the test.

Each configuration is configured and built once per session, under pytest's tmp folder, with
the C++ checks of library/ember/tests/cpp_api (built from source by its from_source project).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from shipyard.plumbing.command import Completed, run

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
EMBER = REPO / "library" / "ember"
CHECKS = EMBER / "tests" / "cpp_api" / "from_source"
LITE = REPO / "library" / "ember-lite"
MINGW_TOOLCHAIN = EMBER / "windows" / "mingw-w64-x86_64.cmake"
WINE = shutil.which("wine64") or ("/usr/lib/wine/wine64" if Path("/usr/lib/wine/wine64").exists() else None)
MINGW_OBJDUMP = shutil.which("x86_64-w64-mingw32-objdump")

# Sanitizer runtimes: stop at the first report, and make the exit status say so.
SANITIZER_ENV = {
    "ASAN_OPTIONS": "abort_on_error=0:halt_on_error=1:detect_leaks=1:exitcode=86",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
    "TSAN_OPTIONS": "halt_on_error=1:exitcode=66:second_deadlock_stack=1",
}
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:", "WARNING: ThreadSanitizer")


@dataclass(frozen=True)
class NativeBuild:
    """One configured and built CMake tree."""

    name: str
    build_dir: Path
    bin_dir: Path

    def binary(self, name: str) -> Path:
        path = self.bin_dir / name
        return path if path.exists() else path.with_suffix(".exe")

    def compile_commands(self) -> dict[str, str]:
        """Source file name -> its compile command."""
        entries = json.loads((self.build_dir / "compile_commands.json").read_text())
        return {Path(e["file"]).name: e["command"] for e in entries}

    def run(self, args: Sequence[str], *, extra_env: Mapping[str, str] | None = None,
            timeout: float = 180) -> Completed:
        return run([str(self.binary(args[0])), *args[1:]], cwd=self.bin_dir, timeout=timeout, check=False,
                   extra_env={**SANITIZER_ENV, **(extra_env or {})})


class NativeBuilds:
    """Builds each named configuration once per session, -j2, in a tmp folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.builds: dict[str, NativeBuild] = {}

    def get(self, name: str, source: Path, cmake_args: Sequence[str], targets: Sequence[str], *,
            bin_subdir: str = "bin", extra_env: Mapping[str, str] | None = None) -> NativeBuild:
        if name not in self.builds:
            if not shutil.which("cmake"):
                pytest.skip("cmake is not installed")
            build_dir = self.root / name
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            run(["cmake", "-S", str(source), "-B", str(build_dir), *generator,
                 "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON", *cmake_args],
                extra_env=extra_env, what=f"configure {name}")
            run(["cmake", "--build", str(build_dir), "--parallel", "2", "--target", *targets],
                extra_env=extra_env, what=f"build {name}")
            self.builds[name] = NativeBuild(name, build_dir, build_dir / bin_subdir)
        return self.builds[name]


@pytest.fixture(scope="session")
def native_builds(tmp_path_factory: pytest.TempPathFactory) -> NativeBuilds:
    return NativeBuilds(tmp_path_factory.mktemp("ember-native"))


CORE_CHECKS = ("kernels_check", "process_group_check", "store_test", "collectives_test")


@pytest.fixture(scope="session")
def portable_build(native_builds: NativeBuilds) -> NativeBuild:
    # -Wpedantic (added by EMBER_PORTABLE_ONLY) with -Werror: no GNU-only construct compiles.
    return native_builds.get("portable", CHECKS, ["-DCMAKE_BUILD_TYPE=Release", "-DEMBER_PORTABLE_ONLY=ON",
                                                  "-DCMAKE_CXX_FLAGS=-Werror"], ["kernels_check"])


@pytest.fixture(scope="session")
def asan_build(native_builds: NativeBuilds) -> NativeBuild:
    return native_builds.get("asan-ubsan", CHECKS, ["-DCMAKE_BUILD_TYPE=Release",
                                                    "-DEMBER_SANITIZE=address,undefined"], CORE_CHECKS)


@pytest.fixture(scope="session")
def tsan_build(native_builds: NativeBuilds) -> NativeBuild:
    return native_builds.get("tsan", CHECKS, ["-DCMAKE_BUILD_TYPE=Release", "-DEMBER_SANITIZE=thread"],
                             ["kernels_check", "process_group_check"])


@pytest.fixture(scope="session")
def clang_build(native_builds: NativeBuilds) -> NativeBuild:
    clang = shutil.which("clang++")
    if clang is None:
        pytest.skip("clang++ is not installed (apt-get install clang; ci/bootstrap.sh does)")
    return native_builds.get("clang-werror", CHECKS, ["-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_CXX_COMPILER={clang}",
                                                      "-DCMAKE_CXX_FLAGS=-Wall -Wextra -Werror"], CORE_CHECKS)


@pytest.fixture(scope="session")
def lite_asan_build(native_builds: NativeBuilds) -> NativeBuild:
    return native_builds.get("ember-lite-asan-ubsan", LITE, ["-DCMAKE_BUILD_TYPE=Release", "-DEMBER_LITE_SANITIZE=ON"],
                             ["test_caching_allocator", "ember-lite-demo"], bin_subdir=".")


@pytest.fixture(scope="session")
def windows_build(native_builds: NativeBuilds) -> Iterator[tuple[NativeBuild, dict[str, str]]]:
    """The core as DLLs (portable paths: what an MSVC build compiles) and a wine prefix."""
    missing = [what for what, found in (("x86_64-w64-mingw32-g++-posix (g++-mingw-w64-x86-64)",
                                          shutil.which("x86_64-w64-mingw32-g++-posix")),
                                         ("wine64", WINE), ("x86_64-w64-mingw32-objdump", MINGW_OBJDUMP))
               if not found]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (ci/bootstrap.sh installs them)")
    build = native_builds.get("mingw", CHECKS, ["-DCMAKE_BUILD_TYPE=Release", "-DEMBER_PORTABLE_ONLY=ON",
                                                "-DCMAKE_CXX_FLAGS=-Werror",
                                                f"-DCMAKE_TOOLCHAIN_FILE={MINGW_TOOLCHAIN}"],
                              ["kernels_check", "process_group_check"])
    prefix = native_builds.root / "wineprefix"
    env = {"WINEPREFIX": str(prefix), "WINEDEBUG": "-all", "WINEDLLOVERRIDES": "mscoree,mshtml="}
    assert WINE is not None
    run([WINE, "cmd", "/c", "exit"], extra_env=env, timeout=180, check=False)  # initialise the prefix once
    yield build, env
    wineserver = Path(WINE).with_name("wineserver")
    if wineserver.exists():  # no wine process outlives the session
        run([str(wineserver), "-k"], extra_env=env, check=False)


def assert_clean(proc: Completed, expected: str) -> None:
    """Exit 0, the program's success line, and no sanitizer report anywhere."""
    assert proc.returncode == 0, proc.output[-6000:]
    assert expected in proc.stdout, proc.output[-6000:]
    for mark in SANITIZER_MARKS:
        assert mark not in proc.output, proc.output[-6000:]


# ---- 16: portable paths, clang -Werror, Windows ------------------------------------------------------------------


def test_portable_build_compiles_only_the_plain_cxx_paths(portable_build, asan_build):
    portable = portable_build.compile_commands()
    assert "gemm_avx2.cpp" not in portable and "gemm_avx512.cpp" not in portable
    for source in ("gemm_generic.cpp", "nn.cpp", "fft_plan.cpp", "parallel.cpp"):
        command = portable[source]
        assert "-DEMBER_PORTABLE_ONLY" in command and "-std=c++17" in command and "-Wpedantic" in command, command
    # The GNU build beside it takes the vector paths and carries the AVX kernels.
    gnu = asan_build.compile_commands()
    assert "gemm_avx2.cpp" in gnu and "-DEMBER_PORTABLE_ONLY" not in gnu["gemm_generic.cpp"]


def test_portable_paths_match_the_gnu_vector_paths_bit_for_bit(portable_build, asan_build, tmp_path):
    # Same instruction set on both sides (the baseline GEMM: EMBER_GEMM_ISA=generic), so
    # every float the checks produce must be identical, not merely close.
    dumps = {}
    for build in (portable_build, asan_build):
        dump = tmp_path / f"{build.name}.bin"
        proc = build.run(["kernels_check", "--dump", str(dump)], extra_env={"EMBER_GEMM_ISA": "generic"})
        assert_clean(proc, "kernels_check: 0 failure(s)")
        dumps[build.name] = dump.read_bytes()
    assert len(dumps["portable"]) > 1_000_000
    assert dumps["portable"] == dumps["asan-ubsan"]


def test_core_and_distributed_build_with_clang_werror_and_pass(clang_build):
    commands = clang_build.compile_commands()
    for source in ("gemm_generic.cpp", "gemm_avx2.cpp", "nn.cpp", "fft_plan.cpp", "process_group.cpp",
                   "socket_posix.cpp", "kernels_check.cpp"):
        assert "clang++" in commands[source] and "-Werror" in commands[source], commands[source]
    assert_clean(clang_build.run(["kernels_check"]), "kernels_check: 0 failure(s)")
    assert_clean(clang_build.run(["process_group_check", "3"]), "process_group_check: OK (3 ranks)")


def _pe_imports(path: Path) -> set[str]:
    assert MINGW_OBJDUMP is not None
    dump = run([MINGW_OBJDUMP, "-p", str(path)], what="objdump").stdout
    return {line.split("DLL Name:")[1].strip().lower() for line in dump.splitlines() if "DLL Name:" in line}


def test_whole_core_builds_as_self_contained_windows_dlls(windows_build):
    build, _ = windows_build
    core, dist = build.bin_dir / "libember.dll", build.bin_dir / "libember_distributed.dll"
    assert core.read_bytes()[:2] == b"MZ" and dist.read_bytes()[:2] == b"MZ"
    mingw_runtime = {"libstdc++-6.dll", "libgcc_s_seh-1.dll", "libwinpthread-1.dll"}
    assert not _pe_imports(core) & mingw_runtime
    assert not _pe_imports(dist) & mingw_runtime and "ws2_32.dll" in _pe_imports(dist)
    assert "libember.dll" in _pe_imports(build.binary("kernels_check"))
    exports = run([MINGW_OBJDUMP or "objdump", "-p", str(core)], what="objdump").stdout
    for symbol in ("ember_matmul", "ember_conv2d", "ember_fft_c2c", "ember_reduce_all", "ember_index_add"):
        assert symbol in exports


def test_kernels_and_process_group_run_under_wine(windows_build):
    build, env = windows_build
    assert WINE is not None
    proc = run([WINE, str(build.binary("kernels_check"))], cwd=build.bin_dir, extra_env=env, timeout=300,
               check=False)
    assert proc.returncode == 0 and "kernels_check: 0 failure(s)" in proc.stdout, proc.output[-6000:]
    assert "ok: fft c2c forward/inverse n=4099" in proc.stdout  # Bluestein, through the DLL
    proc = run([WINE, str(build.binary("process_group_check")), "3"], cwd=build.bin_dir, extra_env=env,
               timeout=300, check=False)
    assert proc.returncode == 0 and "process_group_check: OK (3 ranks)" in proc.stdout, proc.output[-6000:]


# ---- 18: sanitizers ----------------------------------------------------------------------------------------------


@pytest.mark.sanitizers
def test_core_checks_under_asan_and_ubsan(asan_build):
    assert_clean(asan_build.run(["kernels_check"]), "kernels_check: 0 failure(s)")
    assert_clean(asan_build.run(["store_test"]), "store_test: OK")
    assert_clean(asan_build.run(["process_group_check", "4"]), "process_group_check: OK (4 ranks)")


@pytest.mark.sanitizers
def test_multiprocess_collectives_under_asan_and_ubsan(asan_build):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    world = 3
    env = {**os.environ, **SANITIZER_ENV}
    exe = str(asan_build.binary("collectives_test"))
    # Three processes at once: the one subprocess wrapper runs one command to completion.
    procs = [subprocess.Popen([exe, str(port), str(rank), str(world)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for rank in range(world)]
    try:
        results = [p.communicate(timeout=180) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for rank, (p, (out, err)) in enumerate(zip(procs, results, strict=True)):
        assert p.returncode == 0 and f"rank {rank}: OK" in out, out + err[-6000:]
        assert not any(mark in err for mark in SANITIZER_MARKS), err[-6000:]


@pytest.mark.sanitizers
def test_asan_stops_an_overflow_inside_libember(asan_build):
    # The negative control: the library itself is instrumented and a report fails the run.
    proc = asan_build.run(["kernels_check", "--overflow"])
    assert proc.returncode == 86, proc.output[-6000:]
    assert "ERROR: AddressSanitizer: heap-buffer-overflow" in proc.stderr
    assert "libember.so" in proc.stderr and "ember_matmul" in proc.stderr


@pytest.mark.sanitizers
def test_ember_lite_allocator_and_model_runner_under_asan_and_ubsan(lite_asan_build):
    assert_clean(lite_asan_build.run(["test_caching_allocator"]), " 0 failed")
    data = LITE / "tests" / "data"
    models = sorted(data.glob("*.elm"))
    assert models, f"no golden models in {data}"
    for model in models:
        stem = data / model.stem
        proc = lite_asan_build.run(["ember-lite-demo", str(model), f"{stem}.input.bin", f"{stem}.expected.bin",
                                    "1e-5"])
        assert_clean(proc, "MATCH")


@pytest.mark.sanitizers
def test_thread_pool_and_process_group_under_tsan(tsan_build):
    # kernels_check runs the pool with 4 threads: parallel_for, parallel_chunks, the racing
    # atomic adds of index_add and the deterministic reductions.
    assert_clean(tsan_build.run(["kernels_check"]), "kernels_check: 0 failure(s)")
    assert_clean(tsan_build.run(["process_group_check", "4"], timeout=300), "process_group_check: OK (4 ranks)")
