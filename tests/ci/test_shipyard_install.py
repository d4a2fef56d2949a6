"""How a generated job gets shipyard: the exact version that generated the workflow, from PyPI or
the index or wheel a repository variable names, never the repository's own checkout (a user's
repository holds no shipyard source)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

import shipyard
from shipyard.ci.linux_job_image import dockerfile
from shipyard.ci.steps import SHIPYARD_SOURCE, shipyard_source_env, uv_requirement
from shipyard.cli import main
from shipyard.release.validate import load_spec

REPO = Path(__file__).resolve().parents[2]
THIRDPARTY = REPO / "tests" / "fixtures" / "thirdparty"
CHANNELS = "channels:\n  nightly:\n    gate: mark\n  release:\n    gate: block\n"


@pytest.fixture
def user_repo(tmp_path):
    """Four real-world-shaped projects and their release, in a folder holding no shipyard source."""
    root = tmp_path / "repo"
    shutil.copytree(THIRDPARTY, root)
    (root / "release.yaml").write_text((root / "release.yaml").read_text() + CHANNELS)
    return root


def test_workflows_generated_in_a_repository_without_shipyard_install_this_version_of_it(user_repo, capsys):
    assert not list(user_repo.rglob("bootstrap.sh")) and not list(user_repo.rglob("shipyard"))
    assert main(["--root", str(user_repo), "ci", "generate"]) == 0, capsys.readouterr().err
    installs = 0
    for name in ("nightly.yml", "release.yml"):
        workflow = yaml.safe_load((user_repo / ".github" / "workflows" / name).read_text())
        for job_id, job in workflow["jobs"].items():
            for step in job["steps"]:
                script = step.get("run", "")
                # no step installs the checkout (`uv pip install … .`), as if it were shipyard
                assert not re.search(r"pip install[^\n]* \.( |$)", script, re.M), (job_id, step["name"])
                if "${shipyard_from[@]}" in script:
                    installs += 1
                    assert step["env"]["SHIPYARD_REQUIREMENT"] == f"shipyard=={shipyard.__version__}", job_id
                    assert step["env"]["SHIPYARD_INDEX_URL"] == "${{ vars.SHIPYARD_INDEX_URL }}", job_id
                    assert SHIPYARD_SOURCE in script, job_id
            # every job that runs shipyard installs it first, or starts in the Linux job image
            runs_shipyard = any(re.search(r"^\s*shipyard ", s.get("run", ""), re.M) for s in job["steps"])
            in_image = job.get("container", {}).get("image") == "${{ needs.plan.outputs.linux_job_image }}"
            assert not runs_shipyard or in_image or any("${shipyard_from[@]}" in s.get("run", "")
                                                        for s in job["steps"]), job_id
    assert installs >= 4  # plan and publish (on the runner, beside docker) in each workflow
    # the image installs the same pinned version from the same places (the plan job passes the
    # repository variables as build arguments)
    image = dockerfile(load_spec(user_repo))
    assert f"SHIPYARD_REQUIREMENT='shipyard=={shipyard.__version__}'" in image
    assert "ARG SHIPYARD_INDEX_URL=\nARG SHIPYARD_WHEEL_URL=\n" in image and '"${shipyard_from[@]}"' in image
    assert not re.search(r"pip install[^\n]* \.( |$)", image, re.M)
    assert main(["--root", str(user_repo), "ci", "check"]) == 0


def _install_argv(tmp_path: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    """What the install snippet hands uv, given the repository variables (unset ones empty, as
    GitHub expands an unset `vars.X`)."""
    env = {**shipyard_source_env(), "SHIPYARD_INDEX_URL": "", "SHIPYARD_WHEEL_URL": "", **variables,
           "PATH": "/usr/bin:/bin"}
    script = SHIPYARD_SOURCE + 'printf "%s\\n" "${shipyard_index[@]}" "${shipyard_from[@]}"\n'
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=env, capture_output=True, text=True,
                          timeout=30, cwd=tmp_path)


def test_the_install_takes_pypi_by_default_or_the_index_or_wheel_a_variable_names(tmp_path):
    pinned = f"shipyard=={shipyard.__version__}"
    assert _install_argv(tmp_path).stdout.splitlines() == [pinned]
    index = _install_argv(tmp_path, SHIPYARD_INDEX_URL="https://pypi.example.org/simple/")
    assert index.stdout.splitlines() == ["--index", "https://pypi.example.org/simple/", pinned]
    url = f"https://files.example.org/shipyard-{shipyard.__version__}-py3-none-any.whl"
    # the pin stays: uv refuses a wheel of another version (test_a_wheel_url_of_another_version_fails)
    assert _install_argv(tmp_path, SHIPYARD_WHEEL_URL=url).stdout.splitlines() == [pinned, f"shipyard @ {url}"]


def test_the_uv_the_jobs_get_is_the_range_shipyard_depends_on():
    pyproject = (REPO / "pyproject.toml").read_text()
    declared = re.search(r'"(uv[<>=!~][^"]*)"', pyproject)
    assert declared
    assert Requirement(uv_requirement()).specifier == Requirement(declared.group(1)).specifier
