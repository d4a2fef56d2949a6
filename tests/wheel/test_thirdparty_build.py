"""Projects shipyard did not write, built as they are through `shipyard build` for every Python of
the matrix (tests/fixtures/thirdparty): a setup.py-only C extension whose setup.py alone says it
needs Python >= 3.11 (its metadata is read, its other Pythons are not-applicable cells), a setuptools_scm package
versioned by its git tag with its tests outside the project, a meson-python C extension (meson and
ninja from PyPI) whose version release.yaml overrides, and a C extension that requires
Python >= 3.11, whose other Pythons are not-applicable cells."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import zipfile
from pathlib import Path

import pytest
from support.minirelease import GIT_ENV

from shipyard.cli import main

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).parent.parent / "fixtures" / "thirdparty"
PYTHONS = ("3.9", "3.10", "3.11", "3.12", "3.13")
SCM_TAG_VERSION = "0.5.2"


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, check=True)


def make_checkout(dest: Path) -> Path:
    """The fixture release as a git checkout, and scmpkg as a repository of its own tagged
    v0.5.2 (made here: the project's .git is never committed)."""
    shutil.copytree(FIXTURE, dest, ignore=shutil.ignore_patterns("dist", ".shipyard", "__pycache__"))
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "fixture"]):
        _git(dest, *args)
    scm = dest / "library" / "scmpkg"
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "scmpkg"],
                 ["tag", f"v{SCM_TAG_VERSION}"]):
        _git(scm, *args)
    return dest


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = make_checkout(tmp_path_factory.mktemp("thirdparty") / "release")
    start = time.monotonic()
    status = main(["--root", str(root), "build", "--variant", "cpu", "--test-jobs", "2"])
    seconds = time.monotonic() - start
    return root, status, seconds


def _manifest(root: Path) -> dict:
    return json.loads((root / "dist" / "manifest.json").read_text())


def test_every_project_builds_and_passes_for_every_python_it_admits(built):
    root, status, seconds = built
    print(f"shipyard build of the third-party fixtures, every Python: {seconds:.0f} s")
    manifest = _manifest(root)
    results = {a["cell_id"]: (a["build"]["result"], a["tests"]["result"]) for a in manifest["artifacts"]}
    expected = {f"mesonext-cpu-linux-x86_64-cp{p.replace('.', '')}-wheel" for p in PYTHONS}
    expected |= {f"{c}-cpu-linux-x86_64-cp{p}-wheel" for c in ("oldsetup", "newpy") for p in ("311", "312", "313")}
    expected |= {"scmpkg-any-wheel"}
    assert results == {cell: ("passed", "passed") for cell in expected}
    assert status == 0  # the not-applicable cells do not fail the run


def test_versions_are_the_projects_own_unless_release_yaml_overrides(built):
    root, _, _ = built
    by_component: dict[str, set[str]] = {}
    for artifact in _manifest(root)["artifacts"]:
        by_component.setdefault(artifact["component"], set()).add(artifact["version"])
    assert by_component == {"oldsetup": {"2.1.0"},           # setup.py's
                            "scmpkg": {SCM_TAG_VERSION},      # setuptools_scm, from the git tag
                            "mesonext": {"0.9.1"},            # release.yaml overrides meson.build's 0.9.0
                            "newpy": {"3.0.1"}}               # pyproject.toml's
    installed = {a["cell_id"]: a["tests"]["installed"] for a in _manifest(root)["artifacts"]}
    assert installed["oldsetup-cpu-linux-x86_64-cp311-wheel"] == "2.1.0+cpu"
    assert installed["mesonext-cpu-linux-x86_64-cp313-wheel"] == "0.9.1+cpu"
    assert installed["scmpkg-any-wheel"] == SCM_TAG_VERSION
    names = sorted(p.name for p in (root / "dist" / "whl" / "cpu").glob("*/*.whl"))
    assert "scmpkg-0.5.2-py3-none-any.whl" in names
    assert "oldsetup-2.1.0+cpu-cp311-cp311-manylinux_2_31_x86_64.whl" in names
    assert "mesonext-0.9.1+cpu-cp312-cp312-manylinux_2_31_x86_64.whl" in names
    assert not [n for n in names if n.startswith(("newpy-", "oldsetup-")) and ("-cp39-" in n or "-cp310-" in n)]
    wheel = root / "dist" / "whl" / "cpu" / "mesonext" / "mesonext-0.9.1+cpu-cp312-cp312-manylinux_2_31_x86_64.whl"
    with zipfile.ZipFile(wheel) as zf:
        info = json.loads(zf.read("mesonext/_build_info.json"))
        metadata = zf.read("mesonext-0.9.1+cpu.dist-info/METADATA").decode()
    assert info["version"] == "0.9.1" and "Version: 0.9.1+cpu" in metadata


def test_excluded_pythons_are_not_applicable_cells_in_the_manifest(built):
    root, _, _ = built
    skipped = {r["cell_id"]: (r["result"], r["reason"]) for r in _manifest(root)["not_applicable"]}
    # newpy's pyproject.toml says >=3.11; oldsetup's setup.py does, and its metadata is read.
    assert skipped == {f"{c}-cpu-linux-x86_64-cp{p}-wheel": ("not applicable", "requires-python >=3.11")
                       for c in ("newpy", "oldsetup") for p in ("39", "310")}


