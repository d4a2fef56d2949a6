"""The container build path: a debootstrapped base, a manylinux-style image holding this
host's Pythons, and cibuildwheel building wheels inside it whose names match a host build.

Needs root, debootstrap, docker.io and the Debian mirror and PyPI; the session's
`docker_engine` fixture (conftest.py) starts dockerd when no engine answers. The first run
bootstraps (minutes); later runs reuse the images.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from packaging.utils import parse_wheel_filename

from shipyard.errors import BuildError, ToolchainMissing
from shipyard.host import docker_base
from shipyard.host.toolchains.discover import Interpreter, find_interpreters
from shipyard.plumbing import command
from shipyard.wheel.container import build_wheels_in_container

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).parent.parent / "fixtures"
TARGET = "3.11"
IMAGE_PYTHONS = ("3.9", "3.10", "3.11", "3.12", "3.13")
EPOCH = "1700000000"


@pytest.fixture(scope="module")
def pythons() -> dict[str, Interpreter]:
    found = {i.version: i for i in find_interpreters() if i.version in IMAGE_PYTHONS}
    if TARGET not in found or "3.9" not in found:
        pytest.skip(f"needs self-contained Python {TARGET} and 3.9 prefixes (pyenv)")
    return found


@pytest.fixture(scope="module")
def images(docker_engine: None, pythons: dict[str, Interpreter]) -> dict[str, object]:
    """Build (or reuse) the base and manylinux images twice; the second pass must be a no-op."""
    timings: dict[str, object] = {}
    start = time.monotonic()
    base = docker_base.bootstrap_base_image()
    timings["base_first_s"] = round(time.monotonic() - start, 1)
    start = time.monotonic()
    image = docker_base.build_manylinux_image(list(pythons.values()))
    timings["manylinux_first_s"] = round(time.monotonic() - start, 1)
    start = time.monotonic()
    again = docker_base.build_manylinux_image(list(pythons.values()))
    timings["both_second_s"] = round(time.monotonic() - start, 1)
    assert again == image
    timings.update(base=base, image=image, base_bytes=docker_base.image_size(base),
                   image_bytes=docker_base.image_size(image))
    print(f"\ncontainer images: {timings}")
    return timings


@pytest.fixture(scope="module")
def host_builder(pythons: dict[str, Interpreter], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The host's Python 3.11 in a venv with `build`: the host path's frontend."""
    venv = tmp_path_factory.mktemp("host-build") / "venv"
    command.run([pythons[TARGET].path, "-m", "venv", venv], timeout=300)
    command.run([venv / "bin" / "python", "-m", "pip", "install", "--quiet", "build"], timeout=600)
    return venv / "bin" / "python"


def _host_wheel(project: Path, builder: Path, out: Path) -> Path:
    command.run([builder, "-m", "build", "--wheel", "--outdir", out, project], timeout=1800,
                extra_env={"SOURCE_DATE_EPOCH": EPOCH}, what="host build")
    (wheel,) = out.glob("*.whl")
    return wheel


def _copy(fixture: str, tmp_path: Path, name: str) -> Path:
    # Each build gets its own copy: setuptools writes build/ and *.egg-info into the sources.
    return Path(shutil.copytree(FIXTURES / fixture, tmp_path / name))


def _installed_call(python: Interpreter, wheel: Path, tmp_path: Path, code: str) -> str:
    venv = tmp_path / "venv"
    command.run([python.path, "-m", "venv", venv], timeout=300)
    command.run([venv / "bin" / "python", "-m", "pip", "install", "--no-deps", "--no-index", wheel], timeout=300)
    return command.run([venv / "bin" / "python", "-c", code], cwd=tmp_path, timeout=60).stdout.strip()


def test_base_image_records_its_inputs(images: dict[str, object]) -> None:
    labels = docker_base.image_labels(str(images["base"]))
    assert labels is not None
    assert labels["org.shipyard.base.suite"] == "bookworm"
    assert labels["org.shipyard.base.variant"] == "minbase"
    assert labels["org.shipyard.base.mirror"] == docker_base.apt_mirror()
    assert labels["org.shipyard.base.debian-version"].startswith("12.")
    assert images["both_second_s"] < 60, "a second pass over existing images must not rebuild them"


def test_manylinux_image_layout(images: dict[str, object], pythons: dict[str, Interpreter]) -> None:
    script = "; ".join(
        f"/opt/python/cp{v.replace('.', '')}-cp{v.replace('.', '')}/bin/python -c "
        "'import sys, ssl, build; print(\"%d.%d\" % sys.version_info[:2], build.__version__)'"
        for v in sorted(pythons, key=lambda v: int(v.split(".")[1])))
    done = command.run(["docker", "run", "--rm", "--pull=never", str(images["image"]), "sh", "-c",
                        script + "; g++ --version; cmake --version; ninja --version; patchelf --version; "
                        "test -f /usr/include/png.h && test -f /usr/include/jpeglib.h && echo headers-ok"],
                       timeout=300)
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines[:len(pythons)]] == sorted(
        pythons, key=lambda v: int(v.split(".")[1]))
    assert "headers-ok" in lines
    assert any(line.startswith("cmake version") for line in lines)
    assert any(line.startswith("patchelf") for line in lines)


