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

import shipyard
from shipyard.ci.actions import PINNED
from shipyard.ci.jobs import Lane, build_jobs, check_lane_size, lanes
from shipyard.ci.linux_job_image import dockerfile
from shipyard.ci.workflow import generate
from shipyard.cli import main
from shipyard.errors import CRASHED, STABLE_FEATURE_FAILED, MatrixTooLarge, MergeError, UsageError, WorkflowDrift
from shipyard.host.apt_install import lane_packages
from shipyard.record.manifest import CellRecord, Manifest, NotApplicableRecord
from shipyard.release import matrix as matrix_module
from shipyard.release.matrix import _all_cells, exclusion_cells, expand, select
from shipyard.release.validate import load_spec
from shipyard.wheel.build_request import CELL_NOT_BUILT

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
def ci_copy(spec_copy):
    """A spec copy: the release files and components, no shipyard source (no ci/, no src/shipyard)."""
    assert not (spec_copy.root / "ci").exists() and not (spec_copy.root / "src" / "shipyard").exists()
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
    assert main(["--root", str(spec_copy.root), "ci", "check"]) == WorkflowDrift.exit_code
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
            cells = [c for component in entry["components"].split()
                     for c in select(expand(release), package_type=kind, component=component,
                                     **({} if kind == "mobile" else {"variant": entry["variant"],
                                                                     "platform": entry["builder"]}))]
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
        # The OIDC token belongs to the publish job alone; the registry's write to it and to the
        # plan job, which pushes the Linux job image the container lanes read.
        allowed = {"publish": {"contents", "id-token", "packages"}, "plan": {"contents", "packages"}}
        assert set(job["permissions"]) <= allowed.get(job_id, {"contents", "packages"}), job_id
        if job["permissions"].get("packages") == "write":
            assert job_id in ("publish", "plan"), job_id
        if "container" in job:  # the Linux job image, pulled with the job's token
            assert job["container"]["image"] == "${{ needs.plan.outputs.linux_job_image }}", job_id
            assert job["permissions"] == {"contents": "read", "packages": "read"}, job_id
            assert "credentials" not in job["container"], job_id  # a hosted runner gives GHCR the job's token
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
    # ember's release.yaml names the real places: PyPI and TestPyPI by trusted publishing and the
    # bucket by a role (the job's OIDC token), GitHub's registry with the job's own token.
    assert publish["permissions"] == {"contents": "read", "id-token": "write", "packages": "write"}
    step = next(s for s in publish["steps"] if "shipyard publish" in s.get("run", ""))
    assert step["env"] == {"GHCR_USERNAME": "${{ secrets.GHCR_USERNAME }}",
                           "GITHUB_TOKEN": "${{ secrets.GITHUB_TOKEN }}",
                           "SHIPYARD_S3_ROLE_ARN": "${{ vars.SHIPYARD_S3_ROLE_ARN }}"}
    assert "SHIPYARD_TARGETS" not in text  # the stand-ins' variable is set by a local run only
    assert publish["environment"] == "nightly" or publish["environment"].endswith("&& 'release' || '' }}")
    assert set(publish["needs"]) == set(workflow["jobs"]) - {"publish", "plan"}
    run = "\n".join(s.get("run", "") for s in workflow["jobs"]["manifest"]["steps"])
    assert "shipyard manifest merge" in run and "shipyard report" in run
    assert "shipyard manifest gate" in "\n".join(s.get("run", "") for s in publish["steps"])


def test_no_secret_value_in_the_workflows_only_secret_references(ci_copy, monkeypatch):
    spec_copy = ci_copy
    values = {"SHIPYARD_PYPI_USERNAME": "release-bot-7f3a", "SHIPYARD_PYPI_PASSWORD": "pw-9c1e55aa0b",
              "SHIPYARD_CONDA_TOKEN": "tok-31d0f8e2", "SHIPYARD_REGISTRY_USERNAME": "reg-user-5b",
              "SHIPYARD_REGISTRY_PASSWORD": "reg-pw-c2e7d1",
              "SHIPYARD_TESTPYPI_USERNAME": "test-bot-41", "SHIPYARD_TESTPYPI_PASSWORD": "pw-test-8d2f",
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
        # GITHUB_TOKEN: the Linux job image's push (plan job) and pulls (container lanes)
        assert re.findall(r"secrets\.(\w+)", text) and \
            set(re.findall(r"secrets\.(\w+)", text)) == names | {signing, "GITHUB_TOKEN"}
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
                   "    kind: pypi\n    url: https://upload.pypi.org/legacy/\n    trusted_publishing: true\n"
                   "    channels: [release]\n")
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


def test_a_github_container_registry_target_gets_packages_write_and_the_job_token(ci_copy):
    """#29: images to ghcr.io with the job's GITHUB_TOKEN, which needs `packages: write`."""
    ci_copy.edit("release.yaml", "    url: 127.0.0.1:5000\n    username_env: SHIPYARD_REGISTRY_USERNAME\n"
                 "    password_env: SHIPYARD_REGISTRY_PASSWORD\n",
                 "    url: https://ghcr.io/ember-ml\n    username_env: GHCR_USERNAME\n    password_env: GITHUB_TOKEN\n")
    text = generate(load_spec(ci_copy.root))[Path(".github/workflows/release.yml")]
    publish = yaml.load(text, Loader=yaml.BaseLoader)["jobs"]["publish"]
    assert publish["permissions"] == {"contents": "read", "packages": "write"}
    step = next(s for s in publish["steps"] if "shipyard publish" in s.get("run", ""))
    assert step["env"]["GITHUB_TOKEN"] == "${{ secrets.GITHUB_TOKEN }}"


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


