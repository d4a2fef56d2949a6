"""The manylinux_2_31 promise, kept: ember's and embervision's wheels, installed by name from the
cpu index, pass their own tests inside Debian bullseye (glibc 2.31), the oldest glibc release.yaml
promises.

The wheels are the main job's (compiled against the bullseye sysroot). The container is a
debootstrapped bullseye holding only Debian's own python3 (3.9) and venv: no compiler, no libpng
or libjpeg, and no network, so what the wheels need they carry or the promise allows.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.bullseye_python import bullseye_python_image

from shipyard.cli import main
from shipyard.image.deps import ensure_wheelhouse
from shipyard.release.validate import load_spec
from shipyard.testing.container import run_tests_in_container
from shipyard.testing.runner import component_test_requirements
from shipyard.testing.verdict import feature_gate, fold_feature_report

pytestmark = pytest.mark.slow

COMPONENTS = ("ember", "embervision")
PYTHON = "3.9"  # bullseye's own python3
PLATFORM_TAG = "manylinux_2_31_x86_64"
# Tests that exercise the compiled code users call; each must have passed inside bullseye.
RUNTIME_TESTS = {"ember": ("test_fft.py", "test_kernels.py"),
                 "embervision": ("test_png_io.py", "test_jpeg_io.py", "test_transforms.py")}


@pytest.fixture(scope="module")
def bullseye_python(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A bullseye image with python3 and venv from Debian, made once per base image."""
    return bullseye_python_image(tmp_path_factory)


def test_wheels_pass_their_tests_inside_bullseye(repo: Path, bullseye_python: str, tmp_path: Path,
                                                 suite_state: Path) -> None:
    dist = tmp_path / "dist"
    # linux-x86_64's wheels (the bullseye sysroot's promise), not linux-x86_64-manylinux2014's (zig's)
    code = main(["--root", str(repo), "build", "--variant", "cpu", "--python", PYTHON, "--install-toolchain",
                 "--platform", "linux-x86_64", "--no-tests", *[arg for c in COMPONENTS for arg in ("--component", c)],
                 "--dist", str(dist), "--state", str(suite_state)])
    assert code == 0
    index = dist / "whl" / "cpu"
    for component in COMPONENTS:
        built = sorted(p.name for p in (index / component).glob(f"{component}-1.7.0+cpu-cp39-cp39-*.whl"))
        assert built == [f"{component}-1.7.0+cpu-cp39-cp39-{PLATFORM_TAG}.whl"], built

    requirements = sorted({"numpy>=1.22", *[r for c in COMPONENTS for r in component_test_requirements(
        repo / "library" / c / "tests")]})
    house = ensure_wheelhouse(requirements, PYTHON, PLATFORM_TAG)
    # Installed by name from the cpu index, then each component's tests run and are judged as in
    # every other environment (shipyard.testing): the same plugins, the same feature gate.
    setup = (
        "ldd --version | head -n 1 > /work/ldd.txt\n"
        "python3 -m venv /venv\n"
        "/venv/bin/pip install --quiet --no-cache-dir --disable-pip-version-check --index-url file:///index "
        f"--find-links /wheelhouse {' '.join(COMPONENTS)} {' '.join(repr(r) for r in requirements)}\n"
        "/venv/bin/python -c \"import importlib.metadata as m, platform; "
        f"print('installed', {' '.join(f'm.version({c!r}),' for c in COMPONENTS)} platform.libc_ver())\" "
        "> /work/installed.txt\n")
    spec = load_spec(repo)
    for component in COMPONENTS:
        tests_dir = repo / "library" / component / "tests"
        work = tmp_path / component
        judged = run_tests_in_container(bullseye_python, setup=setup, python="/venv/bin/python", tests_dir=tests_dir,
                                        gate=feature_gate(spec, component, "linux-x86_64", tests_dir, repo), work=work,
                                        volumes=(f"{index}:/index:ro", f"{house.path}:/wheelhouse:ro"),
                                        other_features=sorted(f.id for f in spec.features.features
                                                              if f.component != component))
        print(judged.log_tail)
        assert judged.problems == (), judged.problems
        assert "GLIBC 2.31" in (work / "ldd.txt").read_text(), (work / "ldd.txt").read_text()
        assert "installed 1.7.0+cpu 1.7.0+cpu ('glibc', '2.31')" in (work / "installed.txt").read_text()
        record = fold_feature_report((work / "feature-report.jsonl").read_text(), 0)
        assert record is not None
        passed = [test for test, entry in record["tests"].items() if entry["outcome"] == "passed"]
        skipped = [test for test, entry in record["tests"].items() if entry["outcome"] == "skipped"]
        print(f"\n{component} inside bullseye: {len(passed)} passed, {len(skipped)} skipped "
              "(-rs above gives each reason)")
        for module in RUNTIME_TESTS[component]:
            assert any(test.startswith(f"{module}::") for test in passed), (component, module, skipped)
