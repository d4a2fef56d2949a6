"""Third-party projects as components, without building them: what shipyard reads from their own
files (backend, build requirements, requires-python), the not-applicable cells that follow, and
how they are recorded. tests/test_thirdparty_build.py builds the same fixture projects."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from shipyard.ci.jobs import build_jobs
from shipyard.cli import main
from shipyard.record.manifest import ArtifactRecord, NotApplicableRecord, merge_artifacts, read_manifest
from shipyard.release.matrix import expand, not_applicable
from shipyard.release.project_declaration import (
    LEGACY_BACKEND,
    build_backend,
    declared_requires_python,
    uses_vcs_version,
    writes_into_sources,
)
from shipyard.release.validate import load_spec
from shipyard.wheel.build_env import build_requirements, combined_requirements
from shipyard.wheel.metadata import requires_python_problem

FIXTURE = Path(__file__).parent / "fixtures" / "thirdparty"
LIBRARY = FIXTURE / "library"


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
    components = load_spec(FIXTURE).release.components
    assert components["newpy"].requires_python == ">=3.11"   # read from pyproject.toml
    assert components["oldsetup"].requires_python == ">=3.9"  # stated in release.yaml


def test_pythons_a_project_excludes_are_not_applicable_not_cells():
    release = load_spec(FIXTURE).release
    ids = {c.id for c in expand(release)}
    ruled_out = {n.cell.id: n.reason for n in not_applicable(release)}
    assert ruled_out == {"newpy-cpu-linux-x86_64-cp39-wheel": "requires-python >=3.11",
                         "newpy-cpu-linux-x86_64-cp310-wheel": "requires-python >=3.11"}
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
    assert main(["--root", str(FIXTURE), "matrix", "--format", "json", "--component", "oldsetup"]) == 0
    assert {c["status"] for c in json.loads(capsys.readouterr().out)} == {"build"}


def test_github_matrix_and_ci_jobs_do_not_schedule_not_applicable_cells(capsys):
    assert main(["--root", str(FIXTURE), "matrix", "--format", "github"]) == 0
    captured = capsys.readouterr()
    include = json.loads(captured.out)["include"]  # stdout is the matrix alone, as a workflow reads it
    assert sorted(e["python"] for e in include if e["component"] == "newpy") == ["3.11", "3.12", "3.13"]
    assert ("not applicable, not scheduled: 2 cells (newpy: requires-python >=3.11, 2); "
            "`shipyard matrix --cells` lists them") in " ".join(captured.err.split())
    # The generated workflows' jobs (one per component, variant and platform) install and build
    # only the Pythons the project admits.
    newpy = next(j for j in build_jobs(load_spec(FIXTURE).release) if j.component == "newpy")
    assert newpy.matrix_entry()["pythons"] == "3.11 3.12 3.13"
    assert newpy.matrix_entry()["cells"] == "3"


def test_doctor_does_not_check_not_applicable_cells_and_says_so(capsys):
    assert main(["--root", str(FIXTURE), "doctor"]) == 0
    out = capsys.readouterr().out
    assert "newpy-cpu-linux-x86_64-cp311-wheel" in out and "newpy-cpu-linux-x86_64-cp39-wheel" not in out
    assert "not applicable, not checked: 2 cells (newpy: requires-python >=3.11, 2)" in " ".join(out.split())


def test_admits_python_reads_specifiers_per_minor_version():
    component = load_spec(FIXTURE).release.components["newpy"]
    checks = {spec: [p for p in ("3.9", "3.10", "3.11", "3.12", "3.13")
                     if component.model_copy(update={"requires_python": spec}).admits_python(p)]
              for spec in (">=3.11", "<3.11", ">3.11", "!=3.12.*", "~=3.10.0", ">=3.9,<3.12")}
    assert checks == {">=3.11": ["3.11", "3.12", "3.13"], "<3.11": ["3.9", "3.10"],
                      ">3.11": ["3.11", "3.12", "3.13"],  # 3.11.1 and later are > 3.11
                      "!=3.12.*": ["3.9", "3.10", "3.11", "3.13"], "~=3.10.0": ["3.10"],
                      ">=3.9,<3.12": ["3.9", "3.10", "3.11"]}


def _record(cell_id: str) -> ArtifactRecord:
    return ArtifactRecord(name=f"{cell_id}.whl", path=f"whl/cpu/{cell_id}.whl", sha256="0" * 64, size=1,
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
