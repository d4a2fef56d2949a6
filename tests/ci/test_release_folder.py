"""A release folder below the top of its repository, with a project beside it (`../tinyext`):
the workflows go to the repository's top (the only place GitHub reads them), their steps run in
the release folder, and the paths the artifact and cache actions take are named below it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from shipyard.cli import main

REPO = Path(__file__).resolve().parents[2]
THIRDPARTY = REPO / "tests" / "fixtures" / "thirdparty"
CHANNELS = "channels:\n  nightly:\n    gate: mark\n  release:\n    gate: block\n"


@pytest.fixture
def monorepo(tmp_path: Path) -> Path:
    """A git repository whose release folder is `release/` and one of whose projects lies beside
    it, outside the release folder (`path: ../projects/mesonext`)."""
    top = tmp_path / "monorepo"
    release = top / "release"
    shutil.copytree(THIRDPARTY, release)
    text = (release / "release.yaml").read_text() + CHANNELS
    (top / "projects").mkdir()
    shutil.move(release / "library" / "mesonext", top / "projects" / "mesonext")
    (release / "release.yaml").write_text(text.replace("path: library/mesonext\n", "path: ../projects/mesonext\n"))
    # A project outside the release folder names its tests as its own runs do (from its folder).
    features = release / "feature_status.yaml"
    features.write_text(features.read_text().replace("library/mesonext/tests/", "tests/"))
    subprocess.run(["git", "init", "-q", str(top)], check=True)
    return release


def test_workflows_of_a_release_below_the_top_run_their_steps_there(monorepo, capsys):
    top = monorepo.parent
    assert main(["--root", str(monorepo), "validate"]) == 0, capsys.readouterr()
    assert main(["--root", str(monorepo), "ci", "generate"]) == 0, capsys.readouterr().err
    assert f"wrote {top}/.github/workflows/release.yml" in capsys.readouterr().out
    assert not (monorepo / ".github").exists()
    paths = []
    at_top = set()
    for name in ("nightly.yml", "release.yml"):
        workflow = yaml.safe_load((top / ".github" / "workflows" / name).read_text())
        assert workflow["defaults"]["run"] == {"shell": "bash", "working-directory": "release"}
        for job_id, job in workflow["jobs"].items():
            names = [step["name"] for step in job["steps"]]
            checkout = next(i for i, step in enumerate(job["steps"]) if step.get("uses", "").startswith(
                "actions/checkout@"))
            for n, step in enumerate(job["steps"]):
                # before the checkout, release/ does not exist yet: those steps run at the top
                if "run" in step:
                    assert step.get("working-directory") == ("." if n < checkout else None), (job_id, names[n])
                    if n < checkout:
                        at_top.add(names[n])
                if step.get("uses", "").startswith(("actions/upload-artifact@", "actions/download-artifact@",
                                                    "actions/cache@")):
                    paths += [line for line in step["with"]["path"].splitlines() if line]
    assert paths and all(p.startswith("release/") for p in paths), paths
    assert at_top == set()  # every job checks out first: the Linux job image has git
    assert {"release/dist/", "release/fragments", "release/dist/RELEASE_NOTES.md"} <= set(paths)
    assert main(["--root", str(monorepo), "ci", "check"]) == 0
    # The committed workflow differs from what release.yaml generates: check says so, at the top.
    nightly = top / ".github" / "workflows" / "nightly.yml"
    nightly.write_text(nightly.read_text().replace("working-directory: release", "working-directory: ."))
    assert main(["--root", str(monorepo), "ci", "check"]) != 0
    assert ".github/workflows/nightly.yml: not what release.yaml generates" in " ".join(
        capsys.readouterr().err.split())


def test_a_release_at_the_top_keeps_its_workflows_as_they_were(tmp_path, capsys):
    root = tmp_path / "repo"
    shutil.copytree(THIRDPARTY, root)
    (root / "release.yaml").write_text((root / "release.yaml").read_text() + CHANNELS)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    assert main(["--root", str(root), "ci", "generate"]) == 0
    workflow = yaml.safe_load((root / ".github" / "workflows" / "nightly.yml").read_text())
    assert workflow["defaults"]["run"] == {"shell": "bash"}
