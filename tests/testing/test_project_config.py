"""A component's tests run as the project's own runs see them: its pytest configuration, its root
conftest.py and the files beside its tests apply, and the package they import is the installed
one, never the project's sources. Tiny projects, this interpreter's pytest, no build: the
"installed" package is a folder in the site-packages of a venv that sees this interpreter's."""

from __future__ import annotations

import site
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

from shipyard.testing.project_copy import copy_for_tests
from shipyard.testing.runner import JudgedTests, run_and_judge_tests
from shipyard.testing.verdict import FeatureGate


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))


def _venv_with(tmp_path: Path, package: str, init: str) -> Path:
    """The Python of a venv whose site-packages holds `package` (its __init__.py is `init`) and
    sees this interpreter's packages (pytest) after its own."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    _write(purelib, {f"{package}/__init__.py": init,
                     "outer.pth": "\n".join([*site.getsitepackages(), site.getusersitepackages()]) + "\n"})
    return venv / "bin" / "python"


def _judge(python: Path, tmp_path: Path, tests: Path, project: Path, listed: dict[str, tuple[str, ...]]
           ) -> JudgedTests:
    statuses = {f: "stable" for features in listed.values() for f in features}
    gate = FeatureGate(statuses=statuses, present=frozenset(statuses), listed=listed)
    work = tmp_path / "work"
    (work / "tmp").mkdir(parents=True)
    return run_and_judge_tests(python, tests_dir=tests, gate=gate, source_dir=project, state=tmp_path / "state",
                               work=work, timeout=120)


def _results(judged: JudgedTests) -> dict[str, tuple[str, int, int]]:
    return {f.id: (f.result, f.passed, f.failed) for f in judged.features}


FLAT_PROJECT = {
    "pyproject.toml": """
        [project]
        name = "flatpkg"
        version = "1.0"

        [tool.pytest.ini_options]
        # As strict as many projects are; -x and --lf must not leave a test without its verdict.
        filterwarnings = ["error"]
        addopts = "-x --lf --strict-markers"
    """,
    "README.rst": "flatpkg\n=======\n",
    "conftest.py": """
        import pytest

        @pytest.fixture
        def project_name():
            return "flatpkg"
    """,
    # A flat layout: the package's sources sit in the project's root, where an import could find them.
    "flatpkg/__init__.py": "WHERE = 'sources'\n",
    "tests/test_flat.py": """
        import subprocess
        import sys
        import warnings
        from pathlib import Path

        import flatpkg


        def test_a_warning_is_an_error():
            warnings.warn("old API", DeprecationWarning)


        def test_the_root_conftest_fixture(project_name):
            assert project_name == "flatpkg"


        def test_the_readme_beside_the_tests_and_in_the_folder_run_in():
            assert (Path(__file__).parent.parent / "README.rst").read_text().startswith("flatpkg")
            assert Path("README.rst").read_text().startswith("flatpkg")


        def test_the_installed_package_is_imported():
            assert flatpkg.WHERE == "installed" and "site-packages" in flatpkg.__file__
            child = subprocess.run([sys.executable, "-c", "import flatpkg; print(flatpkg.WHERE)"],
                                   capture_output=True, text=True, check=True)
            assert child.stdout.strip() == "installed"
    """,
}


def test_the_projects_configuration_conftest_and_files_apply_to_the_installed_package(tmp_path: Path) -> None:
    project = tmp_path / "flatpkg"
    _write(project, FLAT_PROJECT)
    python = _venv_with(tmp_path, "flatpkg", "WHERE = 'installed'\n")
    judged = _judge(python, tmp_path, project / "tests", project,
                    {"test_flat.py::test_a_warning_is_an_error": ("flat.warns",),
                     "test_flat.py::test_the_root_conftest_fixture": ("flat.works",),
                     "test_flat.py::test_the_readme_beside_the_tests_and_in_the_folder_run_in": ("flat.works",),
                     "test_flat.py::test_the_installed_package_is_imported": ("flat.works",)})
    # filterwarnings = error fails the test that warns, as in the project's own run; -x stopped nothing.
    assert judged.problems == ("stable feature flat.warns failed (1 test)",), judged.log_tail
    assert _results(judged) == {"flat.warns": ("failed", 0, 1), "flat.works": ("passed", 3, 0)}, judged.log_tail
    assert "DeprecationWarning: old API" in judged.log_tail


def test_a_project_without_configuration_takes_none_from_the_folders_around_the_run(tmp_path: Path) -> None:
    # The release's checkout holds the run's folder (state/ under it) and has a configuration of its own.
    _write(tmp_path, {"pytest.ini": "[pytest]\naddopts = -k nothing_is_named_so\n"})
    project = tmp_path / "plain"
    _write(project, {"conftest.py": "import pytest\n\n\n@pytest.fixture\ndef answer():\n    return 42\n",
                     "data/table.txt": "1 2 3\n",
                     "tests/test_plain.py": """
                         from pathlib import Path


                         def test_root_fixture_and_data(answer):
                             assert answer == 42
                             assert (Path(__file__).parent.parent / "data" / "table.txt").read_text() == "1 2 3\\n"
                     """})
    judged = _judge(Path(sys.executable), tmp_path, project / "tests", project,
                    {"test_plain.py": ("plain.works",)})
    assert judged.problems == (), judged.log_tail
    assert _results(judged) == {"plain.works": ("passed", 1, 0)}


def test_tests_outside_the_project_run_as_their_own_folder(tmp_path: Path) -> None:
    _write(tmp_path, {"pytest.ini": "[pytest]\naddopts = -k nothing_is_named_so\n"})
    project = tmp_path / "library" / "scm"
    _write(project, {"pyproject.toml": "[tool.pytest.ini_options]\naddopts = '-k nothing_is_named_so'\n"})
    tests = tmp_path / "tests-of" / "scm"
    _write(tests, {"conftest.py": "import pytest\n\n\n@pytest.fixture\ndef answer():\n    return 42\n",
                   "sub/test_scm.py": "def test_scm(answer):\n    assert answer == 42\n"})
    judged = _judge(Path(sys.executable), tmp_path, tests, project, {"sub/test_scm.py": ("scm.works",)})
    assert judged.problems == (), judged.log_tail
    assert _results(judged) == {"scm.works": ("passed", 1, 0)}


def test_the_copy_leaves_out_what_could_be_imported_cached_or_built(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    work = project / ".shipyard" / "test" / "cell"  # a project at the release root holds the run's folder
    _write(project, {name: "" for name in (
        "pyproject.toml", "conftest.py", "README.rst", "setup.py", ".git/HEAD", "build/lib/pkg/__init__.py",
        "dist/pkg-1.0.whl", "flat/__init__.py", "_speedups.cpython-311-x86_64-linux-gnu.so", "csrc/kernel.c",
        "src/pkg/__init__.py", "src/pkg/tests/test_in_package.py", "src/other/__init__.py", "src/mod.py",
        "docs/index.rst", "tests/test_a.py", "tests/data/x.bin", "tests/__pycache__/x.pyc", "pkg.egg-info/PKG-INFO",
        ".shipyard/cache/entry", ".shipyard/test/cell/tmp/x")})
    copy = copy_for_tests(project / "tests", project, tmp_path / "copy", keep_out=work)
    copied = sorted(p.relative_to(copy.root).as_posix() for p in copy.root.rglob("*") if p.is_file())
    assert copied == ["README.rst", "conftest.py", "csrc/kernel.c", "docs/index.rst", "pyproject.toml", "setup.py",
                      "tests/data/x.bin", "tests/test_a.py"]
    assert copy.tests == copy.root / "tests"
    # Tests inside the package: the folder that holds them is copied, its siblings are not.
    inside = copy_for_tests(project / "src" / "pkg" / "tests", project, tmp_path / "copy2", keep_out=work)
    assert (inside.tests / "test_in_package.py").is_file()
    assert not (inside.root / "src" / "other").exists() and not (inside.root / "src" / "mod.py").exists()


def test_the_tests_see_the_compilers_the_cell_was_built_with(tmp_path: Path) -> None:
    """A test that compiles a program against the installed package (ember's C++ API) must link the C++
    library the package was built with: the cell's tests get its compilers as SHIPYARD_CC/SHIPYARD_CXX
    (zig's for a manylinux2014 cell), and a pure cell's none; CC and CXX stay the host's."""
    from shipyard.host.toolchains.discover import Compiler
    from shipyard.host.toolchains.zig import ZigCompiler
    from shipyard.wheel.cell_tests import built_with_compilers

    zig = ZigCompiler(tmp_path / "zig" / "0.17.1-glibc2.17", "0.17.1", "22.1.8", "2.17", "0123456789abcdef")
    compilers = built_with_compilers(Compiler(22, zig.cc, zig.cxx, "0.17.1", "2.17", zig=zig))
    assert compilers == {"SHIPYARD_CC": str(zig.cc), "SHIPYARD_CXX": str(zig.cxx)}
    assert built_with_compilers(None) == {}
    project = tmp_path / "consumer"
    _write(project, {"tests/test_consumer.py": f"""
        import os


        def test_the_cells_compilers():
            assert os.environ["SHIPYARD_CXX"] == {str(zig.cxx)!r}
            assert os.environ["SHIPYARD_CC"] == {str(zig.cc)!r}
            assert os.environ.get("CXX") != os.environ["SHIPYARD_CXX"]
    """})
    gate = FeatureGate(statuses={"consumer.cpp": "stable"}, present=frozenset({"consumer.cpp"}),
                       listed={"test_consumer.py": ("consumer.cpp",)})
    work = tmp_path / "work"
    (work / "tmp").mkdir(parents=True)
    judged = run_and_judge_tests(Path(sys.executable), tests_dir=project / "tests", gate=gate, source_dir=project,
                                 state=tmp_path / "state", work=work, timeout=120, extra_env=compilers)
    assert judged.problems == (), judged.log_tail
    assert _results(judged) == {"consumer.cpp": ("passed", 1, 0)}, judged.log_tail
