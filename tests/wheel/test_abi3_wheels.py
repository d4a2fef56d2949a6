"""abi3 wheels (a component's `limited_api`): release.yaml's key, one cell per variant and platform
tested on every Python, abi3audit's verdict on the wheel, and (slow) a real build of the fixture
release tests/fixtures/abi3release: one cp39-abi3 wheel, tested on each Python here, served to pip
for a Python that did not build it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from support.minirelease import GIT_ENV

from shipyard.cli import main
from shipyard.release.matrix import expand, select
from shipyard.release.validate import load_spec
from shipyard.wheel.build_request import CELL_NOT_BUILT
from shipyard.wheel.cell_tests import merged_runs
from shipyard.wheel.limited_api import abi3_problems

FIXTURE = Path(__file__).parent.parent / "fixtures" / "abi3release"
PLATFORM = "manylinux_2_31_x86_64"


def _release(tmp_path: Path, old: str = "", new: str = "") -> Path:
    root = tmp_path / "release"
    shutil.copytree(FIXTURE, root)
    if old:
        text = (root / "release.yaml").read_text()
        assert old in text
        (root / "release.yaml").write_text(text.replace(old, new))
    return root


def _checkout(root: Path) -> Path:
    """`root` (a copy of the fixture) as a git checkout: builds date and name their wheels by its commit."""
    env = {**GIT_ENV, "PATH": "/usr/bin:/bin"}
    (root / ".gitignore").write_text("/.shipyard/\n/dist/\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "fixture"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True)
    return root


def _validate(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["--root", str(root), "validate"])
    return code, capsys.readouterr().err


# --- release.yaml ------------------------------------------------------------------------------

def test_a_floor_above_the_lowest_python_is_one_line_naming_the_fix(tmp_path, capsys):
    root = _release(tmp_path, 'limited_api: "3.9"', 'limited_api: "3.11"')
    code, err = _validate(root, capsys)
    assert code == 2
    line = next(line for line in err.splitlines() if "limited_api" in line)
    assert "release.yaml:" in line and "components.fixabi3.limited_api" in line
    assert "lowest Python (3.9)" in line and 'set limited_api: "3.9" or lower' in line and "3.11" in line
    assert "Traceback" not in err


@pytest.mark.parametrize(("value", "says"), [("3.9", "given as a number"), ('"3.1"', '"3.2" or later'),
                                             ('"py39"', '"3.2" or later')])
def test_a_floor_that_is_no_limited_api_version_is_refused(tmp_path, capsys, value, says):
    code, err = _validate(_release(tmp_path, 'limited_api: "3.9"', f"limited_api: {value}"), capsys)
    assert code == 2
    assert "components.fixabi3.limited_api" in err and says in err and "Traceback" not in err


def test_only_an_extension_component_takes_a_floor(tmp_path, capsys):
    code, err = _validate(_release(tmp_path, "kind: python-native", "kind: python-pure"), capsys)
    assert code == 2
    assert "limited_api applies to extension modules" in err and "remove limited_api" in err


# --- the matrix ----------------------------------------------------------------------------------

def test_one_abi3_cell_per_variant_and_platform_is_tested_on_every_python(tmp_path):
    root = _release(tmp_path, "pythons: [", "exclusions:\n  - python: \"3.12\"\n    reason: not this one\npythons: [")
    cells = expand(load_spec(root).release)
    assert [c.id for c in cells] == ["fixabi3-cpu-linux-x86_64-cp39-abi3-wheel"]
    (cell,) = cells
    # Built with the lowest Python; an excluded Python is no test cell of it.
    assert (cell.python, cell.pythons, cell.interpreter_tags) == ("3.9", ("3.9", "3.10", "3.11", "3.13"), "cp39-abi3")
    assert select(cells, python="3.13") == [cell] and select(cells, python="3.12") == []


def test_the_build_python_is_the_lowest_the_project_admits(tmp_path):
    root = _release(tmp_path)
    project = root / "library" / "fixabi3" / "pyproject.toml"
    project.write_text(project.read_text().replace('requires-python = ">=3.9"', 'requires-python = ">=3.11"'))
    (cell,) = expand(load_spec(root).release)
    assert (cell.id, cell.python, cell.pythons) == ("fixabi3-cpu-linux-x86_64-cp39-abi3-wheel", "3.11",
                                                    ("3.11", "3.12", "3.13"))


def test_one_verdict_of_several_pythons_names_the_one_that_failed():
    def run(result: str, feature: str, problems: list[str]) -> dict:
        return {"result": result, "seconds": 2.0, "problems": problems,
                "features": {"abi3.first": {"status": "stable", "result": feature, "summary": f"1 {feature}"}}}

    merged = merged_runs({"3.9": run("passed", "passed", []),
                          "3.12": run("failed", "failed", ["stable feature abi3.first failed"])})
    assert merged["result"] == "failed" and merged["pythons"] == {"3.9": "passed", "3.12": "failed"}
    assert merged["problems"] == ["Python 3.12: stable feature abi3.first failed"]
    assert merged["features"]["abi3.first"]["summary"] == "Python 3.12: 1 failed"
    assert merged_runs({"3.9": run("passed", "passed", [])})["result"] == "passed"


# --- abi3audit -----------------------------------------------------------------------------------

GOOD = """#include <Python.h>
static PyObject *first(PyObject *self, PyObject *items) {
    PyObject *i = PyList_GetItem(items, 0); Py_XINCREF(i); return i;
}
static PyMethodDef methods[] = {{"first", first, METH_O, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, methods};
PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
"""
# _PyLong_Copy is CPython's internal API: no limited-API header declares it, so it is declared here.
BAD = GOOD.replace("#include <Python.h>", "#include <Python.h>\nextern PyObject *_PyLong_Copy(PyObject *);").replace(
    "PyList_GetItem(items, 0); Py_XINCREF(i);", "_PyLong_Copy(items);")


def _abi3_wheel(folder: Path, source: str, module: str = "_native.abi3.so") -> Path:
    """A one-module wheel tagged cp39-abi3, its module compiled from `source` against the limited API."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "m.c").write_text(source)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O0", "-DPy_LIMITED_API=0x03090000",
                    f"-I{sysconfig.get_paths()['include']}", "m.c", "-o", "m.so"], cwd=folder, check=True)
    wheel = folder / f"fixabi3-0.1.0-cp39-abi3-{PLATFORM}.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(folder / "m.so", f"fixabi3/{module}")
        zf.writestr("fixabi3-0.1.0.dist-info/WHEEL",
                    f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: cp39-abi3-{PLATFORM}\n")
        zf.writestr("fixabi3-0.1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: fixabi3\nVersion: 0.1.0\n")
        zf.writestr("fixabi3-0.1.0.dist-info/RECORD", "")
    return wheel


def test_abi3audit_passes_a_limited_api_module(tmp_path):
    assert abi3_problems(_abi3_wheel(tmp_path, GOOD), "3.9") == []


def test_abi3audit_names_the_symbol_outside_the_limited_api(tmp_path):
    (problem,) = abi3_problems(_abi3_wheel(tmp_path, BAD), "3.9")
    assert problem.startswith("_native.abi3.so uses _PyLong_Copy, outside the limited API (abi3audit)")


def test_a_module_named_for_one_python_is_no_abi3_module(tmp_path):
    (problem,) = abi3_problems(_abi3_wheel(tmp_path, GOOD, "_native.cpython-39-x86_64-linux-gnu.so"), "3.9")
    assert "is built for one Python only" in problem and "py_limited_api=True" in problem


# --- a real build (slow) -----------------------------------------------------------------------

def _pythons_here() -> list[str]:
    from shipyard.host.toolchains.discover import discover

    found = {i.version for i in discover().interpreters}
    return [p for p in ("3.9", "3.10", "3.11", "3.12", "3.13") if p in found]


@pytest.mark.slow
def test_one_abi3_wheel_is_built_and_tested_on_every_python(tmp_path):
    root = _checkout(_release(tmp_path))
    assert main(["--root", str(root), "build", "--variant", "cpu", "--test-jobs", "2"]) == 0
    wheels = sorted((root / "dist" / "whl" / "cpu" / "fixabi3").glob("*.whl"))
    assert [w.name for w in wheels] == [f"fixabi3-0.1.0+cpu-cp39-abi3-{PLATFORM}.whl"]
    (record,) = json.loads((root / "dist" / "manifest.json").read_text())["artifacts"]
    here = _pythons_here()
    assert record["cell_id"] == "fixabi3-cpu-linux-x86_64-cp39-abi3-wheel"
    assert record["python"] == here[0] and record["tested_pythons"] == here
    assert record["tests"]["result"] == "passed" and record["tests"]["pythons"] == dict.fromkeys(here, "passed")
    # The index serves the one wheel to pip for a Python that did not build it.
    download = tmp_path / "download"
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
                    "--python-version", here[-1], "--platform", PLATFORM, "--dest", str(download),
                    "--index-url", (root / "dist" / "whl" / "cpu").as_uri(), "fixabi3"], check=True, timeout=300)
    assert [w.name for w in download.glob("*.whl")] == [wheels[0].name]


