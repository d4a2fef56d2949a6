"""Windows prototype: the C++ core cross-built with mingw-w64, run under wine over Winsock."""
import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.feature("distributed.windows")

# The tests run from a copy of the tests folder against the installed wheel; the Windows
# executables are built from the component's sources, which shipyard names here.
_SOURCE = os.environ.get("SHIPYARD_COMPONENT_SOURCE")
WINDOWS_DIR = (Path(_SOURCE) if _SOURCE else Path(__file__).resolve().parents[2]) / "windows"
WINE = shutil.which("wine64") or ("/usr/lib/wine/wine64" if os.path.exists("/usr/lib/wine/wine64") else None)
MINGW = shutil.which("x86_64-w64-mingw32-g++-posix") or shutil.which("x86_64-w64-mingw32-g++")


def _missing() -> str:
    if not (WINDOWS_DIR / "CMakeLists.txt").exists():
        return f"Windows test sources not found at {WINDOWS_DIR}"
    if MINGW is None:
        return "mingw-w64 (x86_64-w64-mingw32-g++) is not installed"
    if WINE is None:
        return "wine64 is not installed"
    if shutil.which("cmake") is None:
        return "cmake is not installed"
    return ""


def _sources_key() -> str:
    """The Windows build's inputs: its sources, the core it compiles, and the compiler."""
    digest = hashlib.sha256()
    for folder in (WINDOWS_DIR, WINDOWS_DIR.parent / "core"):
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            digest.update(path.relative_to(WINDOWS_DIR.parent).as_posix().encode() + b"\0" + path.read_bytes())
    compiler = subprocess.run([MINGW, "--version"], capture_output=True, text=True, check=True).stdout
    return hashlib.sha256(digest.digest() + compiler.encode()).hexdigest()[:16]


def _build_windows(build: Path) -> None:
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    subprocess.run(["cmake", "-S", str(WINDOWS_DIR), "-B", str(build), *generator, "-DCMAKE_BUILD_TYPE=Release",
                    f"-DCMAKE_TOOLCHAIN_FILE={WINDOWS_DIR / 'mingw-w64-x86_64.cmake'}"],
                   check=True, capture_output=True, text=True)
    subprocess.run(["cmake", "--build", str(build), "-j2"], check=True, capture_output=True, text=True)


def _windows_executables(tmp_path_factory) -> Path:
    """The test executables, built from the sources. They depend on neither the Python nor the
    wheel under test, so under shipyard every cell shares one build per set of inputs
    (SHIPYARD_TEST_CACHE); the first cell builds, the others wait for it and reuse it."""
    cache = os.environ.get("SHIPYARD_TEST_CACHE")
    if not cache:
        build = tmp_path_factory.mktemp("win-build")
        _build_windows(build)
        return build
    shared = Path(cache) / f"ember-windows-{_sources_key()}"
    shared.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{shared}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / ".complete").is_file():
            shutil.rmtree(shared, ignore_errors=True)  # a build that was cut short
            _build_windows(shared)
            (shared / ".complete").write_text("store_test.exe collectives_test.exe")
    return shared


@pytest.fixture(scope="module")
def windows_build(tmp_path_factory, wine):
    reason = _missing()
    if reason:
        pytest.skip(reason)
    return _windows_executables(tmp_path_factory), wine.env


def test_executables_are_self_contained_windows_binaries(windows_build):
    build, _ = windows_build
    for exe in ("store_test.exe", "collectives_test.exe"):
        data = (build / exe).read_bytes()
        assert data[:2] == b"MZ"
        # -static: nothing from mingw (libstdc++, libgcc, winpthread) is needed at run time.
        for dll in (b"libstdc++-6.dll", b"libgcc_s_seh-1.dll", b"libwinpthread-1.dll"):
            assert dll not in data
        assert b"WS2_32.dll" in data or b"ws2_32.dll" in data


def test_store_under_wine(windows_build):
    build, env = windows_build
    proc = subprocess.run([WINE, str(build / "store_test.exe")], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "store_test: OK" in proc.stdout


def test_multiprocess_collectives_under_wine(windows_build, procs):
    build, env = windows_build
    port = procs.free_port()
    world = 3
    procs = [subprocess.Popen([WINE, str(build / "collectives_test.exe"), str(port), str(r), str(world)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(world)]
    outputs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=120)
            outputs.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for rank, (code, out, err) in enumerate(outputs):
        assert code == 0, f"rank {rank}: {out}{err}"
        assert f"rank {rank}: OK" in out
