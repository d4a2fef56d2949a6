"""`shipyard init`: a starting release written from the projects' own metadata and sources, that
`shipyard validate` accepts as it is. No builds: only setup.py's metadata hook runs (oldsetup)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from shipyard.cli import main
from shipyard.host.toolchains.discover import find_interpreters
from shipyard.release.fields import supported_pythons
from shipyard.release.starting_release import ignore_outputs
from shipyard.release.validate import load_spec
from shipyard.wheel.project_metadata import backend_requires_python

LIBRARY = Path(__file__).parent.parent / "fixtures" / "thirdparty" / "library"


@pytest.fixture
def release_root(tmp_path, monkeypatch):
    monkeypatch.setenv("SHIPYARD_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "release"
    shutil.copytree(LIBRARY, root / "library")
    return root


def _init(root: Path, *args: str) -> int:
    return main(["init", "--root", str(root), *args])


def test_init_writes_a_release_of_four_real_world_shaped_projects_that_validates(release_root, capsys):
    projects = [str(release_root / "library" / name) for name in ("oldsetup", "mesonext", "newpy", "scmpkg")]
    assert _init(release_root, *projects) == 0
    assert main(["validate", "--root", str(release_root)]) == 0
    assert "ok: release.yaml and feature_status.yaml are valid (4 components" in capsys.readouterr().out
    release = load_spec(release_root, backend_reader=backend_requires_python).release
    components = release.components
    assert {n: c.kind for n, c in components.items()} == {
        "oldsetup": "python-native", "mesonext": "python-native", "newpy": "python-native", "scmpkg": "python-pure"}
    assert {n: c.import_name for n, c in components.items()} == {n: n for n in components}
    assert {n: c.tests for n, c in components.items()} == {
        "oldsetup": "tests", "mesonext": "tests", "newpy": "tests", "scmpkg": None}
    # The release's version is the first project's (setup.py's, through its backend's hook).
    assert release.release.version == "2.1.0"
    # The host's Pythons that shipyard builds for and some project supports (mesonext: >=3.9).
    host = [i.version for i in find_interpreters()]
    assert list(release.pythons) == [p for p in host if p in supported_pythons() and p not in ("3.6", "3.7", "3.8")]
    text = (release_root / "release.yaml").read_text()
    assert "oldsetup requires Python >=3.11" in text and "DECIDE" in text
    # The platform's keys follow from its name.
    platform = release.platforms["linux-x86_64"]
    assert (platform.os, platform.arch, platform.wheel_platform_tag, platform.github_runner) == (
        "linux", "x86_64", "manylinux_2_31_x86_64", "ubuntu-22.04")
    features = load_spec(release_root).features.features
    assert [(f.id, f.component, f.status, f.tests) for f in features][0] == (
        "oldsetup.tests", "oldsetup", {"*": "beta"}, ("library/oldsetup/tests/",))


def test_test_requirements_and_testpaths_come_from_the_projects_own_configuration(tmp_path, capsys):
    extra = tmp_path / "withextra"
    (extra / "src" / "withextra").mkdir(parents=True)
    (extra / "src" / "withextra" / "__init__.py").write_text("")
    (extra / "checks").mkdir()
    (extra / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
        '[project]\nname = "WithExtra"\nversion = "1.2"\nrequires-python = ">=3.9"\n'
        '[project.optional-dependencies]\ntests = ["hypothesis>=6", "withextra[fast]", '
        '"tomli; python_version < \'3.11\'"]\n'
        '[tool.pytest.ini_options]\ntestpaths = ["checks"]\n')
    grouped = tmp_path / "grouped"
    (grouped / "grouped" / "tests").mkdir(parents=True)
    (grouped / "grouped" / "__init__.py").write_text("")
    (grouped / "pyproject.toml").write_text(
        '[project]\nname = "grouped"\nversion = "0.3"\n'
        '[dependency-groups]\ncore = ["attrs>=23"]\ndev = ["ruff"]\n'
        'test = ["pytest-timeout", {include-group = "core"}]\n')
    assert _init(tmp_path, str(extra), str(grouped)) == 0
    components = load_spec(tmp_path).release.components
    assert components["withextra"].tests == "checks"  # pytest's testpaths
    assert components["withextra"].test_requires == ("hypothesis>=6", 'tomli; python_version < "3.11"')
    assert components["withextra"].kind == "python-pure" and components["withextra"].import_name == "withextra"
    assert components["grouped"].tests == "grouped/tests"
    assert components["grouped"].test_requires == ("pytest-timeout", "attrs>=23")  # `test` before `dev`


def test_init_refuses_to_replace_a_release_unless_forced(release_root, capsys):
    project = str(release_root / "library" / "newpy")
    (release_root / "release.yaml").write_text("# mine\n")
    assert _init(release_root, project) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{release_root / 'release.yaml'}: (file): already exists" in err and "pass --force" in err
    assert (release_root / "release.yaml").read_text() == "# mine\n"
    assert not (release_root / "feature_status.yaml").exists()
    assert _init(release_root, project, "--force") == 0
    assert "components:\n  newpy:" in (release_root / "release.yaml").read_text()


def test_a_folder_that_is_no_python_project_is_one_line_naming_it(tmp_path, capsys):
    (tmp_path / "notes").mkdir()
    assert _init(tmp_path, str(tmp_path / "notes")) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert (f"{tmp_path / 'notes'}: (folder): is no Python project (no pyproject.toml, no setup.py); give the "
            f"folder that holds the project's pyproject.toml or setup.py") in " ".join(err.split())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes"]


def test_init_takes_a_project_outside_the_release_folder_and_says_ci_cannot_build_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SHIPYARD_CACHE", str(tmp_path / "cache"))
    project = tmp_path / "checkouts" / "newpy"
    shutil.copytree(LIBRARY / "newpy", project)
    root = tmp_path / "release"
    root.mkdir()
    assert _init(root, str(project)) == 0, capsys.readouterr().err
    text = (root / "release.yaml").read_text()
    assert '    path: "../checkouts/newpy"\n' in text, text
    # The comment above it: not in the repository the workflows check out (the release folder, outside git).
    comment = " ".join(line.strip(" #") for line in text.splitlines() if line.strip().startswith("#"))
    assert "lies outside the repository, so the generated workflows cannot build it on GitHub" in comment, comment
    assert "pin its released sdist" in comment
    assert main(["validate", "--root", str(root)]) == 0, capsys.readouterr().err
    spec = load_spec(root)
    assert spec.component_dir("newpy") == project
    # Its feature's tests are named as the project's own runs name them, and they exist now.
    assert spec.features.features[0].tests == ("tests/",) and spec.pending_tests == ()


def test_init_writes_an_absolute_path_only_for_a_project_on_another_tree():
    from shipyard.release.starting_release import project_path

    assert project_path(Path("/srv/checkouts/newpy"), Path("/srv/release")) == "../checkouts/newpy"
    assert project_path(Path("/opt/newpy"), Path("/srv/release")) == "/opt/newpy"
    assert project_path(Path("/srv/release/library/newpy"), Path("/srv/release")) == "library/newpy"


def test_init_writes_no_size_budget_and_says_how_to_add_one(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SHIPYARD_CACHE", str(tmp_path / "cache"))
    shutil.copytree(LIBRARY / "newpy", tmp_path / "newpy")
    assert _init(tmp_path, str(tmp_path / "newpy")) == 0
    text = (tmp_path / "release.yaml").read_text()
    assert "wheel_size_budget_mb" not in "".join(line for line in text.splitlines() if not line.strip().startswith("#"))
    assert "add `wheel_size_budget_mb: N`" in text
    assert main(["validate", "--root", str(tmp_path)]) == 0
    assert load_spec(tmp_path).release.release.wheel_size_budget_mb is None


def _sdist(project: Path, out: Path) -> Path:
    """`project`'s sdist as its authors would release it: one top folder `<name>-<version>/`."""
    import tarfile

    out.mkdir(parents=True, exist_ok=True)
    top = f"{project.name}-0.3.1"
    target = out / f"{top}.tar.gz"
    with tarfile.open(target, "w:gz") as tar:
        tar.add(project, arcname=top)
    return target


