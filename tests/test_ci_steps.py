"""The steps are real: the Linux job that builds the pure emberaudio wheel, run here as written.

The job's `run:` steps execute on this machine (a Debian 12 host, what the job's debian:bookworm
container is) with its matrix entry from `shipyard ci plan` and the GITHUB_* variables, in a
fresh copy of the repository; `uses:` steps are replaced by their local equivalents
(tests/workflow_runner.py). The job is tested against ember's cpu wheel, which on GitHub comes
from the ember job's fragment: here that fragment is made by `shipyard build` for the one
Python the pure wheel is tested with, without its tests, through the repository's own build cache
(a hit when the cpu release test built it). The signing key comes from the secret the build step
names, as on GitHub (the copied workspace holds no key file), so the job's wheel comes out signed.
Then the manifest job's steps merge the two fragments and report on them, as they would on GitHub.

The second test runs nightly's wheel-linux job for the fixture release with a stable feature
broken, then the manifest job and the publish job's gate for two channels.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from minirelease import GIT_ENV, make_checkout
from workflow_runner import JobRunner, copy_repository

from shipyard.ci.jobs import build_jobs
from shipyard.cli import main
from shipyard.plumbing.hashing import sha256_of
from shipyard.record.manifest import read_manifest
from shipyard.release.validate import load_spec
from shipyard.supply.keys import generate_key

pytestmark = pytest.mark.slow

TAG = "v1.7.0-rc1"  # a candidate tag: release.yml publishes it to the test channel


def _github(workspace: Path, job: str) -> dict[str, str]:
    return {"GITHUB_ACTIONS": "true", "CI": "true", "GITHUB_WORKSPACE": str(workspace), "GITHUB_JOB": job,
            "GITHUB_REF": f"refs/tags/{TAG}", "GITHUB_REF_NAME": TAG, "GITHUB_REF_TYPE": "tag",
            "GITHUB_EVENT_NAME": "push", "GITHUB_REPOSITORY": "ember-ml/shipyard", "GITHUB_RUN_ID": "1",
            "GITHUB_SHA": "0" * 40, "RUNNER_OS": "Linux", "RUNNER_ARCH": "X64"}


def _workflow_env(workflow: dict) -> dict[str, str]:
    env = dict(workflow["env"])
    # ${{ inputs.channel || (contains(github.ref_name, '-rc') && 'test' || 'release') }} on a push of TAG:
    assert env["SHIPYARD_CHANNEL"] == ("${{ inputs.channel || (contains(github.ref_name, '-rc') && 'test' "
                                       "|| 'release') }}")
    env["SHIPYARD_CHANNEL"] = "test"
    return env


@pytest.fixture(scope="module")
def ember_fragment(repo, tmp_path_factory, suite_state) -> Path:
    """What the wheel-ember-cpu-linux-x86_64 job uploads, for the Python the pure wheel is tested with."""
    oldest = load_spec(repo).release.pythons[0]
    dist = tmp_path_factory.mktemp("fragments") / "fragment-wheel-ember-cpu-linux-x86_64"
    code = main(["--root", str(repo), "build", "--variant", "cpu", "--component", "ember", "--python", oldest,
                 "--no-tests", "--dist", str(dist), "--state", str(suite_state)])
    assert code == 0
    return dist


def test_pure_wheel_job_steps_run_here_and_the_manifest_job_merges_the_fragments(repo, tmp_path, capsys,
                                                                                  ember_fragment):
    workflow = yaml.load((repo / ".github/workflows/release.yml").read_text(), Loader=yaml.BaseLoader)
    assert main(["--root", str(repo), "ci", "plan", "--channel", "test", "--ref", f"refs/tags/{TAG}"]) == 0
    plan = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    job = workflow["jobs"]["wheel-pure"]
    assert job["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.wheel_pure) }}"
    assert job["container"]["image"] == "debian:bookworm"
    entry = next(e for e in json.loads(plan["wheel_pure"])["include"] if e["component"] == "emberaudio")
    assert entry["id"] == "wheel-emberaudio-any" and entry["builder"] == "linux-x86_64"

    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    shutil.copytree(ember_fragment, artifacts / ember_fragment.name)
    secret = load_spec(repo).release.supply_chain.signing_key_env  # type: ignore[union-attr]
    build_step = next(s for s in job["steps"] if s.get("name") == "Build and test every Python")
    assert build_step["env"][secret] == f"${{{{ secrets.{secret} }}}}"
    private, public, _ = generate_key(tmp_path / "ci-secret" / "key.pem")
    workspace = copy_repository(repo, tmp_path / "job" / "work")
    assert not (workspace / ".shipyard").exists()  # no key file: only the secret can sign
    runner = JobRunner(workspace, artifacts, entry, contexts={}, workflow_env=_workflow_env(workflow),
                       github=_github(workspace, "wheel-pure"), secrets={secret: private.read_text()})
    run = runner.run_job(job)
    print("\n".join(f"  {s.seconds:6.1f}s {s.kind:4} {s.name}" for s in run.steps))
    ran = [s.name for s in run.steps]
    assert "Build and test every Python" in ran and "Upload artifacts and manifest fragment" in ran
    key = run.outputs["cache-key"]["key"]
    assert key.startswith("wheel-emberaudio-any-") and len(key) == len("wheel-emberaudio-any-") + 64

    fragment = artifacts / "fragment-wheel-emberaudio-any"
    manifest = read_manifest(fragment / "manifest.json")
    assert manifest is not None and manifest.version == "1.7.0"
    record = manifest.by_cell()["emberaudio-any-wheel"]
    wheel = fragment / record.path
    assert wheel.name == "emberaudio-1.7.0-py3-none-any.whl" and sha256_of(wheel) == record.sha256
    assert record.tests is not None and record.tests["installed"] == "1.7.0"
    assert not [f for f, r in record.tests["features"].items() if r["result"] == "failed"], record.tests
    # Signed with the secret's key: the fragment verifies against its public key.
    assert record.provenance and (fragment / record.provenance).is_file()
    assert main(["verify", str(fragment / record.path), "--public-key", str(public)]) == 0

    # The manifest job: every fragment downloaded, merged, reported, uploaded as the release, and
    # checked against the plan (narrowed here to the two jobs that ran).
    ember_entry = next(e for e in json.loads(plan["wheel_linux"])["include"] if e["id"] == ember_fragment.name
                       .removeprefix("fragment-"))
    narrowed = {"wheel_linux": json.dumps({"include": [ember_entry]}), "wheel_pure": json.dumps({"include": [entry]})}
    workspace2 = copy_repository(repo, tmp_path / "manifest-job" / "work")
    runner = JobRunner(workspace2, artifacts, {}, contexts={"toJSON(needs.plan.outputs)": json.dumps(narrowed)},
                       workflow_env=_workflow_env(workflow), github=_github(workspace2, "manifest"))
    merged = runner.run_job(workflow["jobs"]["manifest"])
    assert "every build job of the plan uploaded its fragment (2)" in merged.output
    release = artifacts / "release-dist"
    # The release manager's report and notes, uploaded before the gate could stop the job.
    report = artifacts / "release-report"
    assert 'data-state="passed"' in (report / "report" / "index.html").read_text()
    assert "## Stable" in (report / "RELEASE_NOTES.md").read_text()
    merged = read_manifest(release / "manifest.json")
    assert merged is not None
    ember_cells = set(read_manifest(ember_fragment / "manifest.json").by_cell())  # type: ignore[union-attr]
    assert set(merged.by_cell()) == ember_cells | {"emberaudio-any-wheel"}
    for cell in merged.artifacts:
        assert sha256_of(release / cell.path) == cell.sha256
    index = (release / "whl" / "cpu" / "index.json").read_text()
    assert '"name": "ember"' in index and '"name": "emberaudio"' in index
    assert (release / "whl" / "cpu" / "emberaudio" / wheel.name).read_bytes() == wheel.read_bytes()


# --- a failing stable feature on CI (issue 28) ---------------------------------------------

FIXTURE_CELL = "fixcext-cpu-linux-x86_64-cp311-wheel"
# Steps the test's own environment stands in for: shipyard is installed here already (its install
# steps are run by the test above), and the fixture release has no publish targets.
INSTALLED = ("Install shipyard (ci/bootstrap.sh wheel-linux, as on a bare Debian 12 machine)", "Python for shipyard",
             "Install shipyard")


def _fixture_release(dest: Path) -> Path:
    """The fixture release (one Python, channels nightly: mark and test: block), committed."""
    root = make_checkout(dest)
    release = root / "release.yaml"
    text = release.read_text().replace('pythons: ["3.9", "3.10", "3.11", "3.12", "3.13"]', 'pythons: ["3.11"]')
    release.write_text(text + "channels:\n  nightly: {gate: mark}\n  test: {gate: block}\n")
    subprocess.run(["git", "commit", "-qam", "one Python, two channels"], cwd=root, check=True,
                   env={**os.environ, **GIT_ENV})
    return root


def test_a_failing_stable_feature_uploads_its_fragment_and_the_channel_gate_decides(repo, tmp_path, monkeypatch):
    """nightly.yml's wheel-linux job, run as written for the fixture's fixcext with its stable
    feature broken: the build step records exit 1, the fragment is uploaded, then the job fails.
    The manifest job merges it and uploads a report naming the failure; the publish job's gate
    passes it, marked, for nightly and refuses it for test."""
    nightly = yaml.load((repo / ".github/workflows/nightly.yml").read_text(), Loader=yaml.BaseLoader)
    monkeypatch.setenv("FIXTURE_BREAK_STABLE", "1")  # the fixture's stable test fails
    tools = str(Path(sys.executable).parent)  # shipyard, installed in this environment
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    workspace = _fixture_release(tmp_path / "lane" / "work")
    [job] = [j for j in build_jobs(load_spec(workspace).release) if j.id == "wheel-fixcext-cpu-linux-x86_64"]
    env = {"SHIPYARD_CHANNEL": "nightly", "PYTHONUNBUFFERED": "1"}
    runner = JobRunner(workspace, artifacts, job.matrix_entry(), contexts={}, workflow_env=env,
                       github=_github(workspace, "wheel-linux"))
    runner.extra_path.append(tools)
    lane = runner.run_job(nightly["jobs"]["wheel-linux"], skip=INSTALLED, check=False)
    ran = [s.name for s in lane.steps]
    assert lane.outputs["build"] == {"status": "1"}, lane.output[-4000:]
    assert ran[-3:] == ["Build and test every Python", "Upload artifacts and manifest fragment",
                        "Fail the job when a stable feature failed (after the upload)"]
    assert lane.failed == ("Fail the job when a stable feature failed (after the upload)", 1)
    assert "::error::a stable feature failed its tests (exit 1)" in lane.output
    fragment = read_manifest(artifacts / f"fragment-{job.id}" / "manifest.json")
    assert fragment is not None
    features = fragment.by_cell()[FIXTURE_CELL].tests["features"]  # type: ignore[index]
    assert features["fix.sumsq"]["result"] == "failed"

    # The manifest job: merged, the report made and uploaded, every fragment accounted for.
    plan = {"wheel_linux": json.dumps({"include": [job.matrix_entry()]})}
    manifest_job = nightly["jobs"]["manifest"]
    assert manifest_job["if"] == "${{ !cancelled() && needs.plan.result == 'success' }}"
    workspace = _fixture_release(tmp_path / "manifest" / "work")
    runner = JobRunner(workspace, artifacts, {}, contexts={"toJSON(needs.plan.outputs)": json.dumps(plan)},
                       workflow_env=env, github=_github(workspace, "manifest"))
    runner.extra_path.append(tools)
    merged = runner.run_job(manifest_job, skip=INSTALLED)
    assert "every build job of the plan uploaded its fragment (1)" in merged.output
    report = artifacts / "release-report"
    html = (report / "report" / "index.html").read_text()
    assert f'data-cell="{FIXTURE_CELL}" data-state="failed"' in html and "fix.sumsq" in html
    assert "fix.sumsq" in (report / "RELEASE_NOTES.md").read_text()

    # The publish job's gate, per channel (the fixture has no publish targets: the step after it is not run).
    publish = [*INSTALLED, "Publish (gated again per channel; atomic and resumable)"]
    gate = "Gate on the stable features for this channel"
    for channel, expected in (("nightly", None), ("test", (gate, 9))):
        workspace = _fixture_release(tmp_path / f"publish-{channel}" / "work")
        runner = JobRunner(workspace, artifacts, {}, contexts={}, workflow_env={**env, "SHIPYARD_CHANNEL": channel},
                           github=_github(workspace, "publish"))
        runner.extra_path.append(tools)
        run = runner.run_job(nightly["jobs"]["publish"], skip=publish, check=False)
        assert run.failed == expected, run.output[-4000:]
        assert gate in [s.name for s in run.steps]
        if channel == "nightly":
            assert "marked" in run.output and "gate passed" in run.output and "fix.sumsq" in run.output
        else:
            assert "fix.sumsq" in run.output and "gate passed" not in run.output