def test_the_documented_fan_out_is_what_the_workflows_run(repo):
    """docs/pipeline.md's "How many jobs" figures are the generated ones (they change with release.yaml)."""
    release = load_spec(repo).release
    page = (repo / "docs" / "pipeline.md").read_text()
    section = page[page.index("**How many jobs.**"):page.index("## The jobs")]
    rows = dict(re.findall(r"^\| `([\w-]+)` \| (\d+) \|", section, flags=re.M))
    all_lanes = lanes(release)
    assert rows == {lane.job_id: str(len(lane.jobs)) for lane in all_lanes}
    build_jobs_count = sum(len(lane.jobs) for lane in all_lanes)
    workflow_jobs = len(_load(repo / WORKFLOWS[0])["jobs"])
    assert f"Each workflow has {workflow_jobs} jobs" in section
    assert f"to {build_jobs_count} build jobs" in " ".join(section.split())
    assert f"the {len(expand(release))} cells of `shipyard matrix`" in section
    assert f"a release runs {build_jobs_count + 3} jobs" in section


# --- issue 28: the pipeline can finish a release --------------------------------------------

def _steps(job: dict) -> list[str]:
    return [step.get("name", step.get("uses", "")) for step in job["steps"]]


def _run_of(job: dict, name: str) -> str:
    return next(step["run"] for step in job["steps"] if step.get("name") == name)


@pytest.mark.parametrize("name", WORKFLOWS)
def test_a_failing_stable_feature_uploads_its_fragment_then_fails_the_lane(repo, name):
    """Every build step records its exit status and succeeds for STABLE_FEATURE_FAILED: the
    fragment is uploaded, then the last step fails the job with that status. Any other status
    fails the build step itself, before the upload."""
    workflow = _load(repo / name)
    lanes_seen = 0
    for job_id, job in workflow["jobs"].items():
        if job_id in ("plan", "manifest", "publish", "docker"):
            continue
        lanes_seen += 1
        names = _steps(job)
        build = next(s for s in job["steps"] if s.get("id") == "build")
        at = job["steps"].index(build)
        upload, judge = job["steps"][at + 1], job["steps"][at + 2]
        assert upload["uses"].startswith("actions/upload-artifact@"), (job_id, names)
        assert "if" not in upload  # the build step succeeded for status 0 and STABLE_FEATURE_FAILED
        assert judge == {"name": "Fail the job when a stable feature failed (after the upload)",
                         "if": "steps.build.outputs.status != '0'",
                         "env": {"STATUS": "${{ steps.build.outputs.status }}"}, "run": judge["run"]}
        assert judge["run"].endswith('exit "$STATUS"\n') and job["steps"][-1] is judge, job_id
        script = build["run"]
        assert script.startswith("status=0\n") and "|| status=$?\n" in script, job_id
        assert 'echo "status=$status" >> "$GITHUB_OUTPUT"' in script
        lets_through = f'[ "$status" -ne {STABLE_FEATURE_FAILED} ]'
        assert script.endswith(f'if [ "$status" -ne 0 ] && {lets_through}; then exit "$status"; fi\n')
    assert lanes_seen == 11


def _build_line(script: str) -> str:
    return next(line for line in script.splitlines() if line.endswith(" || status=$?"))


def _run_build_step(script: str, command_status: int, tmp_path: Path) -> tuple[int, str]:
    """The generated build step under bash as GitHub runs it, with its command replaced by a
    command that exits `command_status` (what shipyard build returns), GITHUB_OUTPUT read back."""
    output = tmp_path / f"output-{command_status}"
    output.write_text("")
    command = _build_line(script).removesuffix(" || status=$?")
    body = script.replace(command, f"(exit {command_status})")
    step = tmp_path / "step.sh"
    step.write_text(body)
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(step)],
                          env={"GITHUB_OUTPUT": str(output), "PATH": "/usr/bin:/bin"}, capture_output=True,
                          text=True, timeout=30)
    return done.returncode, output.read_text()


def test_the_build_step_records_its_status_and_fails_only_for_an_unfinished_build(repo, tmp_path):
    job = _load(repo / WORKFLOWS[1])["jobs"]["wheel-linux"]
    script = next(s for s in job["steps"] if s.get("id") == "build")["run"]
    assert _build_line(script) == ('shipyard build --variant "$VARIANT" "${component_args[@]}" '
                                   '--publish-channel "$SHIPYARD_CHANNEL" --platform "$BUILDER" "${python_args[@]}" '
                                   '|| status=$?')
    assert _run_build_step(script, 0, tmp_path) == (0, "status=0\n")
    # A stable feature failed: the step passes, the upload runs, the judge step fails the job.
    passed = (0, f"status={STABLE_FEATURE_FAILED}\n")
    assert _run_build_step(script, STABLE_FEATURE_FAILED, tmp_path) == passed
    # No upload of a build that did not finish, nor of a crash.
    for status in (CELL_NOT_BUILT, CRASHED):
        assert _run_build_step(script, status, tmp_path) == (status, f"status={status}\n")