def test_the_summary_and_the_matrix_show_the_not_applicable_cells(built, capsys):
    root, _, _ = built
    # Everything is cached now: the re-run prints the same summary in a second or two.
    assert main(["--root", str(root), "build", "--variant", "cpu"]) == 0
    out = capsys.readouterr().out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 3}
    assert "not applicable (requires-python >=3.11)" in rows["newpy-cpu-linux-x86_64-cp39-wheel"]
    assert "not applicable (requires-python >=3.11)" in rows["newpy-cpu-linux-x86_64-cp310-wheel"]
    assert "cached" in rows["newpy-cpu-linux-x86_64-cp311-wheel"]
    assert "not applicable (requires-python >=3.11)" in rows["oldsetup-cpu-linux-x86_64-cp310-wheel"]
    assert "12 of 12 cells ok (4 more not applicable)" in out.replace("\n", " ")
    assert main(["--root", str(root), "matrix", "--cells"]) == 0
    out = capsys.readouterr().out
    assert "newpy-cpu-linux-x86_64-cp310-wheel: not applicable (requires-python >=3.11)" in out
    assert "newpy-cpu-linux-x86_64-cp311-wheel\n" in out
    # The release report of this build's manifest: its own state, with the reason, not failed or missing.
    assert main(["--root", str(root), "report", "--format", "text"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "⊖ 4 not applicable (requires-python)" in out and "✗" not in out
    assert ("⊖ oldsetup · Python 3.9, 3.10 (2 cells): not applicable: requires-python >=3.11; never built, "
            "never a failure") in out
    assert ("⊖ newpy · Python 3.9, 3.10 (2 cells): not applicable: requires-python >=3.11; never built, "
            "never a failure") in out
    assert main(["--root", str(root), "report"]) == 0
    html = (root / "dist" / "report" / "index.html").read_text()
    for component in ("newpy", "oldsetup"):
        for python in ("39", "310"):
            assert f'data-cell="{component}-cpu-linux-x86_64-cp{python}-wheel" data-state="not-applicable"' in html


def test_unmarked_tests_are_gated_by_feature_status_yaml(built):
    """The unittest classes carry no markers: their features are those whose YAML test ids name them."""
    root, _, _ = built
    artifacts = {a["cell_id"]: a for a in _manifest(root)["artifacts"]}
    features = artifacts["oldsetup-cpu-linux-x86_64-cp312-wheel"]["tests"]["features"]
    assert {fid: (f["status"], f["passed"]) for fid, f in features.items()} == {
        "oldsetup.add": ("stable", 3), "oldsetup.overflow": ("beta", 1)}
    assert artifacts["mesonext-cpu-linux-x86_64-cp39-wheel"]["tests"]["features"]["mesonext.mean"]["passed"] == 3
    # scmpkg's tests come from outside the project and needed attrs (test_requires).
    assert artifacts["scmpkg-any-wheel"]["tests"]["features"]["scmpkg.version"]["passed"] == 2


def test_the_sources_stay_as_they_were(built):
    """setuptools and meson-python write into the project they build (build/, egg-info,
    .mesonpy-*): shipyard builds copies, so the checkout holds nothing new but dist/ and .shipyard/."""
    root, _, _ = built
    status = subprocess.run(["git", "status", "--porcelain"], cwd=root, check=True,
                            capture_output=True, text=True).stdout.splitlines()
    assert sorted(status) == ["?? .shipyard/", "?? dist/"], status
    scm = subprocess.run(["git", "status", "--porcelain"], cwd=root / "library" / "scmpkg", check=True,
                         capture_output=True, text=True).stdout
    assert scm == ""


def test_tests_import_helpers_beside_them_and_pytest_args_leave_out_what_the_release_cannot_run(built, capsys):
    root, _, _ = built
    artifacts = {a["cell_id"]: a for a in _manifest(root)["artifacts"]}
    # newpy's tests import `pytestingutils` from beside them, and check that newpy is the installed wheel.
    for python in ("311", "312", "313"):
        newpy = artifacts[f"newpy-cpu-linux-x86_64-cp{python}-wheel"]["tests"]
        assert newpy["features"]["newpy.settings"]["passed"] == 4, newpy["log_tail"]
    # scmpkg's type-checking test needs mypy: release.yaml's pytest_args leave it out, and the record says so.
    scmpkg = artifacts["scmpkg-any-wheel"]["tests"]
    assert scmpkg["result"] == "passed"
    assert scmpkg["left_out"] == {"pytest_args": ["--deselect", "test_typing.py::test_the_package_type_checks"],
                                  "expression": "--deselect test_typing.py::test_the_package_type_checks",
                                  "deselected": ["test_typing.py::test_the_package_type_checks"], "ignored": []}
    said = ("scmpkg: release.yaml's pytest_args `--deselect test_typing.py::test_the_package_type_checks` left out "
            "1 test deselected (test_typing.py::test_the_package_type_checks) (1 cell)")
    assert main(["--root", str(root), "report", "--format", "text"]) == 0
    assert f"− {said}" in " ".join(capsys.readouterr().out.split())
    assert main(["--root", str(root), "notes"]) == 0
    assert f"- **{said.replace(': ', '**: ', 1)}; not tested in this release." in (
        root / "dist" / "RELEASE_NOTES.md").read_text()
