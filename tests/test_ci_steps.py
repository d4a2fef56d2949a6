"""The steps are real: the Linux job that builds the pure emberaudio wheel, run here as written.

The job's `run:` steps execute on this machine (a Debian 12 host, what the job's debian:bookworm
container is) with its matrix entry from `shipyard ci plan` and the GITHUB_* variables, in a
fresh copy of the repository; `uses:` steps are replaced by their local equivalents
(tests/workflow_runner.py). The job is tested against ember's cpu wheel, which on GitHub comes
from the ember job's fragment: here that fragment is made by `shipyard build` for the one
Python the pure wheel is tested with, without its tests, through the repository's own build cache
(a hit when the cpu release test built it). The signing key comes from the secret the build step
names, as on GitHub (the copied workspace holds no key file), so the job's wheel comes out signed.
Then the manifest job's steps merge the two fragments and gate the result, as they would on GitHub.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from workflow_runner import JobRunner, copy_repository

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

    # The manifest job: every fragment downloaded, merged, gated, uploaded as the release.
    workspace2 = copy_repository(repo, tmp_path / "manifest-job" / "work")
    runner = JobRunner(workspace2, artifacts, {}, contexts={}, workflow_env=_workflow_env(workflow),
                       github=_github(workspace2, "manifest"))
    runner.run_job(workflow["jobs"]["manifest"])
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
