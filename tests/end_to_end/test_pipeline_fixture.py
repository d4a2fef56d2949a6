"""The release pipeline end to end on the small fixture release (tests/fixtures/pipeline): the
committed workflows under `shipyard ci run`, several times, publishing into a real devpi server.
The committed release.yaml names the project's own devpi, off this machine, as a user's does; the
runs map it to the devpi started here with a local targets file (`shipyard --targets FILE ci run`).

One fixture commit after another, in a repository of its own that holds no shipyard source, as a
user's does: every job installs shipyard from an index (a loopback one holding this checkout's wheel,
the SHIPYARD_INDEX_URL repository variable), never from the checkout:
1. a stable feature fails: nightly publishes the release marked, its report artifact names the
   feature, and the release workflow's publish job refuses it for the test channel;
2. the fix, a day later: a nightly of new development versions, beside the first;
3. tag v0.4.0-rc1: the release workflow publishes 0.4.0 to test, and `shipyard promote` serves
   the same bytes on release.
The same commit's nightly run again is not one of them (a run of about 100 s that .ci/run's 30
minutes no longer held): a re-publish of the same bytes uploads nothing in
tests/publish/test_publish.py (test_republishing_the_same_bytes_uploads_nothing), and two builds of
one commit give the same bytes in tests/supply/test_supply_chain.py (test_repro_…).
ember's own nightly runs in test_pipeline_ember.py (nox -s nightly-ember).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.pipeline_run import (
    NOT_RUNNABLE,
    PipelineRun,
    commit,
    fixture_stand_in_targets,
    fresh_repository,
    lay_fixture_release,
    run_pipeline,
)
from support.publish_servers import devpi_server, pip_installed_sha, unbound_port
from support.shipyard_process import run_shipyard, without_shipyard_settings

import shipyard
from shipyard.errors import RunFailed
from shipyard.local_ci.act_report import read_log
from shipyard.plumbing.hashing import sha256_of
from shipyard.plumbing.port_ranges import claimed_port_range
from shipyard.record.manifest import read_manifest

# Whole workflows under act: 345-410 s on 2 cores (2026-12-05); their own timeout, as ember's pipeline test.
# 400-600 s under act on 2 cores: `nox -s pipeline-fixture`, not `nox -s tests`, whose 30 minutes on 2
# cores it no longer fits beside the rest of the suite (its run-to-run spread here is 28-32 min).
pytestmark = [pytest.mark.slow, pytest.mark.fixture_pipeline, pytest.mark.timeout(2400)]

JOBS = ("plan", "wheel-pure wheel-pure-cpu-linux-x86_64-any", "manifest", "publish")


def _ran_green(run: PipelineRun) -> None:
    assert run.returncode == 0, run.output[-4000:] + run.failed_jobs_log()
    assert run.ran() == dict.fromkeys(JOBS, "success"), run.table()


def test_nightlies_a_failing_stable_feature_and_a_release_candidate_through_the_workflows(
        tmp_path: Path, docker_engine: None) -> None:
    with claimed_port_range() as ports, devpi_server(tmp_path / "devpi", unbound_port(ports)) as devpi:
        password = devpi.add_user("fixture")
        secrets = {"SHIPYARD_PYPI_USERNAME": "fixture", "SHIPYARD_PYPI_PASSWORD": password}
        repo = fresh_repository(tmp_path / "repo")
        # The committed release.yaml names the project's own devpi; the runs publish to this one instead.
        targets = fixture_stand_in_targets(tmp_path / "local-targets.yaml", devpi.url)
        nightly = f"{devpi.url}/fixture/nightly-cpu/+simple/"

        # 1. A stable feature fails: nightly publishes it marked, the report names it, test refuses.
        lay_fixture_release(repo, broken=True)
        commit(repo, "fixture: fixpipe's stable feature breaks", "2026-11-30T12:00:00+00:00")
        committed = (repo / "release.yaml").read_text() + "".join(
            p.read_text() for p in (repo / ".github" / "workflows").glob("*.yml"))
        assert "127.0.0.1" not in committed and "https://devpi.pipeline-fixture.example/" in committed
        broken = run_pipeline(repo, tmp_path / "run-broken", secrets, "--workflow", "nightly", targets=targets)
        assert broken.returncode == RunFailed.exit_code, broken.output[-4000:]
        # The stand-in's credentials reach the publish step as the workflow passes the real target's:
        # from the run's secrets, under the same names; no warning that they are missing.
        assert "name credential variables" not in broken.output, broken.output[:4000]
        results = broken.ran()
        assert results == {"plan": "success", JOBS[1]: "failure", "manifest": "success", "publish": "success"}, \
            broken.table()
        failed = next(r for r in broken.jobs if r["result"] == "failure")
        assert "Fail the job when a stable feature failed" in failed["reason"], failed
        report = broken.artifact("release-report", tmp_path / "report-broken")
        notes = "\n".join(p.read_text(errors="replace") for p in report.rglob("*") if p.suffix in (".md", ".html"))
        assert "fixpipe.answer" in notes and "the answer, computed" in notes, sorted(report.rglob("*"))
        dist = broken.artifact("release-dist", tmp_path / "dist-broken")
        manifest = read_manifest(dist / "manifest.json")
        assert manifest is not None
        [marked] = [a for a in manifest.artifacts if a.package_type == "wheel"]
        assert marked.version == "0.4.0.dev20261130", marked.version
        assert pip_installed_sha(nightly, "fixpipe==0.4.0.dev20261130", tmp_path / "pip-broken") == marked.sha256
        refused = run_pipeline(repo, tmp_path / "run-broken-test", secrets, "--workflow", "release",
                               "--channel", "test", "--ref", "refs/tags/v0.4.0-rc1", targets=targets)
        assert refused.returncode == RunFailed.exit_code, refused.output[-4000:]
        assert refused.results()["publish"] == "failure", refused.table()
        refusal = next(r for r in refused.jobs if r["name"] == "publish")["reason"]
        assert "Gate on the stable features" in refusal, refusal
        assert _served(devpi.url, "fixture/test-cpu", "fixpipe") == {}

        # 2. The fix, a day later: new development versions beside the first nightly's.
        lay_fixture_release(repo, broken=False)
        commit(repo, "fixture: fixpipe's stable feature fixed", "2026-12-01T12:00:00+00:00")
        fixed = run_pipeline(repo, tmp_path / "run-fixed", secrets, "--workflow", "nightly", targets=targets)
        _ran_green(fixed)
        dist = fixed.artifact("release-dist", tmp_path / "dist-fixed")
        manifest = read_manifest(dist / "manifest.json")
        assert manifest is not None
        [wheel] = [a for a in manifest.artifacts if a.package_type == "wheel"]
        assert wheel.version == "0.4.0.dev20261201" and wheel.sha256 == sha256_of(dist / wheel.path)
        # the newest development version, as `pip install --pre` picks it
        assert pip_installed_sha(nightly, "fixpipe", tmp_path / "pip-fixed", "--pre") == wheel.sha256
        assert pip_installed_sha(nightly, "fixpipe==0.4.0.dev20261130", tmp_path / "pip-old") == marked.sha256

        # 3. A release candidate: test gets 0.4.0, and promotion serves the same bytes on release.
        subprocess.run(["git", "tag", "v0.4.0-rc1"], cwd=repo, check=True, timeout=60)
        candidate = run_pipeline(repo, tmp_path / "run-rc", secrets, "--workflow", "release", "--channel", "test",
                                 "--ref", "refs/tags/v0.4.0-rc1", targets=targets)
        _ran_green(candidate)
        dist = candidate.artifact("release-dist", tmp_path / "dist-rc")
        manifest = read_manifest(dist / "manifest.json")
        assert manifest is not None
        [released] = [a for a in manifest.artifacts if a.package_type == "wheel"]
        assert released.version == "0.4.0", released.version
        test_index = f"{devpi.url}/fixture/test-cpu/+simple/"
        assert pip_installed_sha(test_index, "fixpipe==0.4.0", tmp_path / "pip-test") == released.sha256
        promoted = run_shipyard("--root", repo, "--targets", targets, "promote", "0.4.0", "--from", "test",
                                "--to", "release", "--dist", dist, env=without_shipyard_settings(secrets), timeout=600)
        assert promoted.returncode == 0, promoted.stdout + promoted.stderr
        assert password not in promoted.stdout + promoted.stderr
        release_index = f"{devpi.url}/fixture/release-cpu/+simple/"
        assert pip_installed_sha(release_index, "fixpipe==0.4.0", tmp_path / "pip-release") == released.sha256
    for run in (broken, refused, fixed, candidate):
        assert all(r["result"] != NOT_RUNNABLE for r in run.jobs), run.table()
        # uv hardlinked shipyard's dependencies from a cache on the venv's file system: no job
        # unpacked every file and then copied it (steps.INSTALL_ENV)
        assert run.steps_printing("Failed to hardlink") == [], run.folder
        # every job on the runner installed the shipyard that generated the workflows, from the
        # index; the container jobs ran it from the Linux job image the plan job made of it
        installed = {job.split(" (")[0] for job, step in run.steps_printing(f" + shipyard=={shipyard.__version__}")
                     if step.startswith(f"Install shipyard=={shipyard.__version__}")}  # the log's name, less its (…)
        job_image = read_log(run.folder / "act.log.jsonl").outputs["plan"]["linux_job_image"]
        in_image = {r["name"] for r in run.jobs if r["container"] == job_image}
        assert in_image == {JOBS[1], "manifest"} and installed == {"plan", "publish"}, (installed, run.table())
        assert sorted((job.split(" (")[0], step) for job, step in run.steps_printing(
            f"shipyard {shipyard.__version__}")) == [
            (name, "shipyard, from the Linux job image") for name in sorted(in_image)], run.folder
    assert not list(repo.rglob("shipyard")) and not (repo / "ci").exists()  # a user's repository


def _served(devpi_url: str, index: str, project: str) -> dict[str, str]:
    """{file name: sha256} of `project` on a devpi index, as its JSON API lists them."""
    import requests

    response = requests.get(f"{devpi_url}/{index}/{project}", headers={"Accept": "application/json"}, timeout=30)
    if response.status_code == 404:
        return {}
    response.raise_for_status()
    out = {}
    for version in response.json()["result"].values():
        for link in version.get("+links", []):
            if link.get("rel") == "releasefile":
                out[link["href"].rsplit("/", 1)[-1].split("#")[0]] = link.get("hash_spec", "")
    return out
