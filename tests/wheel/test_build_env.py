"""Build environments hold what a project's backend asks for at run time, not only its
[build-system].requires, so each build can skip the frontend's per-build dependency check;
a failed build says what the compiler said."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from wheel.wheelfile import WheelFile

from shipyard.errors import ToolError
from shipyard.host.toolchains.discover import discover
from shipyard.wheel.build_env import ensure_build_env
from shipyard.wheel.pep517 import build_wheel, prestart_build_hook

pytestmark = pytest.mark.slow

FIXCEXT = Path(__file__).parent.parent / "fixtures" / "minirelease" / "library" / "fixcext"


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    """One state folder for the module: both tests share Python 3.11's build environment."""
    return tmp_path_factory.mktemp("state")


@pytest.fixture(scope="module")
def python311():
    interpreter = discover().interpreter("3.11")
    if interpreter is None:
        pytest.fail("Python 3.11 is not installed: run ci/bootstrap.sh")
    return interpreter


def _dependency_wheel(folder):
    """A one-module wheel, fixdep 1.0, that nothing else provides."""
    path = folder / "fixdep-1.0-py3-none-any.whl"
    with WheelFile(path, "w") as wf:
        wf.writestr("fixdep/__init__.py", "VALUE = 42\n")
        wf.writestr("fixdep-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: fixdep\nVersion: 1.0\n")
        wf.writestr("fixdep-1.0.dist-info/WHEEL",
                    "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    return path


def _project_asking_for(folder, requirement: str):
    """A project whose in-tree backend asks for `requirement` in get_requires_for_build_wheel."""
    folder.mkdir()
    (folder / "pyproject.toml").write_text(textwrap.dedent("""\
        [build-system]
        requires = []
        build-backend = "dynbackend"
        backend-path = ["."]

        [project]
        name = "dynproject"
        version = "0.1"
        """))
    (folder / "dynbackend.py").write_text(textwrap.dedent(f"""\
        def get_requires_for_build_wheel(config_settings=None):
            return [{requirement!r}]

        def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
            raise NotImplementedError
        """))
    return folder


def test_dynamic_build_requirements_are_installed_once(tmp_path, state, python311):
    wheel = _dependency_wheel(tmp_path)
    project = _project_asking_for(tmp_path / "project", f"fixdep @ {wheel.as_uri()}")
    env = ensure_build_env(python311, project, state)
    assert "fixdep @ file://" in (env.root / "shipyard-freeze.txt").read_text()
    # Byte-compiled when the environment changed (before anything imported it): each build's
    # interpreter reads the bytecode instead of compiling the backend again.
    for package in ("fixdep", "scikit_build_core"):
        assert list(env.root.glob(f"lib/python3.11/site-packages/{package}/__pycache__/__init__.cpython-311.pyc")), \
            package
    imported = subprocess.run([env.python, "-c", "import fixdep; print(fixdep.VALUE)"],
                              capture_output=True, text=True, check=True)
    assert imported.stdout.strip() == "42"
    # A second call finds everything in place: the same environment, the same identity.
    again = ensure_build_env(python311, project, state)
    assert again.root == env.root and again.identity == env.identity


def test_a_failed_build_shows_the_compiler_error(tmp_path, state, python311):
    project = tmp_path / "fixcext"
    shutil.copytree(FIXCEXT, project, ignore=shutil.ignore_patterns(".*", "tests"))
    module = project / "csrc" / "module.c"
    module.write_text(module.read_text() + "\nthis line is not C\n")
    env = ensure_build_env(python311, project, state)
    with pytest.raises(ToolError, match="build fixcext wheel for Python 3.11 failed") as caught:
        build_wheel(project, env, tmp_path / "out", cmake_defines={}, extra_env={}, build_dir=None, jobs=2)
    # The compiler reports on stdout (through ninja): the message must carry it, not only
    # the backend's closing "CMake build failed".
    assert "module.c" in str(caught.value) and "error: unknown type name" in str(caught.value)
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.whl"))


def test_a_hook_started_ahead_builds_the_same_bytes_as_one_started_for_the_build(tmp_path, state, python311):
    """A cell's build hook is started while the native core compiles (pipeline._prestart_hook):
    the wheel it builds is byte for byte the one a hook started for the build makes."""
    env = ensure_build_env(python311, FIXCEXT, state)
    extra = {"SOURCE_DATE_EPOCH": "1700000000", "LC_ALL": "C"}
    build_dir = tmp_path / "build"

    def build(out: str, prestarted=None) -> bytes:  # noqa: ANN001
        shutil.rmtree(build_dir, ignore_errors=True)
        wheel = build_wheel(FIXCEXT, env, tmp_path / out, cmake_defines={}, extra_env=extra, build_dir=build_dir,
                            jobs=2, prestarted=prestarted)
        return wheel.read_bytes()

    prestarted = prestart_build_hook(FIXCEXT, env, extra_env=extra, jobs=2)
    assert prestarted is not None
    ahead = build("ahead", prestarted)
    assert prestarted.used  # it fitted: the hook ran in it, not in a process of its own
    assert ahead == build("plain")