def _build_argv(script: str, pythons: str, tmp_path: Path, components: str = "ember",
                builder: str = "linux-x86_64") -> list[str]:
    """The arguments the generated build step gives `shipyard` for matrix.pythons `pythons`,
    matrix.components `components` and matrix.builder `builder`: the step under bash as GitHub runs it,
    `shipyard` a shell function writing its argv, one per line."""
    argv = tmp_path / "argv"
    step = tmp_path / "build-step.sh"
    step.write_text(f"shipyard() {{ printf '%s\\n' \"$@\" > {argv}; }}\n{script}")
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(step)],
                          env={"GITHUB_OUTPUT": str(tmp_path / "output"), "PATH": "/usr/bin:/bin", "PYTHONS": pythons,
                               "VARIANT": "cpu", "COMPONENTS": components, "SHIPYARD_CHANNEL": "nightly",
                               "BUILDER": builder},
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return argv.read_text().splitlines()


@pytest.mark.parametrize("name", WORKFLOWS)
def test_each_build_step_builds_only_the_pythons_of_its_job(repo, name, tmp_path):
    """A narrowed plan (a dispatched run's `python` input) gives a job fewer matrix.pythons; the
    build step passes each as `--python`, so it never builds a Python the job was not given. Each
    of matrix.components (a pure job's are several) is one `--component`. A Linux wheel job builds
    only its own platform (its builder's: a pure job's is linux-x86_64), never the runner's other Linux
    x86_64 platform (linux-x86_64-manylinux2014), which has a job of its own."""
    checked = []
    for job_id, job in _load(repo / name)["jobs"].items():
        build = next((s for s in job.get("steps", []) if s.get("id") == "build"), None)
        if build is None or job_id == "mobile":  # the mobile runtime has no Pythons
            continue
        assert build["env"]["PYTHONS"] == "${{ matrix.pythons }}", job_id
        if job_id.endswith("-cuda-image"):  # the command runs inside `docker run`: the same lines there
            assert ('  shipyard build --variant "$VARIANT" "${component_args[@]}" --publish-channel '
                    '"$SHIPYARD_CHANNEL" "${python_args[@]}"\n') in build["run"].replace("conda build", "build"), job_id
            continue
        command = _build_argv(build["run"], "3.11 3.12", tmp_path)
        # The Windows and macOS wheel lanes take cibuildwheel's wheels (test_cibuildwheel_config.py).
        taken = ["--wheelhouse", "wheelhouse"] if job_id in ("wheel-windows", "wheel-macos") else []
        if job_id in ("wheel-linux", "wheel-pure"):
            assert build["env"]["BUILDER"] == "${{ matrix.builder }}", job_id
            taken = ["--platform", "linux-x86_64"]
        # The workflow's channel (nightly's development versions), then one --python per Python.
        assert command[command.index("--variant"):] == [
            "--variant", "cpu", "--component", "ember", "--publish-channel", "nightly", *taken,
            "--python", "3.11", "--python", "3.12"], job_id
        assert _build_argv(build["run"], "", tmp_path, "emberaudio emberelastic")[-6 - len(taken):] == [
            "--component", "emberaudio", "--component", "emberelastic", "--publish-channel", "nightly", *taken], job_id
        if job_id == "wheel-linux":
            assert _build_argv(build["run"], "3.11", tmp_path, builder="linux-x86_64-manylinux2014")[-4:] == [
                "--platform", "linux-x86_64-manylinux2014", "--python", "3.11"]
        checked.append(job_id)
    assert len(checked) == 8, checked


def test_the_linux_job_image_installs_each_container_lanes_bootstrap_set(repo):
    """The Linux job image every container lane starts in gets the apt packages of those lanes'
    sets (`shipyard ci bootstrap <lane>`, from the package's data), a part of the full list a dev
    machine gets from ci/bootstrap.sh: no wine, qemu or cross compilers."""
    bootstrap = (repo / "ci" / "bootstrap.sh").read_text()
    everything = re.search(r"^APT_PACKAGES=\((.*?)^\)", bootstrap, re.M | re.S)
    assert everything
    full = {word for line in everything.group(1).splitlines() for word in line.split("#")[0].split()}
    sets = lane_packages()
    spec = load_spec(repo)
    text = dockerfile(spec)
    lanes_seen = re.findall(r"shipyard ci bootstrap (\S+)", text)
    for workflow in WORKFLOWS:
        containers = [job_id for job_id, job in _load(repo / workflow)["jobs"].items()
                      if "container" in job and job_id != "manifest"]  # manifest: shipyard alone
        assert sorted(containers) == sorted(lanes_seen), workflow
    for lane in lanes_seen:
        # python3-dev: the container builds against Debian's python3; a dev machine has pyenv's.
        # libsndfile1: the conda-pure lane's, for the soundfile the bootstrap channel repacks
        assert set(sets[lane]) <= full | {"python3-dev", "libsndfile1"}, lane
        assert "wine64" not in sets[lane] and "qemu-user" not in sets[lane], lane
    assert sorted(lanes_seen) == sorted(sets) == ["conda-linux", "conda-pure", "wheel-linux", "wheel-pure"]
    # the CUDA jobs' host compilers (11.8 takes gcc <= 11), and the glibc routes' toolchains
    assert "\nRUN apt-get install -y -qq --no-install-recommends g++-11 g++-12 >/dev/null\n" in text
    assert "\nRUN shipyard toolchain install bullseye && shipyard toolchain install zig-2.17\n" in text


