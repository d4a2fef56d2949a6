"""Third-party projects as components, without building them: what shipyard reads from their own
files (backend, build requirements, requires-python), the not-applicable cells that follow, and
how they are recorded. tests/wheel/test_thirdparty_build.py builds the same fixture projects."""

from __future__ import annotations

import json
import re
import shutil
import sys
import zipfile
from pathlib import Path

from markupsafe import escape

from shipyard.ci.jobs import build_jobs
from shipyard.cli import main
from shipyard.errors import HOST_NOT_READY
from shipyard.plumbing.wheel_metadata import requires_python_problem
from shipyard.record.manifest import ArtifactRecord, NotApplicableRecord, merge_artifacts, read_manifest
from shipyard.release.matrix import expand, not_applicable
from shipyard.release.project_declaration import (
    LEGACY_BACKEND,
    build_backend,
    declared_requires_python,
    uses_vcs_version,
    writes_into_sources,
)
from shipyard.release.pytest_selection import selection_of
from shipyard.release.spec import Spec
from shipyard.release.validate import load_spec
from shipyard.testing.runner import run_and_judge_tests
from shipyard.testing.verdict import FeatureGate
from shipyard.wheel.build_env import build_requirements, combined_requirements
from shipyard.wheel.project_metadata import backend_requires_python

FIXTURE = Path(__file__).parent.parent / "fixtures" / "thirdparty"
LIBRARY = FIXTURE / "library"
FIXTURE_ARGS = "    pytest_args: [--deselect, test_typing.py::test_the_package_type_checks]\n"



def _spec(root: Path) -> Spec:
    """The release as the CLI loads it: with the reader that asks a setup.py's backend (cli/shared.py)."""
    return load_spec(root, backend_reader=backend_requires_python)

def test_backends_and_build_requirements_are_the_projects_own():
    assert build_backend(LIBRARY / "oldsetup") == LEGACY_BACKEND  # setup.py only: PEP 517's fallback
    assert build_requirements(LIBRARY / "oldsetup") == ("setuptools >= 40.8.0",)
    assert build_backend(LIBRARY / "mesonext") == "mesonpy"
    assert build_requirements(LIBRARY / "mesonext") == ("meson-python==0.18.0", "meson==1.8.2", "ninja==1.11.1.4")
    assert uses_vcs_version(build_requirements(LIBRARY / "scmpkg"))
    assert not uses_vcs_version(build_requirements(LIBRARY / "newpy"))
    # Those that leave files in the project build a copy of it; the others build in place.
    assert [writes_into_sources(build_backend(LIBRARY / p)) for p in ("oldsetup", "scmpkg", "mesonext")] == [True] * 3
    assert not writes_into_sources("hatchling.build") and not writes_into_sources("scikit_build_core.build")


def test_a_project_pin_of_a_base_backend_wins():
    combined = combined_requirements(("setuptools<70", "setuptools-scm>=8"))
    assert "setuptools<70" in combined and "setuptools>=70" not in combined
    assert "scikit-build-core>=0.10" in combined and "build>=1.2" in combined


def test_requires_python_comes_from_the_project_or_release_yaml():
    assert declared_requires_python(LIBRARY / "newpy") == (">=3.11", "pyproject.toml [project] requires-python")
    assert declared_requires_python(LIBRARY / "oldsetup") is None  # setup.py computes it
    components = _spec(FIXTURE).release.components
    assert components["newpy"].requires_python == ">=3.11"   # read from pyproject.toml
    # setup.py's python_requires, as the project's metadata (its backend's hook) states it
    assert components["oldsetup"].requires_python == ">=3.11"
    # The reader needs a build frontend, a floor above release/: a caller that hands none keeps release.yaml's.
    assert load_spec(FIXTURE).release.components["oldsetup"].requires_python is None


def test_pythons_a_project_excludes_are_not_applicable_not_cells():
    release = _spec(FIXTURE).release
    ids = {c.id for c in expand(release)}
    ruled_out = {n.cell.id: n.reason for n in not_applicable(release)}
    assert ruled_out == {f"{c}-cpu-linux-x86_64-cp{p}-wheel": "requires-python >=3.11"
                         for c in ("oldsetup", "newpy") for p in ("39", "310")}
    assert not ids & set(ruled_out)
    assert {c for c in ids if c.startswith("newpy-")} == {f"newpy-cpu-linux-x86_64-cp{p}-wheel"
                                                          for p in ("311", "312", "313")}
    assert "scmpkg-any-wheel" in ids