def test_pure_project_names_match_host_build(images: dict[str, object], pythons: dict[str, Interpreter],
                                             host_builder: Path, tmp_path: Path) -> None:
    host = _host_wheel(_copy("container_pure", tmp_path, "host"), host_builder, tmp_path / "host-out")
    wheels = build_wheels_in_container(_copy("container_pure", tmp_path, "ctr"), tmp_path / "ctr-out",
                                       pythons=[TARGET], image=str(images["image"]),
                                       environment={"SOURCE_DATE_EPOCH": EPOCH})
    assert [w.name for w in wheels] == [host.name]
    assert parse_wheel_filename(wheels[0].name) == parse_wheel_filename(host.name)
    assert host.name.endswith("-py3-none-any.whl")
    # Told it is pure, the build skips cibuildwheel; one py3 wheel serves every Python.
    direct = build_wheels_in_container(_copy("container_pure", tmp_path, "ctr2"), tmp_path / "ctr2-out",
                                       pythons=["3.13", "3.9"], image=str(images["image"]),
                                       environment={"SOURCE_DATE_EPOCH": EPOCH}, pure=True)
    assert [w.name for w in direct] == [host.name]
    assert _installed_call(pythons[TARGET], wheels[0], tmp_path,
                           "import cpure; print(cpure.greet('dock'))") == "hello, dock"


def test_c_extension_names_match_host_build(images: dict[str, object], pythons: dict[str, Interpreter],
                                            host_builder: Path, tmp_path: Path) -> None:
    host = _host_wheel(_copy("container_cext", tmp_path, "host"), host_builder, tmp_path / "host-out")
    # A single quote and a `$` must reach the compiler untouched by any shell on the way.
    flavour = "salty 'n' $HOME"
    wheels = build_wheels_in_container(
        _copy("container_cext", tmp_path, "ctr"), tmp_path / "ctr-out", pythons=[TARGET],
        image=str(images["image"]),
        environment={"SOURCE_DATE_EPOCH": EPOCH, "SKBUILD_CMAKE_DEFINE": f"CCEXT_FLAVOUR={flavour}"})
    assert [w.name for w in wheels] == [host.name]
    name, version, build, tags = parse_wheel_filename(wheels[0].name)
    assert (name, version, build, tags) == parse_wheel_filename(host.name)
    assert {str(t) for t in tags} == {"cp311-cp311-linux_x86_64"}
    out = _installed_call(pythons[TARGET], wheels[0], tmp_path,
                          "import ccext; print(ccext.add(2, 40)); print(ccext.flavour())")
    assert out.splitlines() == ["42", flavour]


def test_config_settings_reach_the_backend(images: dict[str, object], pythons: dict[str, Interpreter],
                                           tmp_path: Path) -> None:
    wheels = build_wheels_in_container(
        _copy("container_cext", tmp_path, "ctr"), tmp_path / "out", pythons=[TARGET],
        image=str(images["image"]), environment={},
        config_settings={"cmake.define.CCEXT_FLAVOUR": "crisp"})
    assert _installed_call(pythons[TARGET], wheels[0], tmp_path,
                           "import ccext; print(ccext.flavour())") == "crisp"


def test_a_failing_build_names_the_step_and_shows_the_compiler(images: dict[str, object],
                                                               tmp_path: Path) -> None:
    project = _copy("container_cext", tmp_path, "broken")
    source = project / "src" / "ccext" / "_native.c"
    source.write_text(source.read_text() + "\nthis is not C;\n")
    with pytest.raises(BuildError) as failure:
        build_wheels_in_container(project, tmp_path / "out", pythons=[TARGET], image=str(images["image"]),
                                  environment={})
    message = str(failure.value)
    assert "cibuildwheel failed at step 'Building wheel'" in message
    assert "_native.c" in message
    assert not list((tmp_path / "out").glob("*.whl"))


def test_missing_engine_and_image_are_reported_with_the_fix(images: dict[str, object], tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ToolchainMissing, match="no image|not in the local engine"):
        build_wheels_in_container(FIXTURES / "container_pure", tmp_path / "out", pythons=[TARGET],
                                  image="shipyard/never-built:0", environment={})
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    assert docker_base.ensure_docker_engine() is False
    with pytest.raises(ToolchainMissing, match="apt-get install -y docker.io && dockerd &"):
        docker_base.ensure_docker_engine(required=True)
    with pytest.raises(ToolchainMissing, match="dockerd"):
        build_wheels_in_container(FIXTURES / "container_pure", tmp_path / "out", pythons=[TARGET],
                                  image=str(images["image"]), environment={})