def test_an_unknown_lane_is_refused_by_ci_bootstrap_the_script_and_the_generator(ci_copy, capsys, repo, monkeypatch):
    assert main(["ci", "bootstrap", "wheel-lnux"]) == 2
    assert capsys.readouterr().err.strip().endswith(
        "ci bootstrap: lane: no apt package set for it; did you mean wheel-linux? name one of conda-linux, conda-pure, "
        "wheel-linux, wheel-pure (shipyard/resources/ci_lane_packages.toml) (got wheel-lnux)")
    done = subprocess.run(["bash", str(repo / "ci" / "bootstrap.sh"), "wheel-linux"], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == ("ci/bootstrap.sh: argument: unknown; give --all, or none for the builds (a CI lane's "
                           "packages: shipyard ci bootstrap <lane>) (got wheel-linux)\n")
    import shipyard.ci.steps

    monkeypatch.setattr(shipyard.ci.steps, "lane_packages",
                        lambda: {k: v for k, v in lane_packages().items() if k != "wheel-pure"})
    assert main(["--root", str(ci_copy.root), "ci", "generate"]) == 2
    assert ("ci_lane_packages.toml: lanes: no apt package set for lane wheel-pure; add the line wheel-pure = "
            "[<its apt packages>] there") in capsys.readouterr().err
    assert not (ci_copy.root / ".github").exists()


@pytest.mark.parametrize("name", WORKFLOWS)
def test_after_failed_lanes_the_manifest_merges_and_the_publish_job_gates_per_channel(repo, name):
    workflow = _load(repo / name)
    jobs = workflow["jobs"]
    after = "${{ !cancelled() && needs.plan.result == 'success' }}"
    manifest, publish = jobs["manifest"], jobs["publish"]
    assert manifest["if"] == after
    assert set(manifest["needs"]) == set(jobs) - {"manifest", "publish"}
    assert publish["if"] == "${{ !cancelled() && needs.manifest.result == 'success' }}"
    # Lanes that build on other lanes run after a failed one too (its fragment was uploaded).
    for job_id in ("wheel-pure", "conda-pure", "docker"):
        assert jobs[job_id]["if"].startswith(after.removesuffix(" }}") + " && "), job_id
        assert len(jobs[job_id]["needs"]) > 1, job_id
    assert jobs["wheel-linux"]["if"] == "fromJSON(needs.plan.outputs.wheel_linux).include[0] != null"
    names = _steps(manifest)
    assert names.index("Merge them into the one manifest") < names.index("Write the release report and the "
                                                                         "release notes")
    assert names.index("Upload the release report and notes") < names.index("Upload the release")
    assert names[-1] == "Every cell of the plan is in the manifest (every build job uploaded its fragment)"
    check = manifest["steps"][-1]
    assert check["env"] == {"PLAN": "${{ toJSON(needs.plan.outputs) }}"}
    assert ('shipyard ci fragments --plan "$RUNNER_TEMP/plan.json" --ref "$GITHUB_REF" --dist dist fragments\n'
            in check["run"])
    assert not any("manifest gate" in step.get("run", "") for step in manifest["steps"])
    names = _steps(publish)
    gate = "Gate on the stable features for this channel"
    assert names.index("Download the release") < names.index(gate) < names.index(
        "Publish (gated again per channel; atomic and resumable)")
    assert _run_of(publish, gate) == 'shipyard manifest gate --dist dist --channel "$SHIPYARD_CHANNEL"\n'


def test_ci_fragments_names_every_build_job_that_uploaded_no_fragment(repo, tmp_path, capsys):
    plan = _plan(repo, capsys)
    outputs = tmp_path / "plan.json"
    outputs.write_text(json.dumps({name: json.dumps(value) for name, value in plan.items()}))
    ids = [entry["id"] for value in plan.values() for entry in value["include"]]
    folder = tmp_path / "fragments"
    for job in ids[2:]:
        (folder / f"fragment-{job}").mkdir(parents=True)
        (folder / f"fragment-{job}" / "manifest.json").write_text("{}")
    assert main(["--root", str(repo), "ci", "fragments", "--plan", str(outputs), str(folder)]) == MergeError.exit_code
    err = " ".join(capsys.readouterr().err.split())
    assert f"error: 2 of {len(ids)} build jobs uploaded no fragment" in err and f"{ids[0]}, {ids[1]}" in err
    for job in ids[:2]:
        (folder / f"fragment-{job}").mkdir()
        (folder / f"fragment-{job}" / "manifest.json").write_text("{}")
    assert main(["--root", str(repo), "ci", "fragments", "--plan", str(outputs), str(folder)]) == 0
    assert f"every build job of the plan uploaded its fragment ({len(ids)})" in capsys.readouterr().out
    for bad in ("not json", "[1, 2]", '{"wheel_linux": "{}"}'):
        outputs.write_text(bad)
        assert main(["--root", str(repo), "ci", "fragments", "--plan", str(outputs), str(folder)]) == 2
        err = capsys.readouterr().err
        # One line naming the file (and the line of a syntax error), with what to pass instead.
        assert re.fullmatch(rf"error: {re.escape(str(outputs))}(:1)?: \((file|syntax)\): .+; pass "
                            r"toJSON\(needs\.plan\.outputs\)", err.strip()), err
        assert "Traceback" not in err


@pytest.mark.parametrize("name", WORKFLOWS)
def test_conda_lanes_solve_from_release_yaml_channels_never_the_bootstrap(repo, name):
    """The conda jobs run `shipyard conda build` without a channel: release.yaml's conda.channels
    (conda-forge), which a runner reaches; the bootstrap channel needs this host's pyenv."""
    workflow = _load(repo / name)
    text = (repo / name).read_text()
    assert "--bootstrap-channel" not in text and "conda bootstrap" not in text
    conda = [job for job_id, job in workflow["jobs"].items() if job_id.startswith("conda-")]
    assert len(conda) == 5
    for job in conda:
        build = next(s for s in job["steps"] if s.get("id") == "build")
        command = (r'^ *shipyard conda build --variant "\$VARIANT" "\$\{component_args\[@\]\}" '
                   r'--publish-channel "\$SHIPYARD_CHANNEL" "\$\{python_args\[@\]\}"( \|\| status=\$\?)?$')
        assert re.search(command, build["run"], flags=re.M), build["run"]
    assert load_spec(repo).release.conda.channels == ("conda-forge",)  # type: ignore[union-attr]


def test_cuda_10_2_builds_in_an_image_the_job_makes_from_a_published_installer(repo, capsys):
    """NVIDIA's CUDA 10.2 image is gone: the job builds one from the Dockerfile in shipyard's package
    data, cached under its sha256, and runs the build step in that image (never run here)."""
    from importlib import resources

    from shipyard.host.toolchains.cuda_recipes import cuda_toolkit_recipe
    from shipyard.plumbing.hashing import sha256_hex

    dockerfile = resources.files("shipyard.resources").joinpath("docker", "cuda10.2", "Dockerfile")
    digest = sha256_hex(dockerfile.read_bytes())
    image = f"shipyard/cuda-builder:10.2-{digest[:12]}"
    for name in WORKFLOWS:
        text = (repo / name).read_text()
        assert "nvidia/cuda:10.2" not in text
        for job_id in ("wheel-linux-cuda-image", "conda-linux-cuda-image"):
            job = _load(repo / name)["jobs"][job_id]
            names = _steps(job)
            cache = job["steps"][names.index("CUDA 10.2 builder image (cached by its Dockerfile's sha256)")]
            assert cache["uses"].startswith("actions/cache@") and cache["id"] == "builder-image"
            assert cache["with"] == {"path": ".shipyard/builder-image/image.tar", "key": f"cuda-builder-10.2-{digest}"}
            load = job["steps"][names.index("Load the cached CUDA 10.2 builder image")]
            make = job["steps"][names.index("Build the CUDA 10.2 builder image from NVIDIA's archived installer")]
            assert load["if"] == "steps.builder-image.outputs.cache-hit == 'true'"
            assert make["if"] == "steps.builder-image.outputs.cache-hit != 'true'"
            assert make["env"]["TOOLKIT_IMAGE"] == load["env"]["TOOLKIT_IMAGE"] == image
            # The Dockerfile comes from the installed shipyard (a user's checkout holds no shipyard
            # source), printed to docker build with no context.
            assert make["env"]["CUDA_VERSION"] == "10.2"
            assert ('shipyard ci builder-dockerfile "$CUDA_VERSION" | docker build --pull --tag "$TOOLKIT_IMAGE" -'
                    in make["run"])
            assert 'docker save -o "$SAVED_IMAGE" "$TOOLKIT_IMAGE"' in make["run"]
            build = next(s for s in job["steps"] if s.get("id") == "build")
            assert names.index(make["name"]) < names.index(build["name"])
            assert build["env"]["TOOLKIT_IMAGE"] == image and '"$TOOLKIT_IMAGE" bash -euo pipefail -c' in build["run"]
            # root in the image, the checkout the runner user's: git must be told the checkout is safe
            assert "git config --global --add safe.directory /work" in build["run"]
        # No step reads a file of shipyard's own sources from the checkout.
        assert "src/shipyard" not in text
    capsys.readouterr()
    assert main(["ci", "builder-dockerfile", "10.2"]) == 0
    assert capsys.readouterr().out == dockerfile.read_text()
    text = dockerfile.read_text()
    assert re.search(r"^FROM ubuntu:18\.04$", text, flags=re.M)  # still published; gcc 8 (CUDA 10.2 wants <= 8)
    # The image has the host compiler cuda_toolkits.toml names for 10.2, and builds use it.
    host = cuda_toolkit_recipe("10.2").host_cxx
    assert f" {host} " in text and f"CXX={host} " in text and f"CUDAHOSTCXX={host}" in text, host
    assert int(host.removeprefix("g++-")) <= cuda_toolkit_recipe("10.2").host_gcc_max
    assert "cuda_10.2.89_440.33.01_linux.run" in text and "https://developer.download.nvidia.com/compute/cuda/10.2/" \
        "Prod" in text
    assert "md5sum -c" in text and "--toolkit" in text and "--driver" not in text


def test_the_cuda_builder_dockerfile_passes_hadolint(repo, tmp_path):
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    dockerfile = repo / "src/shipyard/resources/docker/cuda10.2/Dockerfile"
    done = subprocess.run([hadolint, "--no-color", str(dockerfile)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    # The lint is real: the same file with an unpinned, uncleaned apt install fails it.
    broken = dockerfile.read_text().replace("# hadolint ignore=DL3008\n", "").replace(
        " \\\n && rm -rf /var/lib/apt/lists/*", "", 1)
    copy = tmp_path / "Dockerfile"
    copy.write_text(broken)
    done = subprocess.run([hadolint, "--no-color", str(copy)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "DL3008" in done.stdout and "DL3009" in done.stdout, done.stdout


@pytest.mark.parametrize("name", WORKFLOWS)
def test_the_docker_lane_pulls_its_bases_and_installs_what_it_needs(repo, name):
    job = _load(repo / name)["jobs"]["docker"]
    names = _steps(job)
    pull = "Base images (release.yaml's images.base_image and python_image, pulled)"
    client = "Docker client (the runner's, else Debian's or Ubuntu's docker.io)"
    install = f"Install shipyard=={shipyard.__version__}"
    assert names.index(install) < names.index("Pythons of the job") < names.index(client) \
        < names.index(pull) < names.index("Build the images and save them for publish")
    # the images' Python from setup-python (the runner's tool cache), beside shipyard's own
    setup = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/setup-python@"))
    assert setup["with"]["python-version"].split() == ["3.11", "3.13"]
    # only the images this build made go to publish, never others the engine holds
    build = _run_of(job, "Build the images and save them for publish")
    assert '--save "dist/images/$VARIANT_TAG.tar"' in build and "docker image ls" not in (repo / name).read_text()
    run = _run_of(job, pull)
    assert 'refs=$(shipyard image bases --variant "$VARIANT")\nmapfile -t bases <<< "$refs"\n' in run
    assert 'docker image inspect "$ref" >/dev/null 2>&1 || docker pull --quiet "$ref"' in run
    assert "apt-get install" in _run_of(job, client) and "docker.io" in _run_of(job, client)
    assert "debootstrap" not in (repo / name).read_text()


def test_image_bases_prints_what_the_docker_job_pulls_and_asks_for_a_digest(ci_copy, capsys):
    root = str(ci_copy.root)
    assert main(["--root", root, "image", "bases", "--variant", "cpu"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == ["debian:bookworm-slim", "python:3.11-slim-bookworm"]
    assert "warning: debian:bookworm-slim is not pinned by digest" in " ".join(captured.err.split())
    pinned = "debian:bookworm-slim@sha256:" + "ab" * 32
    ci_copy.edit("release.yaml", "base_image: debian:bookworm-slim", f"base_image: {pinned}")
    assert main(["--root", root, "image", "bases", "--variant", "cpu"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [pinned, "python:3.11-slim-bookworm"]
    assert "debian:bookworm-slim is not pinned" not in captured.err
    assert main(["--root", root, "image", "bases", "--variant", "cuda10.2"]) == 2
    assert "images.variants has no such variant" in capsys.readouterr().err


@pytest.mark.parametrize("name", WORKFLOWS)
def test_windows_and_macos_wheels_get_their_libraries_from_a_named_source(repo, name):
    """Checked as generated text only: no Windows or macOS runner runs here."""
    jobs = _load(repo / name)["jobs"]
    only = "contains(fromJSON('[\"embervision\"]'), matrix.components)"
    windows = next(s for s in jobs["wheel-windows"]["steps"] if "from vcpkg" in s.get("name", ""))
    assert windows["if"] == only and windows["shell"] == "pwsh"
    assert windows["env"] == {"PORTS": "libjpeg-turbo libpng", "TRIPLET": "x64-windows"}
    assert "$env:VCPKG_INSTALLATION_ROOT\\vcpkg.exe\" install" in windows["run"]
    assert "$env:GITHUB_PATH" in windows["run"]  # delvewheel finds the DLLs on PATH
    macos = next(s for s in jobs["wheel-macos"]["steps"] if "from Homebrew" in s.get("name", ""))
    assert macos["if"] == only and macos["env"] == {"FORMULAE": "jpeg-turbo libpng"}
    assert 'brew install --quiet "${formulae[@]}"' in macos["run"] and "CMAKE_PREFIX_PATH" in macos["run"]
    for job_id in ("conda-windows", "conda-macos", "wheel-linux"):  # conda-forge and Debian have them
        assert not any("vcpkg" in s.get("name", "") or "Homebrew" in s.get("name", "") for s in jobs[job_id]["steps"])
    # shipyard's install on those runners brings the repair tool that `shipyard build` runs.
    pyproject = (repo / "pyproject.toml").read_text()
    assert "\"delvewheel>=1.7; sys_platform == 'win32'\"" in pyproject
    assert "\"delocate>=0.12; sys_platform == 'darwin'\"" in pyproject


def test_a_release_of_pure_packages_only_downloads_no_native_fragments(repo, tmp_path):
    """The pure lane of a release without native wheels has nothing to be tested against: no
    download or merge of native fragments (with none uploaded, the merge found nothing and failed),
    and it needs only the plan. ember's pure lane keeps both."""
    fixture = Path(__file__).parent.parent / "fixtures" / "pipeline"
    root = tmp_path / "pure"
    shutil.copytree(fixture, root)
    shutil.copytree(repo / "ci", root / "ci")
    assert main(["--root", str(root), "ci", "generate"]) == 0
    job = _load(root / ".github" / "workflows" / "nightly.yml")["jobs"]["wheel-pure"]
    assert job["needs"] == ["plan"]
    assert not [name for name in _steps(job) if "fragments" in name], _steps(job)
    ember = _load(repo / ".github" / "workflows" / "nightly.yml")["jobs"]["wheel-pure"]
    assert "Download the cpu linux-x86_64 wheel fragments it is tested against" in _steps(ember)


# --- what act does not show (#51 item 6): checked on the generated text ----------------------------


def _lane_jobs(workflow: dict) -> dict[str, tuple[dict, str]]:
    """Each lane job with the plan output that holds its matrix."""
    out = {}
    for job_id, job in workflow["jobs"].items():
        matrix = str(job.get("strategy", {}).get("matrix", ""))
        if "needs.plan.outputs." in matrix:
            out[job_id] = (job, matrix.split("needs.plan.outputs.", 1)[1].split(")", 1)[0])
    return out


@pytest.mark.parametrize("name", WORKFLOWS)
def test_a_lane_the_plan_leaves_empty_is_skipped_and_the_jobs_after_it_still_run(repo, capsys, name):
    """GitHub refuses a matrix of no entries ("Matrix must define at least one vector"), which a
    narrowed dispatch gives a lane: each lane's `if:` skips it then. The jobs after the lanes run
    after a skipped one (a status function in their `if:` stops the implicit success())."""
    assert main(["--root", str(repo), "ci", "plan", "--channel", "nightly", "--package-type", "docker"]) == 0
    outputs = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    assert outputs["wheel_linux"] == '{"include":[]}'
    lanes_seen = _lane_jobs(_load(repo / name))
    assert len(lanes_seen) == 12
    for job_id, (job, output) in lanes_seen.items():
        guard = f"fromJSON(needs.plan.outputs.{output}).include[0] != null"
        assert job["if"] in (guard, "${{ !cancelled() && needs.plan.result == 'success' && " + guard + " }}"), job_id
    jobs = _load(repo / name)["jobs"]
    assert jobs["manifest"]["if"].startswith("${{ !cancelled() && ")
    assert jobs["publish"]["if"] == "${{ !cancelled() && needs.manifest.result == 'success' }}"


@pytest.mark.parametrize("name", WORKFLOWS)
def test_every_upload_replaces_its_earlier_one_when_the_job_is_re_run(repo, name):
    """A re-run of a failed job uploads under the same name: upload-artifact v4 answers 409 unless
    `overwrite: true`. The local stand-in declares the input too."""
    uploads = [(job_id, step) for job_id, job in _load(repo / name)["jobs"].items() for step in job["steps"]
               if step.get("uses", "").startswith("actions/upload-artifact@")]
    assert len(uploads) == 14
    for job_id, step in uploads:
        assert step["with"]["overwrite"] == "true", (job_id, step["name"])
    assert PINNED["actions/upload-artifact"][1] >= "v4"  # overwrite came with v4
    stand_in = yaml.safe_load((repo / "src/shipyard/resources/act/actions/upload-artifact/action.yml").read_text())
    assert "overwrite" in stand_in["inputs"]


def _plan_file(repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> Path:
    assert main(["--root", str(repo), "ci", "plan", "--channel", "nightly", *args]) == 0
    outputs = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(outputs))
    return plan


def _dist_recording(tmp_path: Path, cells: list) -> Path:
    dist = tmp_path / "dist"
    dist.mkdir(exist_ok=True)
    records = tuple(NotApplicableRecord(**CellRecord.identity(cell), reason="test") for cell in cells)
    manifest = Manifest(release="ember", version="1.7.0", artifacts=(), not_applicable=records)
    (dist / "manifest.json").write_text(manifest.model_dump_json())
    return dist


def test_the_manifest_job_fails_unless_every_cell_of_the_plan_is_recorded(repo, tmp_path, capsys):
    """Every fragment there is not enough: each cell of the plan (narrowed as dispatched) must have a
    record in the merged manifest, or the manifest job fails and publish (needing its success)
    publishes nothing. The missing cells are named."""
    plan = _plan_file(repo, tmp_path, capsys, "--variant", "cpu", "--python", "3.11", "--package-type", "wheel")
    ids = [e["id"] for value in json.loads(plan.read_text()).values() for e in json.loads(value)["include"]]
    folder = tmp_path / "fragments"
    for job in ids:
        (folder / f"fragment-{job}").mkdir(parents=True)
        (folder / f"fragment-{job}" / "manifest.json").write_text("{}")
    cells = [c for c in select(list(expand(load_spec(repo).release)), variant="cpu", package_type="wheel")
             if c.python in (None, "3.11")]
    # ember: linux-x86_64, linux-x86_64-manylinux2014, windows, macos; embervision: 3 platforms; 3 pure
    assert len(cells) == 10
    recorded = [c for c in cells if c.id not in ("ember-cpu-macos-arm64-cp311-wheel", "emberaudio-any-wheel")]
    dist = _dist_recording(tmp_path, recorded)
    argv = ["--root", str(repo), "ci", "fragments", "--plan", str(plan), "--dist", str(dist), str(folder)]
    assert main(argv) == MergeError.exit_code
    err = " ".join(capsys.readouterr().err.split())
    assert (f"error: {dist}/manifest.json: 2 of 10 cells of the plan have no record, so the release is incomplete "
            "and is not published; the logs of their jobs say why: ember-cpu-macos-arm64-cp311-wheel, "
            "emberaudio-any-wheel") in err
    _dist_recording(tmp_path, cells)
    assert main(argv) == 0
    assert "every cell of the plan is in the merged manifest (10)" in capsys.readouterr().out
    # A conda package or mobile archive whose tests failed is withheld from dist/ (no record): on
    # nightly the release still publishes, marked, so those jobs are checked by their fragment.
    plan = _plan_file(repo, tmp_path, capsys, "--variant", "cpu", "--python", "3.11")
    for value in json.loads(plan.read_text()).values():
        for entry in json.loads(value)["include"]:
            (folder / f"fragment-{entry['id']}").mkdir(exist_ok=True)
            (folder / f"fragment-{entry['id']}" / "manifest.json").write_text("{}")
    assert main(argv) == 0
    assert "every cell of the plan is in the merged manifest (10)" in capsys.readouterr().out


def test_the_release_channel_is_published_only_from_a_tag(repo, capsys):
    """release.yml lets a dispatch choose the channel from any branch: the plan job refuses the
    channel that holds releases without a release tag, and only that channel's publish job gets
    the `release` environment (whose protection rules are the repository's)."""
    base = ["--root", str(repo), "ci", "plan"]
    assert main([*base, "--channel", "release", "--ref", "refs/heads/main"]) == UsageError.exit_code
    err = capsys.readouterr().err.strip()
    assert err == ("error: --ref: channel release is published only from a release tag (v1.7.0, or "
                   "<component>-v<its version>); push that tag, or dispatch another channel (test) "
                   "(got refs/heads/main)"), err
    assert main([*base, "--channel", "release", "--ref", "refs/tags/v1.7.0"]) == 0
    assert main([*base, "--channel", "test", "--ref", "refs/heads/main"]) == 0
    capsys.readouterr()
    release = _load(repo / WORKFLOWS[0])
    channel = release["env"]["SHIPYARD_CHANNEL"].removeprefix("${{ ").removesuffix(" }}")
    assert release["jobs"]["publish"]["environment"] == f"${{{{ ({channel}) == 'release' && 'release' || '' }}}}"
    assert _load(repo / WORKFLOWS[1])["jobs"]["publish"]["environment"] == "nightly"


def _run_step(script: str, tmp_path: Path, functions: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A generated `run:` script under bash as GitHub runs it, after `functions` (stand-ins for the
    commands it calls)."""
    step = tmp_path / "step.sh"
    step.write_text(functions + script)
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(step)],
                          env={"PATH": "/usr/bin:/bin", "GITHUB_OUTPUT": str(tmp_path / "output"), **env},
                          capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("name", WORKFLOWS)
def test_a_failing_command_whose_output_a_step_reads_fails_the_step(repo, tmp_path, name):
    """`mapfile -t x < <(cmd)` and `echo "k=$(cmd)"` lose cmd's failure: the step went on with no
    base images, or with an empty cache key."""
    jobs = _load(repo / name)["jobs"]
    pull = _run_of(jobs["docker"], "Base images (release.yaml's images.base_image and python_image, pulled)")
    docker = "docker() { echo \"docker $*\" >> \"$GITHUB_OUTPUT\"; }\n"
    failing = "shipyard() { echo 'error: release.yaml: images: …' >&2; return 2; }\n"
    (tmp_path / "output").write_text("")
    done = _run_step(pull, tmp_path, docker + failing, {"VARIANT": "cpu"})
    assert done.returncode == 2 and "docker" not in (tmp_path / "output").read_text()
    done = _run_step(pull, tmp_path, docker + "shipyard() { printf 'debian:bookworm-slim\\npython:3.11\\n'; }\n",
                     {"VARIANT": "cpu"})
    assert done.returncode == 0, done.stderr
    assert "docker image inspect python:3.11\n" in (tmp_path / "output").read_text()
    key = _run_of(jobs["wheel-linux"], "Cache key (shipyard's own, from the job's sources and release.yaml)")
    (tmp_path / "output").write_text("")
    assert _run_step(key, tmp_path, failing, {"JOB_ID": "wheel-ember-cpu-linux-x86_64"}).returncode == 2
    assert (tmp_path / "output").read_text() == ""


@pytest.mark.parametrize("name", WORKFLOWS)
def test_the_msvc_step_exports_only_what_vcvars_changed(repo, name):
    """`set` after vcvars64 lists the whole environment; exported whole, it pinned every runner
    variable (and PATH entries later steps add) to this step's values."""
    run = _run_of(_load(repo / name)["jobs"]["wheel-windows"], "MSVC environment (vcvars64 of the runner's Visual "
                                                                 "Studio)")
    lines = run.splitlines()
    before = lines.index("Get-ChildItem env: | ForEach-Object { $before[$_.Name] = $_.Value }")
    assert lines[before - 1].startswith("$before = @{}")
    compare = lines.index("  if ($_ -match '^([^=]+)=(.*)$' -and $before[$matches[1]] -cne $matches[2]) {")
    assert before < compare and "GITHUB_ENV" in lines[compare + 1] and lines[compare + 2] == "  }"
    assert sum("GITHUB_ENV" in line for line in lines) == 1


def test_an_older_glibc_promise_installs_zig_for_it_in_the_linux_job_image(ci_copy):
    """manylinux2014 builds with zig's clang for glibc 2.17 (release/build_routes.py): the Linux job
    image holds its wrappers where it held the bullseye sysroot, from the release.yaml value alone."""
    ci_copy.edit("release.yaml", "wheel_platform_tag: manylinux_2_31_x86_64",
                 "wheel_platform_tag: manylinux2014_x86_64")
    text = dockerfile(load_spec(ci_copy.root))
    assert "\nRUN shipyard toolchain install zig-2.17\n" in text
    assert "bullseye" not in text