def test_matrix_json_lists_not_applicable_cells_with_their_reason(capsys):
    assert main(["--root", str(FIXTURE), "matrix", "--format", "json", "--component", "newpy"]) == 0
    cells = json.loads(capsys.readouterr().out)
    assert [(c["id"], c["status"], c["reason"]) for c in cells] == [
        ("newpy-cpu-linux-x86_64-cp311-wheel", "build", None),
        ("newpy-cpu-linux-x86_64-cp312-wheel", "build", None),
        ("newpy-cpu-linux-x86_64-cp313-wheel", "build", None),
        ("newpy-cpu-linux-x86_64-cp39-wheel", "not applicable", "requires-python >=3.11"),
        ("newpy-cpu-linux-x86_64-cp310-wheel", "not applicable", "requires-python >=3.11")]
    assert {c["python"] for c in cells if c["status"] == "not applicable"} == {"3.9", "3.10"}
    # A filter that leaves newpy out leaves its not-applicable cells out too.
    assert main(["--root", str(FIXTURE), "matrix", "--format", "json", "--component", "mesonext"]) == 0
    assert {c["status"] for c in json.loads(capsys.readouterr().out)} == {"build"}


def test_github_matrix_and_ci_jobs_do_not_schedule_not_applicable_cells(capsys):
    assert main(["--root", str(FIXTURE), "matrix", "--format", "github"]) == 0
    captured = capsys.readouterr()
    include = json.loads(captured.out)["include"]  # stdout is the matrix alone, as a workflow reads it
    assert sorted(e["python"] for e in include if e["component"] == "newpy") == ["3.11", "3.12", "3.13"]
    assert sorted(e["python"] for e in include if e["component"] == "oldsetup") == ["3.11", "3.12", "3.13"]
    assert ("not applicable, not scheduled: 4 cells (oldsetup: requires-python >=3.11, 2; "
            "newpy: requires-python >=3.11, 2); "
            "`shipyard matrix --cells` lists them") in " ".join(captured.err.split())
    # The generated workflows' jobs (one per component, variant and platform) install and build
    # only the Pythons the project admits.
    newpy = next(j for j in build_jobs(_spec(FIXTURE).release) if j.components == ("newpy",))
    assert newpy.matrix_entry()["pythons"] == "3.11 3.12 3.13"
    assert newpy.matrix_entry()["cells"] == "3"


def test_doctor_does_not_check_not_applicable_cells_and_says_so(capsys):
    status = main(["--root", str(FIXTURE), "doctor"])
    out = capsys.readouterr().out
    ready = re.search(r"(\d+) of (\d+) cells ready", " ".join(out.split()))
    assert ready and status == (0 if ready[1] == ready[2] else HOST_NOT_READY), (status, ready)
    assert "newpy-cpu-linux-x86_64-cp311-wheel" in out and "newpy-cpu-linux-x86_64-cp39-wheel" not in out
    assert "oldsetup-cpu-linux-x86_64-cp310-wheel" not in out
    assert ("not applicable, not checked: 4 cells (oldsetup: requires-python >=3.11, 2; newpy: requires-python "
            ">=3.11, 2)") in " ".join(out.split())


def test_admits_python_reads_specifiers_per_minor_version():
    component = _spec(FIXTURE).release.components["newpy"]
    checks = {spec: [p for p in ("3.9", "3.10", "3.11", "3.12", "3.13")
                     if component.model_copy(update={"requires_python": spec}).admits_python(p)]
              for spec in (">=3.11", "<3.11", ">3.11", "!=3.12.*", "~=3.10.0", ">=3.9,<3.12")}
    assert checks == {">=3.11": ["3.11", "3.12", "3.13"], "<3.11": ["3.9", "3.10"],
                      ">3.11": ["3.11", "3.12", "3.13"],  # 3.11.1 and later are > 3.11
                      "!=3.12.*": ["3.9", "3.10", "3.11", "3.13"], "~=3.10.0": ["3.10"],
                      ">=3.9,<3.12": ["3.9", "3.10", "3.11"]}


