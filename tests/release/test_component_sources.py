"""Components from anywhere (docs/release-yaml.md, "Where a component's sources are"): a project
folder outside the release folder, an sdist pinned by url and sha256, or a git repository at a
commit (a local one made here), which validate fetches once into shipyard's cache. Tiny projects in
temporary folders; nothing is built."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from shipyard.cli import main
from shipyard.release.validate import load_spec

FEATURES = """schema_version: 1
features:
  - id: tinypkg.add
    title: addition
    component: tinypkg
    since: 1.0.0
    status: stable
    tests: [{test_id}]
"""

RELEASE = """schema_version: 1
release:
  name: anywhere
  version: 1.0.0
  wheel_size_budget_mb: 5
components:
  tinypkg:
{source}
    kind: python-pure
    import_name: tinypkg
    package_types: [wheel]
    tests: tests
variants:
  cpu:
    tag: cpu
platforms:
  linux-x86_64:
    os: linux
    arch: x86_64
    wheel_platform_tag: manylinux_2_31_x86_64
    github_runner: ubuntu-22.04
pythons: ["3.11", "3.12"]
"""


def _project(folder: Path) -> Path:
    """A pure project with its tests inside it, as an sdist unpacks."""
    (folder / "src" / "tinypkg").mkdir(parents=True)
    (folder / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools>=70"]\n'
                                           'build-backend = "setuptools.build_meta"\n\n'
                                           '[project]\nname = "tinypkg"\nversion = "1.0"\n'
                                           'requires-python = ">=3.9"\n')
    (folder / "src" / "tinypkg" / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
    (folder / "tests").mkdir()
    (folder / "tests" / "test_tiny.py").write_text("import tinypkg\n\n\ndef test_add():\n"
                                                   "    assert tinypkg.add(1, 2) == 3\n")
    return folder


def _release(root: Path, source: str, test_id: str = "tests/test_tiny.py::test_add") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "release.yaml").write_text(RELEASE.format(source=source))
    (root / "feature_status.yaml").write_text(FEATURES.format(test_id=test_id))
    return root


def _sdist(path: Path, project: Path, *, top: str = "tinypkg-1.0", extra: dict[str, bytes] | None = None) -> str:
    """Write a .tar.gz of `project` under `top/` (plus `extra` members by name); return its sha256."""
    with tarfile.open(path, "w:gz") as tar:
        tar.add(project, arcname=top)
        for name, data in (extra or {}).items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err, captured.err
    return [line for line in (captured.out + captured.err).splitlines() if line.strip()]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SHIPYARD_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.parametrize("absolute", [False, True], ids=["relative", "absolute"])
def test_a_project_outside_the_release_folder_validates_and_gives_cells(tmp_path, capsys, absolute):
    project = _project(tmp_path / "elsewhere" / "tinypkg")
    path = str(project) if absolute else "../elsewhere/tinypkg"
    root = _release(tmp_path / "release", f"    path: {path}")
    assert main(["--root", str(root), "validate"]) == 0, _lines(capsys)
    capsys.readouterr()
    spec = load_spec(root)
    assert spec.component_dir("tinypkg") == project
    # Its feature's test id is its own project's (tests/...), and it exists: not pending.
    assert spec.pending_tests == ()
    assert main(["--root", str(root), "matrix", "--format", "json"]) == 0
    cells = json.loads(capsys.readouterr().out)
    assert [(c["component"], c["package_type"]) for c in cells] == [("tinypkg", "wheel")], cells  # pure: one


def test_a_missing_project_folder_is_named_where_it_was_looked_for(tmp_path, capsys):
    root = _release(tmp_path / "release", "    path: ../nowhere/tinypkg")
    assert main(["--root", str(root), "validate"]) == 2
    text = "\n".join(_lines(capsys))
    assert f"components.tinypkg.path: folder does not exist: {tmp_path / 'nowhere' / 'tinypkg'}" in text, text


def test_a_tests_folder_outside_the_project_and_the_release_is_refused(tmp_path, capsys):
    project = _project(tmp_path / "elsewhere" / "tinypkg")
    (project / "tests").rename(project / "tests-real")
    (project / "tests").symlink_to("/etc")
    root = _release(tmp_path / "release", "    path: ../elsewhere/tinypkg")
    assert main(["--root", str(root), "validate"]) == 2
    text = "\n".join(_lines(capsys))
    assert "components.tinypkg.tests: the tests folder lies outside the release and outside the project" in text


def test_a_pinned_sdist_is_fetched_once_and_is_the_project_folder(tmp_path, capsys, cache):
    archive = tmp_path / "dl" / "tinypkg-1.0.tar.gz"
    archive.parent.mkdir()
    sha = _sdist(archive, _project(tmp_path / "src" / "tinypkg"))
    root = _release(tmp_path / "release", f"    sdist:\n      url: {archive.as_uri()}\n      sha256: {sha}")
    assert main(["--root", str(root), "validate"]) == 0
    fetched = [line for line in _lines(capsys) if "fetching" in line]
    assert len(fetched) == 1 and archive.as_uri() in fetched[0], fetched
    spec = load_spec(root)
    assert spec.component_dir("tinypkg") == cache / "sdists" / sha
    assert (cache / "sdists" / sha / "pyproject.toml").is_file()
    assert spec.pending_tests == ()  # the test id is the sdist's own tests/test_tiny.py
    assert main(["--root", str(root), "validate"]) == 0
    assert not [line for line in _lines(capsys) if "fetching" in line]  # once: the cache holds it
    assert sorted(p.name for p in (cache / "sdists").iterdir()) == [sha]


def test_an_sdist_given_as_a_path_relative_to_the_release(tmp_path, capsys, cache):
    root = tmp_path / "release"
    (root / "vendor").mkdir(parents=True)
    sha = _sdist(root / "vendor" / "tinypkg-1.0.tar.gz", _project(tmp_path / "src" / "tinypkg"))
    _release(root, f"    sdist: {{url: vendor/tinypkg-1.0.tar.gz, sha256: {sha.upper()}}}")
    assert main(["--root", str(root), "validate"]) == 0, _lines(capsys)
    assert load_spec(root).component_dir("tinypkg") == cache / "sdists" / sha


def test_a_wrong_sha256_is_one_line_and_leaves_nothing_in_the_cache(tmp_path, capsys, cache):
    archive = tmp_path / "tinypkg-1.0.tar.gz"
    sha = _sdist(archive, _project(tmp_path / "src" / "tinypkg"))
    wrong = "ab" * 32
    root = _release(tmp_path / "release", f"    sdist:\n      url: {archive.as_uri()}\n      sha256: {wrong}")
    assert main(["--root", str(root), "validate"]) == 2
    problems = [line for line in _lines(capsys) if "components.tinypkg.sdist" in line]
    assert len(problems) == 1, problems
    assert archive.as_uri() in problems[0] and sha in problems[0] and wrong in problems[0], problems
    assert not (cache / "sdists" / wrong).exists() and not (cache / "sdists" / sha).exists()
    assert list((cache / "sdists").iterdir()) == []  # no partial download left either


def test_an_sdist_with_a_member_escaping_its_folder_is_refused(tmp_path, capsys, cache):
    archive = tmp_path / "evil-1.0.tar.gz"
    sha = _sdist(archive, _project(tmp_path / "src" / "tinypkg"), extra={"../escaped.txt": b"out"})
    root = _release(tmp_path / "release", f"    sdist:\n      url: {archive.as_uri()}\n      sha256: {sha}")
    assert main(["--root", str(root), "validate"]) == 2
    problems = [line for line in _lines(capsys) if "components.tinypkg.sdist" in line]
    assert len(problems) == 1 and "refused" in problems[0], problems
    assert not (cache / "sdists" / sha).exists() and list((cache / "sdists").iterdir()) == []
    assert not list(tmp_path.rglob("escaped.txt"))


@pytest.mark.parametrize("link", [("tinypkg-1.0/up", "../../outside"), ("tinypkg-1.0/abs", "/etc/passwd")])
def test_an_sdist_is_unpacked_safely_by_a_python_without_tarfiles_filters(tmp_path, capsys, cache, monkeypatch, link):
    """Debian 12's python3 (3.11.2, what a CI job's container runs shipyard on) predates tarfile's
    extraction filters (3.11.4): shipyard checks the members itself (a job failed with
    "module 'tarfile' has no attribute 'FilterError'" before)."""
    for name in ("data_filter", "FilterError"):
        monkeypatch.delattr(tarfile, name)
    good = tmp_path / "tinypkg-1.0.tar.gz"
    sha = _sdist(good, _project(tmp_path / "src" / "tinypkg"))
    root = _release(tmp_path / "release", f"    sdist:\n      url: {good.as_uri()}\n      sha256: {sha}")
    assert main(["--root", str(root), "validate"]) == 0, _lines(capsys)
    assert (cache / "sdists" / sha / "pyproject.toml").is_file()
    evil = tmp_path / "evil-1.0.tar.gz"
    with tarfile.open(evil, "w:gz") as tar:
        tar.add(tmp_path / "src" / "tinypkg", arcname="tinypkg-1.0")
        info = tarfile.TarInfo(link[0])
        info.type, info.linkname = tarfile.SYMTYPE, link[1]
        tar.addfile(info)
    bad = hashlib.sha256(evil.read_bytes()).hexdigest()
    root = _release(tmp_path / "release2", f"    sdist:\n      url: {evil.as_uri()}\n      sha256: {bad}")
    assert main(["--root", str(root), "validate"]) == 2
    problems = [line for line in _lines(capsys) if "components.tinypkg.sdist" in line]
    assert len(problems) == 1 and f"refused: its member {link[0]!r}" in problems[0], problems
    assert not (cache / "sdists" / bad).exists()


def test_path_and_sdist_together_are_refused(tmp_path, capsys, cache):
    root = _release(tmp_path / "release", f"    path: ../x\n    sdist: {{url: x.tar.gz, sha256: {'a' * 64}}}")
    assert main(["--root", str(root), "validate"]) == 2
    assert "needs exactly one of path (its folder), sdist" in "\n".join(_lines(capsys))


def test_ci_generate_refuses_a_project_outside_the_repository(tmp_path, capsys):
    _project(tmp_path / "elsewhere" / "tinypkg")
    root = _release(tmp_path / "release", "    path: ../elsewhere/tinypkg")  # not in git: the folder is the repository
    assert main(["--root", str(root), "ci", "generate"]) == 2
    lines = _lines(capsys)
    assert len(lines) == 1, lines
    assert "release.yaml:" in lines[0] and "components.tinypkg.path:" in lines[0], lines
    assert str(tmp_path / "elsewhere" / "tinypkg") in lines[0] and "sdist" in lines[0], lines
    assert not (root / ".github").exists()


@pytest.mark.slow
def test_shipyard_build_builds_and_tests_a_component_from_its_pinned_sdist(tmp_path, capsys, cache):
    # About 15 s: one pure wheel (setuptools from the index) and its one test, gated by its feature.
    archive = tmp_path / "tinypkg-1.0.tar.gz"
    sha = _sdist(archive, _project(tmp_path / "src" / "tinypkg"))
    root = _release(tmp_path / "release", f"    sdist:\n      url: {archive.as_uri()}\n      sha256: {sha}")
    assert main(["--root", str(root), "build", "--variant", "cpu"]) == 0, _lines(capsys)
    artifact, = json.loads((root / "dist" / "manifest.json").read_text())["artifacts"]
    assert artifact["name"] == "tinypkg-1.0-py3-none-any.whl" and artifact["build"]["result"] == "passed"
    assert artifact["tests"]["features"]["tinypkg.add"]["summary"] == "passed (1 of 1)", artifact["tests"]


# --- git: {url, commit} -----------------------------------------------------------------------

def _git(*args: object, cwd: Path) -> str:
    config = ["-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "init.defaultBranch=main"]
    return subprocess.run(["git", *config, *map(str, args)], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def _repository(folder: Path, *, subdirectory: str = "") -> tuple[Path, str]:
    """A git repository holding the project (in `subdirectory`, for a monorepo); its url and commit."""
    folder.mkdir(parents=True)
    _project(folder / subdirectory if subdirectory else folder)
    _git("init", "-q", cwd=folder)
    _git("add", "-A", cwd=folder)
    _git("commit", "-q", "-m", "tinypkg 1.0", cwd=folder)
    return folder, _git("rev-parse", "HEAD", cwd=folder)


def test_a_git_commit_is_fetched_once_and_its_tree_is_the_project_folder(tmp_path, capsys, cache):
    repository, commit = _repository(tmp_path / "upstream")
    (repository / "later.txt").write_text("after the pinned commit\n")
    _git("add", "-A", cwd=repository)
    _git("commit", "-q", "-m", "later", cwd=repository)
    root = _release(tmp_path / "release", f"    git:\n      url: {repository.as_uri()}\n      commit: {commit}")
    assert main(["--root", str(root), "validate"]) == 0, _lines(capsys)
    fetched = [line for line in _lines(capsys) if "fetching" in line]
    assert len(fetched) == 1 and repository.as_uri() in fetched[0] and commit[:12] in fetched[0], fetched
    folder = load_spec(root).component_dir("tinypkg")
    assert folder.parent == cache / "git" and folder.name.endswith(commit)
    # The pinned commit's tree, as plain files: not the later commit's, and no repository inside it.
    assert (folder / "pyproject.toml").is_file() and not (folder / "later.txt").exists()
    assert not (folder / ".git").exists()
    assert load_spec(root).pending_tests == ()
    assert main(["--root", str(root), "validate"]) == 0
    assert not [line for line in _lines(capsys) if "fetching" in line]  # once: the cache holds it
    assert [p.name for p in (cache / "git").iterdir()] == [folder.name]  # no staging left beside it


def test_a_git_subdirectory_is_the_project_folder_of_a_monorepo(tmp_path, capsys, cache):
    repository, commit = _repository(tmp_path / "mono", subdirectory="python/tinypkg")
    root = _release(tmp_path / "release", f"    git: {{url: {repository.as_uri()}, commit: {commit.upper()}, "
                                          f"subdirectory: python/tinypkg}}")
    assert main(["--root", str(root), "validate"]) == 0, _lines(capsys)
    assert (load_spec(root).component_dir("tinypkg") / "pyproject.toml").is_file()
    root = _release(tmp_path / "release2", f"    git: {{url: {repository.as_uri()}, commit: {commit}, "
                                           f"subdirectory: python/other}}")
    assert main(["--root", str(root), "validate"]) == 2
    problems = [line for line in _lines(capsys) if "components.tinypkg.git" in line]
    assert len(problems) == 1 and "has no folder python/other" in problems[0], problems


def test_a_commit_the_repository_does_not_hold_is_one_line_and_leaves_nothing(tmp_path, capsys, cache):
    repository, _ = _repository(tmp_path / "upstream")
    missing = "0123456789" * 4
    root = _release(tmp_path / "release", f"    git:\n      url: {repository.as_uri()}\n      commit: {missing}")
    assert main(["--root", str(root), "validate"]) == 2
    problems = [line for line in _lines(capsys) if "components.tinypkg.git" in line]
    assert len(problems) == 1, problems
    assert repository.as_uri() in problems[0] and f"has no commit {missing}" in problems[0], problems
    assert "pin the full id of a commit the repository holds" in problems[0], problems
    assert list((cache / "git").iterdir()) == []  # no half folder, no staging
    # A url that is no repository at all is one line too, with git's reason.
    root = _release(tmp_path / "release", f"    git: {{url: ../nowhere, commit: {missing}}}")
    assert main(["--root", str(root), "validate"]) == 2
    problems = [line for line in _lines(capsys) if "components.tinypkg.git" in line]
    assert len(problems) == 1 and "../nowhere: git cannot fetch from it (" in problems[0], problems
    assert "does not appear to be a git repository" in problems[0], problems
    assert list((cache / "git").iterdir()) == []


def test_a_git_source_needs_a_whole_commit_and_one_source_only(tmp_path, capsys, cache):
    root = _release(tmp_path / "release", "    git: {url: ../upstream, commit: main}")
    assert main(["--root", str(root), "validate"]) == 2
    assert "components.tinypkg.git.commit" in "\n".join(_lines(capsys))
    root = _release(tmp_path / "release", f"    path: ../x\n    git: {{url: ../up, commit: {'a' * 40}}}")
    assert main(["--root", str(root), "validate"]) == 2
    assert "needs exactly one of path (its folder), sdist" in "\n".join(_lines(capsys))


def test_ci_generate_accepts_a_component_from_a_git_commit(tmp_path, capsys, cache):
    repository, commit = _repository(tmp_path / "upstream")
    root = _release(tmp_path / "release", f"    git: {{url: {repository.as_uri()}, commit: {commit}}}")
    with (root / "release.yaml").open("a") as release:
        release.write("channels: {nightly: {gate: mark}, test: {gate: block}, release: {gate: block}}\n")
    assert main(["--root", str(root), "ci", "generate"]) == 0, _lines(capsys)
    assert (root / ".github" / "workflows").is_dir()
