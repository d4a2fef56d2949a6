"""Fixtures for ember-lite's tests: build the runtime (host, cross, sanitized) once per
session with CMake, and bind the host build through ctypes.

Sources: EMBER_LITE_SOURCE_DIR (default: library/ember-lite beside this package's folder)
and EMBER_LITE_EMBER_CORE_DIR (default: library/ember/core). Builds go to
SHIPYARD_TEST_CACHE/ember-lite under shipyard (one build per set of inputs, shared by every
cell), else EMBER_LITE_BUILD_ROOT when set (kept between runs, rebuilt incrementally), otherwise
to a fresh temporary folder.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

# shipyard runs a copy of the tests and names the ember sources in SHIPYARD_COMPONENT_SOURCE.
_COMPONENT = os.environ.get("SHIPYARD_COMPONENT_SOURCE")
LIBRARY_DIR = Path(_COMPONENT).resolve().parent if _COMPONENT else Path(__file__).resolve().parents[3]
SOURCE_DIR = Path(os.environ.get("EMBER_LITE_SOURCE_DIR", LIBRARY_DIR / "ember-lite"))
CORE_DIR = Path(os.environ.get("EMBER_LITE_EMBER_CORE_DIR", LIBRARY_DIR / "ember" / "core"))


@dataclass(frozen=True)
class CrossTarget:
    """A Linux cross target run under qemu-user."""

    name: str
    compiler: str
    qemu: str
    sysroot: str

    @property
    def toolchain_file(self) -> Path:
        return SOURCE_DIR / "cmake" / f"{self.name}.cmake"

    def missing(self) -> Optional[str]:
        """Why this target cannot be built and run here, or None."""
        if not shutil.which(self.compiler):
            return f"{self.compiler} not installed (apt-get install g++-{self.name.replace('_', '-')})"
        if not shutil.which(self.qemu):
            return f"{self.qemu} not installed (apt-get install qemu-user)"
        if not Path(self.sysroot).is_dir():
            return f"cross sysroot {self.sysroot} missing"
        return None


CROSS_TARGETS = {
    "aarch64": CrossTarget("aarch64-linux-gnu", "aarch64-linux-gnu-g++", "qemu-aarch64",
                           "/usr/aarch64-linux-gnu"),
    "armv7": CrossTarget("arm-linux-gnueabihf", "arm-linux-gnueabihf-g++", "qemu-arm",
                         "/usr/arm-linux-gnueabihf"),
}


@dataclass(frozen=True)
class LiteBuild:
    """A configured and built ember-lite tree."""

    build_dir: Path
    emulator: Tuple[str, ...]  # prefix to run the target's programs (empty on the host)

    @property
    def shared_library(self) -> Path:
        return self.build_dir / "libember_lite.so"

    def program(self, name: str) -> Path:
        return self.build_dir / name

    def run(self, args: List[str], timeout: float = 300) -> subprocess.CompletedProcess:
        """Run one of the build's programs (under the emulator for cross builds)."""
        argv = list(self.emulator) + [str(self.program(args[0]))] + [str(a) for a in args[1:]]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def _check(argv: List[str], what: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        pytest.fail(f"{what} failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def _version(tool: str) -> str:
    found = shutil.which(tool)
    if not found:
        return f"{tool}: absent"
    return subprocess.run([found, "--version"], capture_output=True, text=True).stdout.split("\n", 1)[0]


def _inputs_key(cmake_args: List[str], targets: Tuple[str, ...]) -> str:
    """Everything a build's bytes depend on: the sources, the options and the compilers."""
    digest = hashlib.sha256(repr((cmake_args, targets)).encode())
    for folder in (SOURCE_DIR, CORE_DIR):
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            digest.update(f"{path.relative_to(folder)}\0".encode() + path.read_bytes())
    tools = ["cmake", "c++"] + [t.compiler for t in CROSS_TARGETS.values()]
    digest.update("\n".join(_version(t) for t in tools).encode())
    return digest.hexdigest()[:16]


class LiteBuilder:
    """Builds each ember-lite configuration at most once per session. With `shared` (shipyard's
    SHIPYARD_TEST_CACHE) at most once for every cell of a run: the builds depend on neither the
    Python nor the wheel under test, so they are kept by their inputs, and a cell that finds one
    being built waits for it."""

    def __init__(self, root: Path, shared: bool = False):
        self.root = root
        self.shared = shared
        self.builds: Dict[str, LiteBuild] = {}

    def get(self, name: str, cmake_args: List[str], emulator: Tuple[str, ...] = (),
            targets: Tuple[str, ...] = ()) -> LiteBuild:
        """The build `name`, configured with cmake_args; only `targets` built when given."""
        if name not in self.builds:
            if not self.shared:
                self._build(self.root / name, cmake_args, targets, name)
                self.builds[name] = LiteBuild(self.root / name, emulator)
                return self.builds[name]
            build_dir = self.root / f"{name}-{_inputs_key(cmake_args, targets)}"
            build_dir.parent.mkdir(parents=True, exist_ok=True)
            with open(f"{build_dir}.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not (build_dir / ".complete").is_file():
                    shutil.rmtree(build_dir, ignore_errors=True)  # a build that was cut short
                    self._build(build_dir, cmake_args, targets, name)
                    (build_dir / ".complete").write_text(name)
            self.builds[name] = LiteBuild(build_dir, emulator)
        return self.builds[name]

    @staticmethod
    def _build(build_dir: Path, cmake_args: List[str], targets: Tuple[str, ...], name: str) -> None:
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        _check(["cmake", "-S", str(SOURCE_DIR), "-B", str(build_dir), *generator,
                f"-DEMBER_LITE_EMBER_CORE_DIR={CORE_DIR}", *cmake_args],
               f"configuring ember-lite ({name})")
        only = ["--target", *targets] if targets else []
        _check(["cmake", "--build", str(build_dir), "--parallel", "2", *only],
               f"building ember-lite ({name})")


@pytest.fixture(scope="session")
def lite_builder(tmp_path_factory) -> LiteBuilder:
    if not (SOURCE_DIR / "CMakeLists.txt").is_file():
        pytest.skip(f"ember-lite sources not found at {SOURCE_DIR} (set EMBER_LITE_SOURCE_DIR)")
    if not shutil.which("cmake"):
        pytest.skip("cmake is not installed")
    shared = os.environ.get("SHIPYARD_TEST_CACHE")
    if shared:
        return LiteBuilder(Path(shared) / "ember-lite", shared=True)
    root = os.environ.get("EMBER_LITE_BUILD_ROOT")
    return LiteBuilder(Path(root) if root else tmp_path_factory.mktemp("ember-lite-builds"))


@pytest.fixture(scope="session")
def host_build(lite_builder) -> LiteBuild:
    return lite_builder.get("host", ["-DCMAKE_BUILD_TYPE=Release"])


@pytest.fixture(scope="session")
def sanitized_build(lite_builder) -> LiteBuild:
    # No -g: it doubles the compile time of the core, and ASan reports name functions
    # without it.
    return lite_builder.get("host-asan-ubsan", ["-DCMAKE_BUILD_TYPE=Release",
                                                "-DEMBER_LITE_SANITIZE=ON"],
                            targets=("fuzz_model_load", "ember-lite-demo"))


@pytest.fixture(scope="session", params=sorted(CROSS_TARGETS))
def cross_build(request, lite_builder) -> LiteBuild:
    target = CROSS_TARGETS[request.param]
    reason = target.missing()
    if reason:
        pytest.skip(f"{target.name}: {reason}")
    return lite_builder.get(target.name, ["-DCMAKE_BUILD_TYPE=Release",
                                          f"-DCMAKE_TOOLCHAIN_FILE={target.toolchain_file}"],
                            emulator=(target.qemu, "-L", target.sysroot),
                            targets=("ember-lite-demo", "fuzz_model_load", "test_caching_allocator"))


@pytest.fixture(scope="session")
def lite_runtime(host_build):
    """The host libember_lite.so loaded through ember.mobile's ctypes binding."""
    from ember.mobile import EmberLite

    return EmberLite(host_build.shared_library)


@pytest.fixture
def allocator(lite_runtime):
    """The runtime with its allocator in the default state, restored after the test."""
    from ember.mobile import EmberLite  # noqa: F401  (the fixture's type)

    lite_runtime.set_allocator_enabled(True)
    lite_runtime.set_max_cached_bytes(64 << 20)
    lite_runtime.release_cache()
    lite_runtime.reset_allocator_stats()
    yield lite_runtime
    lite_runtime.set_allocator_enabled(True)
    lite_runtime.set_max_cached_bytes(64 << 20)
    lite_runtime.release_cache()


@dataclass(frozen=True)
class ExportedModel:
    """A model written by ember.mobile.export with its input and reference output on disk."""

    path: Path
    input_path: Path
    expected_path: Path
    x: object  # np.ndarray
    expected: object  # np.ndarray


def sample_models():
    """name -> (MobileModel, input): a small MLP and a CNN using every op."""
    import numpy as np
    from ember import mobile

    rng = np.random.default_rng(17)

    def normal(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    mlp = mobile.MobileModel((3, 20), [
        mobile.Linear(normal(24, 20, scale=0.3), normal(24, scale=0.1)), mobile.ReLU(),
        mobile.Linear(normal(5, 24, scale=0.3), None), mobile.Softmax()])
    cnn = mobile.MobileModel((2, 2, 9, 9), [
        mobile.Conv2d(normal(6, 2, 3, 3, scale=0.3), normal(6, scale=0.1), stride=2, padding=1),
        mobile.ReLU(),
        mobile.Mul(normal(6, 5, 5, scale=0.5)),
        mobile.Add(normal(2, 6, 5, 5, scale=0.1)),
        mobile.Reshape((2, -1)),
        mobile.Linear(normal(8, 150, scale=0.1), normal(8, scale=0.1)),
        mobile.Exp(),
        mobile.Reshape((2, 2, 4)),
        mobile.Flatten(1),
        mobile.Softmax()])
    return {"mlp": (mlp, normal(3, 20)), "cnn": (cnn, normal(2, 2, 9, 9))}


@pytest.fixture(scope="session")
def exported_models(tmp_path_factory) -> Dict[str, ExportedModel]:
    from ember import mobile

    folder = tmp_path_factory.mktemp("models")
    out = {}
    for name, (model, x) in sample_models().items():
        path = mobile.export(model, folder / f"{name}.elm")
        expected = mobile.run_reference(path, x, backend="numpy")
        x.astype("<f4").tofile(folder / f"{name}.input.bin")
        expected.astype("<f4").tofile(folder / f"{name}.expected.bin")
        out[name] = ExportedModel(path, folder / f"{name}.input.bin",
                                  folder / f"{name}.expected.bin", x, expected)
    return out


@pytest.fixture(scope="session")
def over_limit_models(tmp_path_factory) -> Dict[str, Path]:
    """Valid models that need a buffer over EL_MAX_BUFFER_BYTES (1 GiB), by name.

    "conv_4mb" is the issue's case: a 4 MB file (one 1024 x 1024 kernel, padding 1024, a
    1 x 1 input) whose im2col buffer is 4.4 TB; its size wrapped a 32-bit size_t and the
    conv overflowed the heap on armv7. "conv_4kb" is the same with a 32 x 32 kernel, small
    enough to seed the fuzzer (which tries every truncation of its seeds).
    """
    import numpy as np
    from ember import mobile

    folder = tmp_path_factory.mktemp("over-limit")
    out = {}
    for name, k in (("conv_4mb", 1024), ("conv_4kb", 32)):
        model = mobile.MobileModel((1, 1, 1, 1), [
            mobile.Conv2d(np.full((1, 1, k, k), 0.5, np.float32), None, stride=1, padding=1024)])
        out[name] = mobile.export(model, folder / f"{name}.elm")
    return out