def test_init_pins_a_released_sdist_given_as_url_and_sha256(tmp_path, capsys, monkeypatch):
    import hashlib

    monkeypatch.setenv("SHIPYARD_CACHE", str(tmp_path / "cache"))
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "tutorial"
    sdist = _sdist(fixture / "tinypure", tmp_path / "sdists")
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    root = tmp_path / "release"
    shutil.copytree(fixture / "tinyext", root / "tinyext")
    assert _init(root, str(root / "tinyext"), f"{sdist.as_uri()}#sha256={digest}") == 0, capsys.readouterr().err
    spec = load_spec(root, backend_reader=backend_requires_python)
    pinned = spec.release.components["tinypure"]
    assert pinned.path is None and pinned.sdist is not None
    assert (pinned.sdist.url, pinned.sdist.sha256) == (sdist.as_uri(), digest)
    # its own version (the release's is tinyext's 1.2.0), its tags tinypure-v0.3.1, its test ids its own
    assert pinned.version == "0.3.1" and spec.release.release.version == "1.2.0"
    feature = next(f for f in spec.features.features if f.component == "tinypure")
    assert feature.tests == ("tests/",) and feature.since == "0.3.1"
    assert main(["--root", str(root), "validate"]) == 0, capsys.readouterr().err
    # what the commands write beside it is never committed: a CI job would find stale wheels in dist/
    assert (root / ".gitignore").read_text() == "# shipyard's outputs (shipyard init)\n/dist/\n/.shipyard/\n"
    (root / ".gitignore").write_text("*.pyc\ndist/")  # a user's own, without a final newline
    assert ignore_outputs(root) == ["/.shipyard/"]
    assert (root / ".gitignore").read_text() == "*.pyc\ndist/\n# shipyard's outputs (shipyard init)\n/.shipyard/\n"
    # a wrong sha256: one line, nothing written
    other = tmp_path / "other"
    shutil.copytree(fixture / "tinyext", other / "tinyext")
    capsys.readouterr()
    assert _init(other, str(other / "tinyext"), f"{sdist.as_uri()}#sha256={'0' * 64}") == 2
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("fetching ")]
    assert len(err) == 1 and err[0].startswith(f"error: init: {sdist.as_uri()} ") and digest in err[0], err
    assert not (other / "release.yaml").exists()