@pytest.mark.slow
def test_a_symbol_outside_the_limited_api_fails_the_cell_naming_it(tmp_path, capsys):
    root = _release(tmp_path)
    source = root / "library" / "fixabi3" / "src" / "fixabi3" / "_native.c"
    source.write_text(source.read_text().replace("#include <Python.h>\n", "#include <Python.h>\n"
                                                 "extern PyObject *_PyLong_Copy(PyObject *);\n")
                      .replace("PyObject *item = PyList_GetItem(items, 0);", "PyObject *item = _PyLong_Copy(items);"))
    _checkout(root)
    assert main(["--root", str(root), "build", "--variant", "cpu", "--python", "3.11"]) == CELL_NOT_BUILT
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert "components.fixabi3.limited_api" in out and "_PyLong_Copy" in out
    assert not list((root / "dist" / "whl").rglob("*.whl"))


def test_the_github_matrix_gives_an_abi3_cell_every_python_it_is_tested_on(capsys):
    """`shipyard matrix --format github`: a job built from an entry must provide each Python the
    one abi3 wheel is tested on, not only the one that builds it. Fails on the code before: the
    entry named its build Python alone."""
    assert main(["--root", str(FIXTURE), "matrix", "--format", "github"]) == 0
    [entry] = [e for e in json.loads(capsys.readouterr().out)["include"] if e["package_type"] == "wheel"]
    assert entry["id"].endswith("-cp39-abi3-wheel"), entry
    assert entry["test_pythons"].split() == ["3.9", "3.10", "3.11", "3.12", "3.13"], entry
