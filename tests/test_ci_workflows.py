"""The GitHub Actions workflows generated from release.yaml: committed, linted, covering the matrix.

These read the files exactly as committed (what GitHub would run) and the plan job's output
from `shipyard ci plan`, the command the plan job runs.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from shipyard.ci.actions import PINNED
from shipyard.ci.jobs import Lane, MatrixTooLarge, build_jobs, check_lane_size, lanes
from shipyard.ci.workflow import generate
from shipyard.cli import main
from shipyard.release import matrix as matrix_module
from shipyard.release.matrix import _all_cells, exclusion_cells, expand, select
from shipyard.release.validate import load_spec

WORKFLOWS = (".github/workflows/release.yml", ".github/workflows/nightly.yml")
# The binary the test extra installs next to this interpreter (nox puts it on PATH too).
ACTIONLINT = shutil.which("actionlint") or str(Path(sys.executable).parent / "actionlint")


def _load(path: Path) -> dict:
    return yaml.load(path.read_text(), Loader=yaml.BaseLoader)  # every scalar a string: `on` stays `on`


def _plan(root: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, dict]:
    assert main(["--root", str(root), "ci", "plan", "--channel", "test", "--ref", "refs/tags/v1.7.0-rc1"]) == 0
    out = capsys.readouterr().out
    return {name: json.loads(value) for name, value in (line.split("=", 1) for line in out.splitlines())}


def test_committed_workflows_match_release_yaml(repo, capsys):
    assert main(["--root", str(repo), "ci", "check"]) == 0
    assert "matches release.yaml" in capsys.readouterr().out


@pytest.fixture
def ci_copy(spec_copy, repo):
    """A spec copy with what the generator reads besides the spec: ci/bootstrap.sh (its uv range)."""
    (spec_copy.root / "ci").mkdir()
    shutil.copy(repo / "ci" / "bootstrap.sh", spec_copy.root / "ci" / "bootstrap.sh")
    return spec_copy


def test_check_fails_on_drift_and_generate_repairs_it(ci_copy, capsys):
    spec_copy = ci_copy
    assert main(["--root", str(spec_copy.root), "ci", "generate"]) == 0
    capsys.readouterr()
    # A Python more or less changes only the plan's output at run time; a platform dropped
    # changes which jobs exist.
    spec_copy.edit("release.yaml", '  - variant: "cuda*"\n    platform: macos-arm64\n    reason: no CUDA on macOS\n',
                   '  - platform: macos-arm64\n    reason: no macOS runners this release\n')
    # ... and so are the statuses promised there (validate refuses a status where nothing is built).
    features = spec_copy.root / "feature_status.yaml"
    features.write_text(features.read_text().replace(", macos-arm64: beta}", "}"))
    assert main(["--root", str(spec_copy.root), "ci", "check"]) == 1
    err = capsys.readouterr().err
    assert ".github/workflows/release.yml, .github/workflows/nightly.yml: not what release.yaml generates" in err
    assert "run `shipyard ci generate` and commit the result" in err
    assert "-  wheel-macos:\n" in err and "+  wheel-macos:" not in err
    assert main(["--root", str(spec_copy.root), "ci", "generate"]) == 0
    assert main(["--root", str(spec_copy.root), "ci", "check"]) == 0


def test_actionlint_passes_on_the_committed_workflows(repo):
    # actionlint checks every run: script with shellcheck when it finds one (ci/bootstrap.sh installs it)
    assert shutil.which("shellcheck"), "shellcheck is missing: run ci/bootstrap.sh"
    files = [str(repo / name) for name in WORKFLOWS]
    done = subprocess.run([ACTIONLINT, "-no-color", *files], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    version = subprocess.run([ACTIONLINT, "-version"], capture_output=True, text=True, timeout=30).stdout
    assert re.match(r"\S*actionlint\S* 1\.\d+", version), version


def test_actionlint_catches_a_broken_workflow(repo, tmp_path):
    """The lint is real: the same file with one job's `needs` pointing nowhere fails it."""
    text = (repo / WORKFLOWS[0]).read_text().replace("    - plan\n", "    - plann\n", 1)
    text = text.replace('shipyard ci pythons "${pythons[@]}"', "shipyard ci pythons ${pythons[@]}", 1)
    broken = tmp_path / "release.yml"
    broken.write_text(text)
    done = subprocess.run([ACTIONLINT, "-no-color", str(broken)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "plann" in done.stdout, done.stdout
    assert "SC2068" in done.stdout, done.stdout  # the unquoted array, found by shellcheck


def _build_command_kind(job: dict) -> str:
    runs = "\n".join(step.get("run", "") for step in job["steps"])
    if "shipyard conda build" in runs:
        return "conda"
    if "shipyard build-mobile" in runs:
        return "mobile"
    if "shipyard image build" in runs:
        return "docker"
    assert "shipyard build --variant" in runs, runs
    return "wheel"


@pytest.mark.parametrize("name", WORKFLOWS)
def test_every_cell_is_built_by_exactly_one_job_and_no_excluded_cell_is(repo, capsys, name):
    """What each job's command builds (its component, variant, builder platform and package type,
    selected as `shipyard build` selects them) covers `shipyard matrix` exactly once."""
    release = load_spec(repo).release
    workflow = _load(repo / name)
    plan = _plan(repo, capsys)
    built: Counter[str] = Counter()
    lanes_read = set()
    for job_id, job in workflow["jobs"].items():
        found = re.fullmatch(r"\$\{\{ fromJSON\(needs\.plan\.outputs\.(\w+)\) \}\}",
                             job.get("strategy", {}).get("matrix", ""))
        if not found:
            continue
        lanes_read.add(found.group(1))
        assert workflow["jobs"]["plan"]["outputs"][found.group(1)] == f"${{{{ steps.plan.outputs.{found.group(1)} }}}}"
        kind = _build_command_kind(job)
        for entry in plan[found.group(1)]["include"]:
            assert entry["id"].startswith(f"{kind}-"), (job_id, entry["id"])
            if kind == "docker":
                continue
            cells = select(expand(release), package_type=kind, component=entry["component"],
                           **({} if kind == "mobile" else {"variant": entry["variant"], "platform": entry["builder"]}))
            if entry["platform"] != "any":  # a native job's build skips the pure cells; a pure job's is one
                cells = [c for c in cells if not c.is_pure]
            assert len(cells) == int(entry["cells"]), entry
            assert entry["runner"] == release.platforms[entry["builder"]].github_runner
            built.update(c.id for c in cells)
    assert lanes_read == set(plan), "every lane of the plan is read by one job, and no other output"
    every = {c.id for c in expand(release)}
    assert set(built) == every
    assert [c for c, n in built.items() if n > 1] == []
    excluded = set().union(*exclusion_cells(release)) - every
    assert excluded and not excluded & set(built)
    assert len(every) < len({c.id for c in _all_cells(release)})


@pytest.mark.parametrize("name", WORKFLOWS)
def test_hygiene(repo, name):
    workflow = _load(repo / name)
    text = (repo / name).read_text()
    assert workflow["permissions"] == {}
    assert workflow["concurrency"]["group"] and workflow["concurrency"]["cancel-in-progress"] == "false"
    for job_id, job in workflow["jobs"].items():
        assert int(job["timeout-minutes"]) > 0, job_id
        assert job["permissions"]["contents"] == "read", job_id
        assert set(job["permissions"]) <= {"contents", "id-token"}, job_id
        if "strategy" in job:
            assert job["strategy"]["fail-fast"] == "false", job_id
        for step in job["steps"]:
            if "uses" in step:
                action, ref = step["uses"].split("@")
                assert re.fullmatch(r"[0-9a-f]{40}", ref), step["uses"]
                assert PINNED[action][0] == ref
            for value in (step.get("run", ""),):
                assert "${{" not in value, f"{job_id}: expressions go through env:, never into scripts"
    for action, (sha, tag) in PINNED.items():
        if f"{action}@{sha}" in text:
            assert f"{action}@{sha}  # {tag}" in text
    publish = workflow["jobs"]["publish"]
    assert publish["environment"] in ("release", "nightly")
    assert set(publish["needs"]) == set(workflow["jobs"]) - {"publish", "plan"}
    run = "\n".join(s.get("run", "") for s in workflow["jobs"]["manifest"]["steps"])
    assert "shipyard manifest merge" in run and "shipyard manifest gate" in run


def test_no_secret_value_in_the_workflows_only_secret_references(ci_copy, monkeypatch):
    spec_copy = ci_copy
    values = {"SHIPYARD_PYPI_USERNAME": "release-bot-7f3a", "SHIPYARD_PYPI_PASSWORD": "pw-9c1e55aa0b",
              "SHIPYARD_CONDA_TOKEN": "tok-31d0f8e2", "SHIPYARD_REGISTRY_USERNAME": "reg-user-5b",
              "SHIPYARD_REGISTRY_PASSWORD": "reg-pw-c2e7d1",
              "SHIPYARD_SIGNING_KEY": "-----BEGIN PRIVATE KEY-----\nMC4CAQAw-not-a-key\n-----END PRIVATE KEY-----"}
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    spec = load_spec(spec_copy.root)
    texts = generate(spec)
    names = {env for target in spec.release.publish.values() for env in target.credential_envs()}
    signing = spec.release.supply_chain.signing_key_env  # type: ignore[union-attr]
    assert names | {signing} == set(values)
    for path, text in texts.items():
        for value in values.values():
            assert value not in text, path
        publish = yaml.load(text, Loader=yaml.BaseLoader)["jobs"]["publish"]
        step = next(s for s in publish["steps"] if "shipyard publish" in s.get("run", ""))
        assert step["env"] == {name: f"${{{{ secrets.{name} }}}}" for name in names}
        assert re.findall(r"secrets\.(\w+)", text) and set(re.findall(r"secrets\.(\w+)", text)) == names | {signing}
        # The signing key reaches every step that builds, and no other.
        builds = re.compile(r"shipyard (conda |image )?build")
        for job_id, job in yaml.load(text, Loader=yaml.BaseLoader)["jobs"].items():
            for step in job.get("steps", []):
                builder = bool(builds.search(step.get("run", "")))
                assert (signing in step.get("env", {})) == builder, (job_id, step.get("name"))
                if builder:
                    assert step["env"][signing] == f"${{{{ secrets.{signing} }}}}"
        assert "id-token" not in publish["permissions"]  # none of these targets takes trusted publishing


def test_trusted_publishing_where_the_target_supports_it(ci_copy):
    spec_copy = ci_copy
    spec_copy.edit("release.yaml", "    kind: devpi\n    url: http://127.0.0.1:8081/\n"
                   "    username_env: SHIPYARD_PYPI_USERNAME\n    password_env: SHIPYARD_PYPI_PASSWORD\n",
                   "    kind: pypi\n    url: https://upload.pypi.org/legacy/\n    trusted_publishing: true\n")
    text = generate(load_spec(spec_copy.root))[Path(".github/workflows/release.yml")]
    publish = yaml.load(text, Loader=yaml.BaseLoader)["jobs"]["publish"]
    assert publish["permissions"] == {"contents": "read", "id-token": "write"}
    assert "SHIPYARD_PYPI_PASSWORD" not in text  # the OIDC target needs no secret
    assert "secrets.SHIPYARD_CONDA_TOKEN" in text  # the others still do
    # No step of its own and nothing through $GITHUB_ENV: the publish step mints the token and keeps it.
    assert "shipyard ci trusted-publishing" not in text
    assert not [s for s in publish["steps"] if "GITHUB_ENV" in s.get("run", "")]
    assert [s["run"] for s in publish["steps"] if "shipyard publish" in s.get("run", "")] == [
        'shipyard publish --channel "$SHIPYARD_CHANNEL"\n']


def test_lanes_split_at_the_matrix_limit_and_the_guard_names_the_fix(repo, monkeypatch, tmp_path):
    spec = load_spec(repo)
    whole = lanes(spec.release)
    monkeypatch.setattr(matrix_module, "GITHUB_MATRIX_LIMIT", 3)
    split = lanes(spec.release)
    assert max(len(lane.jobs) for lane in split) == 3
    assert [j.id for lane in split for j in lane.jobs] == [j.id for lane in whole for j in lane.jobs]
    assert {"wheel-linux-1", "wheel-linux-2", "wheel-linux-3"} <= {lane.job_id for lane in split}
    text = generate(spec)[Path(".github/workflows/release.yml")]
    out = tmp_path / "release.yml"
    out.write_text(text)
    done = subprocess.run([ACTIONLINT, "-no-color", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout
    workflow = yaml.load(text, Loader=yaml.BaseLoader)
    assert {"wheel-linux-1", "wheel-linux-2", "wheel-linux-3"} <= set(workflow["jobs"]["wheel-pure"]["needs"])
    too_big = Lane("wheel-linux", tuple(build_jobs(spec.release))[:4])
    with pytest.raises(MatrixTooLarge, match=r"job wheel-linux: its matrix has 4 jobs but GitHub Actions runs at "
                                             r"most 3 from one matrix; run `shipyard ci generate`"):
        check_lane_size(too_big)


def test_plan_refuses_a_tag_that_is_not_the_release_version(repo, capsys):
    assert main(["--root", str(repo), "ci", "plan", "--channel", "release", "--ref", "refs/tags/v1.6.0"]) == 2
    assert "tag v1.6.0: release.yaml's release.version is 1.7.0" in capsys.readouterr().err


def test_the_readme_fan_out_is_what_the_workflows_run(repo):
    """README's "How many jobs" figures are the generated ones (they change with release.yaml)."""
    release = load_spec(repo).release
    readme = (repo / "README.md").read_text()
    section = readme[readme.index("## Releasing on GitHub Actions"):readme.index("## A tour of `release.yaml`")]
    rows = dict(re.findall(r"^\| `([\w-]+)` \| (\d+) \|", section, flags=re.M))
    all_lanes = lanes(release)
    assert rows == {lane.job_id: str(len(lane.jobs)) for lane in all_lanes}
    build_jobs_count = sum(len(lane.jobs) for lane in all_lanes)
    workflow_jobs = len(_load(repo / WORKFLOWS[0])["jobs"])
    assert f"Each workflow has {workflow_jobs} jobs" in section
    assert f"to {build_jobs_count} build jobs" in " ".join(section.split())
    assert f"the {len(expand(release))} cells of `shipyard matrix`" in section
    assert f"a release runs {build_jobs_count + 3} jobs" in section