def _record(cell_id: str) -> ArtifactRecord:
    name = "newpy-3.0.1+cpu-cp310-cp310-manylinux_2_31_x86_64.whl"  # a manifest's wheel record names a wheel
    return ArtifactRecord(name=name, path=f"whl/cpu/newpy/{name}", sha256="0" * 64, size=1,
                          cell_id=cell_id, component="newpy", package_type="wheel", variant="cpu",
                          variant_tag="cpu", platform="linux-x86_64", python="3.10", version="3.0.1",
                          features=(), tests=None, build={})


def test_a_cell_is_either_an_artifact_or_not_applicable_in_the_manifest(tmp_path):
    path = tmp_path / "manifest.json"
    cell = "newpy-cpu-linux-x86_64-cp310-wheel"
    skipped = NotApplicableRecord(cell_id=cell, component="newpy", package_type="wheel", variant="cpu",
                                  variant_tag="cpu", platform="linux-x86_64", python="3.10",
                                  reason="requires-python >=3.11")
    merge_artifacts(path, release="r", version="1", records=[_record(cell)])
    merge_artifacts(path, release="r", version="1", records=[], not_applicable=[skipped])
    manifest = read_manifest(path)
    assert manifest is not None and manifest.artifacts == () and manifest.not_applicable == (skipped,)
    assert '"result": "not applicable"' in path.read_text()
    merge_artifacts(path, release="r", version="1", records=[_record(cell)])  # the project widened it again
    manifest = read_manifest(path)
    assert manifest is not None and [a.cell_id for a in manifest.artifacts] == [cell]
    assert manifest.not_applicable == ()


def _wheel(folder: Path, requires_python: str | None) -> Path:
    wheel = folder / "newpy-3.0.1+cpu-cp311-cp311-manylinux_2_31_x86_64.whl"
    header = f"Requires-Python: {requires_python}\n" if requires_python else ""
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("newpy-3.0.1+cpu.dist-info/METADATA",
                    f"Metadata-Version: 2.1\nName: newpy\nVersion: 3.0.1+cpu\n{header}\n")
    return wheel


def test_a_wheel_whose_metadata_excludes_its_python_is_a_clear_failure(tmp_path):
    """A setup.py computes python_requires: when release.yaml does not state it, the built
    wheel's metadata is the first to say, and the message says what to write."""
    wheel = _wheel(tmp_path, ">=3.12")
    assert requires_python_problem(wheel, "newpy", "3.12.1", None) == ""
    problem = requires_python_problem(wheel, "newpy", "3.11.7", None)
    assert problem == (f"{wheel.name}: the project's Requires-Python '>=3.12' excludes Python 3.11.7, but nothing in "
                       f"the project's static files says so; set requires_python: '>=3.12' under components.newpy "
                       f"in release.yaml, so that this Python becomes a not-applicable cell")
    assert requires_python_problem(_wheel(tmp_path, None), "newpy", "3.9.18", None) == ""


def _setup_py_release(root: Path, setup_py: str, requires_python: str | None = None) -> Path:
    """A one-component release whose project is a setup.py alone."""
    project = root / "library" / "legacy"
    project.mkdir(parents=True)
    (project / "setup.py").write_text(setup_py)
    stated = f"    requires_python: \"{requires_python}\"\n" if requires_python else ""
    (root / "release.yaml").write_text(
        "schema_version: 1\nrelease: {name: legacy, version: 1.0.0, wheel_size_budget_mb: 5}\n"
        "components:\n  legacy:\n    path: library/legacy\n    kind: python-pure\n    import_name: legacy\n"
        f"    package_types: [wheel]\n{stated}variants:\n  cpu: {{tag: cpu}}\nplatforms:\n  linux-x86_64:\n"
        "    {os: linux, arch: x86_64, wheel_platform_tag: manylinux_2_31_x86_64, github_runner: ubuntu-22.04}\n"
        "pythons: [\"3.9\", \"3.12\"]\n")
    (root / "feature_status.yaml").write_text(
        "schema_version: 1\nfeatures:\n  - {id: legacy.x, title: the x, component: legacy, since: 1.0.0, "
        "status: stable, tests: [tests/test_x.py]}\n")
    # A stable feature's tests exist before the release does (validate refuses a pending one).
    (root / "tests").mkdir()
    (root / "tests" / "test_x.py").write_text("def test_x():\n    pass\n")
    return project


