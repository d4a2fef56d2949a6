"""The manylinux_2_31 promise, kept: ember's and embervision's wheels, installed by name from the
cpu index, pass their own tests inside Debian bullseye (glibc 2.31), the oldest glibc release.yaml
promises.

The wheels are the main job's (compiled against the bullseye sysroot). The container is a
debootstrapped bullseye holding only Debian's own python3 (3.9) and venv: no compiler, no libpng
or libjpeg, and no network, so what the wheels need they carry or the promise allows.
"""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from shipyard.cli import main
from shipyard.host import docker_base
from shipyard.image.deps import ensure_wheelhouse
from shipyard.plumbing import command
from shipyard.testing.runner import component_test_requirements

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
    base = docker_base.bootstrap_base_image(suite="bullseye")
    tag = f"shipyard/bullseye-python3:{docker_base.image_id(base).removeprefix('sha256:')[:16]}"
    if docker_base.image_labels(tag) is None:
        context = tmp_path_factory.mktemp("bullseye-python3")
        (context / "Dockerfile").write_text(
            f"FROM {base}\n"
            "RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv \\\n"
            " && rm -rf /var/lib/apt/lists/*\n")
        command.run(["docker", "build", "--tag", tag, context], extra_env={"DOCKER_BUILDKIT": "0"},
                    timeout=1800, what=f"docker build {tag}")
    return tag


def test_wheels_pass_their_tests_inside_bullseye(repo: Path, bullseye_python: str, tmp_path: Path) -> None:
    code = main(["--root", str(repo), "build", "--variant", "cpu", "--python", PYTHON, "--install-toolchain",
                 "--no-tests", *[arg for c in COMPONENTS for arg in ("--component", c)]])
    assert code == 0
    index = repo / "dist" / "whl" / "cpu"
    for component in COMPONENTS:
        built = sorted(p.name for p in (index / component).glob(f"{component}-1.7.0+cpu-cp39-cp39-*.whl"))
        assert built == [f"{component}-1.7.0+cpu-cp39-cp39-{PLATFORM_TAG}.whl"], built

    requirements = sorted({"numpy>=1.22", *[r for c in COMPONENTS for r in component_test_requirements(
        repo / "library" / c / "tests")]})
    house = ensure_wheelhouse(requirements, PYTHON, PLATFORM_TAG)
    tests = tmp_path / "tests"
    for component in COMPONENTS:  # a copy: the tests run against the installed wheels only
        shutil.copytree(repo / "library" / component / "tests", tests / component)
    script = (
        "ldd --version | head -n 1\n"
        "python3 -m venv /venv\n"
        "/venv/bin/pip install --quiet --no-cache-dir --disable-pip-version-check --index-url file:///index "
        f"--find-links /wheelhouse {' '.join(COMPONENTS)} {' '.join(repr(r) for r in requirements)}\n"
        "/venv/bin/python -c \"import importlib.metadata as m, platform; "
        f"print('installed', {' '.join(f'm.version({c!r}),' for c in COMPONENTS)} platform.libc_ver())\"\n"
        "status=0\n"
        f"for c in {' '.join(COMPONENTS)}; do\n"
        "  (cd /tests/$c && /venv/bin/python -m pytest -p no:cacheprovider --import-mode=importlib -q -rs "
        "--junitxml=/tests/$c.xml) || status=1\n"
        "done\n"
        "exit $status\n")
    done = command.run(["docker", "run", "--rm", "--pull=never", "--network=none",
                        f"--volume={index}:/index:ro", f"--volume={house.path}:/wheelhouse:ro",
                        f"--volume={tests}:/tests", bullseye_python, "sh", "-eu", "-c", script],
                       check=False, timeout=3600, what="install and test the wheels in bullseye")
    output = done.stdout + done.stderr
    print(output[-4000:])
    assert done.returncode == 0, output[-6000:]
    assert "GLIBC 2.31" in output.splitlines()[0], output[:500]
    assert "installed 1.7.0+cpu 1.7.0+cpu ('glibc', '2.31')" in output, output[-3000:]
    for component in COMPONENTS:
        cases = ET.parse(tests / f"{component}.xml").getroot().iter("testcase")
        outcome: dict[str, list[str]] = {}
        for case in cases:
            verdict = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
            outcome.setdefault(verdict, []).append(f"{case.get('file') or case.get('classname')}::{case.get('name')}")
        assert not outcome.get("failure") and not outcome.get("error"), outcome
        passed = outcome.get("passed", [])
        print(f"\n{component} inside bullseye: {len(passed)} passed, {len(outcome.get('skipped', []))} skipped "
              "(-rs above gives each reason)")
        for module in RUNTIME_TESTS[component]:
            stem = module.removesuffix(".py")
            assert any(stem in name for name in passed), (component, module, outcome.get("skipped"))