def test_init_gives_a_later_project_whose_version_is_dynamic_its_own_version(tmp_path, capsys, monkeypatch):
    # A released sdist whose [project] table leaves the version to the build (setuptools_scm's, or
    # an attr/file) is another project's release all the same: its version comes from its backend's
    # hook, not the first project's (its tags would be v1.2.0 and its features since 1.2.0).
    import hashlib

    monkeypatch.setenv("SHIPYARD_CACHE", str(tmp_path / "cache"))
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "tutorial"
    project = tmp_path / "src" / "tinypure"
    shutil.copytree(fixture / "tinypure", project)
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('version = "0.3.1"', 'dynamic = ["version"]')
                         + '\n[tool.setuptools.dynamic]\nversion = {file = "VERSION"}\n')
    (project / "VERSION").write_text("0.4.0\n")
    (project / "MANIFEST.in").write_text((project / "MANIFEST.in").read_text() + "include VERSION\n")
    sdist = _sdist(project, tmp_path / "sdists")
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    root = tmp_path / "release"
    shutil.copytree(fixture / "tinyext", root / "tinyext")
    assert _init(root, str(root / "tinyext"), f"{sdist.as_uri()}#sha256={digest}") == 0, capsys.readouterr().err
    spec = load_spec(root, backend_reader=backend_requires_python)
    assert spec.release.release.version == "1.2.0"
    assert spec.release.components["tinypure"].version == "0.4.0"
    assert next(f for f in spec.features.features if f.component == "tinypure").since == "0.4.0"
    assert "its tags are tinypure-v0.4.0" in (root / "release.yaml").read_text()