def test_a_setup_py_projects_requires_python_is_read_once_per_change_of_its_files(tmp_path, monkeypatch):
    monkeypatch.setenv("SHIPYARD_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "release"
    project = _setup_py_release(root, "from setuptools import setup\n"
                                      "setup(name='legacy', version='1.0', python_requires='>=' + '3.10')\n")
    assert _spec(root).release.components["legacy"].requires_python == ">=3.10"
    cached = tmp_path / "cache" / "project-metadata"
    assert len(list(cached.glob("*.json"))) == 1
    assert _spec(root).release.components["legacy"].requires_python == ">=3.10"
    assert len(list(cached.glob("*.json"))) == 1  # the same files: the cached answer, no new hook run
    (project / "setup.py").write_text((project / "setup.py").read_text().replace("3.10", "3.12"))
    assert _spec(root).release.components["legacy"].requires_python == ">=3.12"
    assert len(list(cached.glob("*.json"))) == 2
    assert sorted(project.parent.iterdir()) == [project] and sorted(p.name for p in project.iterdir()) == ["setup.py"]


def test_the_backends_warnings_go_to_a_log_that_validate_names(tmp_path, monkeypatch, capsys):
    """setuptools warns in some 20 lines per project (deprecated keys, license classifiers): that read
    as a failure in validate's output. They go to a log in the cache; validate names it in one line."""
    monkeypatch.setenv("SHIPYARD_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "release"
    project = _setup_py_release(root, "from setuptools import setup\n"
                                      "setup(name='legacy', version='1.0', python_requires='>=3.9')\n")
    (project / "setup.cfg").write_text("[metadata]\ndescription-file = README\n")  # a dash: setuptools warns
    for _ in range(2):  # the hook's run, then its cached answer: the same line
        assert main(["--root", str(root), "validate"]) == 0
        captured = capsys.readouterr()
        out = " ".join((captured.out + captured.err).split())
        assert "Warning" not in out and "description-file" not in out, out
        (log,) = (tmp_path / "cache" / "project-metadata").glob("*.warnings.log")
        assert f"note: legacy's build backend gave warnings while its metadata was read; kept in {log}" in out
        assert "description-file" in log.read_text()
    assert not list(root.rglob("*.log"))  # not in the checkout


def test_a_setup_py_whose_metadata_hook_fails_is_one_clear_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SHIPYARD_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "release"
    _setup_py_release(root, "raise SystemExit('this setup.py needs a compiler flag')\n")
    assert main(["--root", str(root), "matrix"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert (f"{root / 'release.yaml'}:5: components.legacy.path: its build backend's prepare_metadata_for_build_"
            f"wheel of legacy failed (this setup.py needs a compiler flag); fix the project, or state "
            f"requires_python under components.legacy so that the hook is not needed (got 'library/legacy')") in err
    assert "Traceback" not in err
    # release.yaml's own requires_python needs no hook: the same project validates.
    shutil.rmtree(root)
    _setup_py_release(root, "raise SystemExit('this setup.py needs a compiler flag')\n", requires_python=">=3.9")
    assert _spec(root).release.components["legacy"].requires_python == ">=3.9"


def test_a_copied_tests_folder_imports_the_helpers_beside_its_tests_and_the_installed_package(tmp_path):
    """The tests folder is copied out of the project and run against what is installed (here, this
    interpreter's site-packages): a helper module beside the tests imports by name, as in the
    project's own runs, and a same-named folder in the tests does not shadow the installed package."""
    tests = tmp_path / "project" / "tests"
    (tests / "packaging").mkdir(parents=True)
    (tests / "packaging" / "__init__.py").write_text("SHADOW = True  # the folder, not the installed package\n")
    (tests / "pytestingutils.py").write_text("def conv(workers):\n    return f'workers = {workers}'\n")
    (tests / "test_conv.py").write_text(
        "import packaging\nfrom pytestingutils import conv\n\n\n"
        "def test_the_helper_beside_imports():\n    assert conv(3) == 'workers = 3'\n\n\n"
        "def test_the_installed_package_wins():\n"
        "    assert not hasattr(packaging, 'SHADOW') and 'site-packages' in packaging.__file__\n")
    # Nested conftest.py files outside any package (as ember's tests/ and tests/distributed/ have),
    # each with its own fixture, and a helper beside a test in the subfolder.
    (tests / "conftest.py").write_text("import pytest\nfrom pytestingutils import conv\n\n\n"
                                       "@pytest.fixture\ndef doc():\n    return conv(5)\n")
    (tests / "sub").mkdir()
    (tests / "sub" / "conftest.py").write_text("import pytest\n\n\n@pytest.fixture\ndef port():\n    return 29500\n")
    (tests / "sub" / "subhelper.py").write_text("def twice(n):\n    return 2 * n\n")
    (tests / "sub" / "test_sub.py").write_text("from subhelper import twice\n\n\n"
                                               "def test_both_conftests_and_the_helper(doc, port):\n"
                                               "    assert (doc, twice(port)) == ('workers = 5', 59000)\n")
    work = tmp_path / "work"
    (work / "tmp").mkdir(parents=True)
    gate = FeatureGate(statuses={"conv.helper": "stable"}, present=frozenset({"conv.helper"}),
                       listed={"test_conv.py": ("conv.helper",), "sub/": ("conv.helper",)})
    judged = run_and_judge_tests(Path(sys.executable), tests_dir=tests, gate=gate, source_dir=tmp_path / "project",
                                 state=tmp_path / "state", work=work)
    assert judged.problems == (), judged.log_tail
    assert [(f.id, f.result, f.passed) for f in judged.features] == [("conv.helper", "passed", 3)]


def _selection_suite(tests: Path) -> None:
    """A suite with tests this release cannot run: one needs mypy, one the network, one a GPU, one
    is slow; and one belongs to another component's feature."""
    tests.mkdir(parents=True)
    (tests / "test_core.py").write_text(
        "import shutil\nimport pytest\n\n\n"
        "def test_core():\n    assert True\n\n\n"
        "def test_mypy_strict():\n    assert shutil.which('no-such-type-checker'), 'needs a type checker'\n\n\n"
        "@pytest.mark.slow\ndef test_for_an_hour():\n    assert False, 'too slow for a release run'\n\n\n"
        "def test_other():\n    assert True\n")
    (tests / "test_gpu.py").write_text("class TestGpu:\n    def test_kernel(self):\n        assert False, 'no GPU'\n")
    (tests / "net").mkdir()
    (tests / "net" / "test_download.py").write_text("def test_download():\n    assert False, 'no network'\n")


def _judge_selection(tmp_path: Path, tests: Path, args: list[str]):
    work = tmp_path / "work"
    shutil.rmtree(work, ignore_errors=True)
    (work / "tmp").mkdir(parents=True)
    gate = FeatureGate(statuses={"core.works": "stable", "other.x": "stable"}, present=frozenset({"core.works"}),
                       listed={"test_core.py::test_core": ("core.works",), "test_core.py::test_other": ("other.x",)})
    return run_and_judge_tests(Path(sys.executable), tests_dir=tests, gate=gate, other_features=["other.x"],
                               source_dir=tmp_path, state=tmp_path / "state", work=work,
                               selection=selection_of(args))


def test_pytest_args_leave_tests_out_and_the_run_records_which(tmp_path):
    tests = tmp_path / "tests"
    _selection_suite(tests)
    args = ["-k", "not mypy", "-m", "not slow", "--deselect", "test_gpu.py::TestGpu", "--ignore", "net"]
    judged = _judge_selection(tmp_path, tests, args)
    assert judged.problems == (), judged.log_tail
    assert judged.left_out == {
        "pytest_args": args, "expression": "-k 'not mypy' -m 'not slow' --deselect test_gpu.py::TestGpu --ignore net",
        # test_other is another component's (the feature plugin leaves it out): not counted here.
        "deselected": ["test_core.py::test_for_an_hour", "test_core.py::test_mypy_strict",
                       "test_gpu.py::TestGpu::test_kernel"],
        "ignored": ["net"]}
    # Without them the same suite fails its cell: these tests need what the release lacks.
    judged = _judge_selection(tmp_path, tests, [])
    assert judged.left_out is None
    assert judged.problems and "tests of no feature failed (4 of 4)" in " ".join(judged.problems)


def test_validate_refuses_pytest_args_that_could_change_the_verdict(tmp_path, capsys):
    root = tmp_path / "release"
    shutil.copytree(FIXTURE, root)
    release_yaml = root / "release.yaml"
    text = release_yaml.read_text()
    assert FIXTURE_ARGS in text
    assert main(["--root", str(root), "validate"]) == 0
    capsys.readouterr()
    cases = {'["-x"]': ("pytest_args.0", "-x is not a selection option", "'-x'"),
             '["--maxfail=1"]': ("pytest_args.0", "--maxfail=1 is not a selection option", "'--maxfail=1'"),
             '["-k", "not mypy", "-p", "no:randomly"]': ("pytest_args.2", "-p is not a selection option", "'-p'"),
             '["--lf"]': ("pytest_args.0", "--lf is not a selection option", "'--lf'"),
             '["-n", "4"]': ("pytest_args.0", "-n is not a selection option", "'-n'"),
             '["--co"]': ("pytest_args.0", "--co is not a selection option", "'--co'"),
             '["test_scmpkg.py"]': ("pytest_args.0", "a bare argument would name what pytest runs instead of the "
                                    "tests folder", "'test_scmpkg.py'"),
             '["--ignore", "/etc"]': ("pytest_args.1", "--ignore takes a path relative to the tests folder", "'/etc'"),
             '["-k"]': ("pytest_args.0", "-k needs a keyword expression", "'-k'"),
             '"-k not mypy"': ("pytest_args", "must be a list", "'-k not mypy'")}
    for value, (key, message, got) in cases.items():
        release_yaml.write_text(text.replace(FIXTURE_ARGS, f"    pytest_args: {value}\n"))
        line = release_yaml.read_text().splitlines().index(f"    pytest_args: {value}") + 1
        assert main(["--root", str(root), "validate"]) == 2, value
        err = " ".join(capsys.readouterr().err.split())
        assert f"{release_yaml}:{line}: components.scmpkg.{key}: {message}" in err, (value, err)
        assert f"(got {got})" in err and "Traceback" not in err, (value, err)
    release_yaml.write_text(text.replace(FIXTURE_ARGS, "    pytest_args: [-k, not mypy, -m, not gpu, --deselect, "
                                                       "test_scmpkg.py::test_greet, --ignore=test_typing.py]\n"))
    assert main(["--root", str(root), "validate"]) == 0


def test_the_report_and_the_notes_say_what_pytest_args_left_out(tmp_path, capsys):
    """A manifest whose scmpkg cell ran with pytest_args (as the build records it): the report's
    text and page and the release notes' known issues name the test left out, and the selection."""
    root = tmp_path / "release"
    shutil.copytree(FIXTURE, root)
    left_out = {"pytest_args": ["--deselect", "test_typing.py::test_the_package_type_checks"],
                "expression": "--deselect test_typing.py::test_the_package_type_checks",
                "deselected": ["test_typing.py::test_the_package_type_checks"], "ignored": []}
    tests = {"result": "passed", "installed": "0.5.2", "installer": "uv", "seconds": 1.0, "problems": [],
             "features": {"scmpkg.version": {"status": "stable", "result": "passed", "summary": "passed (2 of 2)",
                                             "passed": 2, "failed": 0, "skipped": 0, "skip_reasons": []}},
             "slowest": [], "span": [0, 0], "log_tail": "", "left_out": left_out}
    wheel = root / "dist" / "whl" / "cpu" / "scmpkg" / "scmpkg-0.5.2-py3-none-any.whl"
    wheel.parent.mkdir(parents=True)
    wheel.write_bytes(b"stand-in")
    record = ArtifactRecord(name=wheel.name, path="whl/cpu/scmpkg/" + wheel.name, sha256="0" * 64, size=8,
                            cell_id="scmpkg-any-wheel", component="scmpkg", package_type="wheel", variant="any",
                            variant_tag="any", platform="any", python=None, version="0.5.2", features=(),
                            tests=tests, build={"result": "passed"})
    merge_artifacts(root / "dist" / "manifest.json", release="thirdparty", version="1.0.0", records=[record])
    said = ("release.yaml's pytest_args `--deselect test_typing.py::test_the_package_type_checks` left out 1 test "
            "deselected (test_typing.py::test_the_package_type_checks)")
    assert main(["--root", str(root), "report", "--format", "text"]) == 0
    assert f"− scmpkg: {said} (1 cell)" in " ".join(capsys.readouterr().out.split())
    assert main(["--root", str(root), "report"]) == 0
    html = (root / "dist" / "report" / "index.html").read_text()
    assert f"<li><strong>scmpkg</strong>: {escape(said)} (1 cell)</li>" in html  # as the page escapes text
    assert f'<p class="left-out">{escape(said)}</p>' in html
    assert main(["--root", str(root), "notes"]) == 0
    notes = (root / "dist" / "RELEASE_NOTES.md").read_text()
    known = notes.split("## Known issues", 1)[1]
    assert f"- **scmpkg**: {said} (1 cell); not tested in this release." in known
