"""The release pipeline end to end on ember's own release: the committed nightly workflow under
`shipyard ci run`, narrowed to cpu, Python 3.11 and the wheel, conda and docker lanes, every
Linux job on bare runners built here,
publishing into a real devpi server, a static wheel tree, a served conda channel and a docker
registry; then a user installs from each (pip, a conda solve, `docker pull`) and gets the bytes
the run built.

The one fixture commit on a clone of this checkout points release.yaml's targets at this test's
servers, its conda.channels at the bootstrap channel, served over HTTP, standing in for
conda-forge, and its images' bases at stand-ins made here and held by the engine under names of
this test (the docker job's pull step finds them, as a hosted runner pulls Docker Hub's; this
machine reaches neither, and the suite's other image builds never see them). The small fixture
release's nightlies, release candidate and failing feature are in test_pipeline_fixture.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import docker
import pytest
import requests
from support.pipeline_run import NOT_RUNNABLE, PIPELINE_IMAGES, ember_pipeline, run_pipeline
from support.publish_servers import pip_installed_sha
from support.user_installs import forget_pulls, registry_serves_every_blob, user_pulls

from shipyard.cli import main
from shipyard.conda.bootstrap import BootstrapChannel
from shipyard.conda.solve_install import InstallRequest, solve_and_install
from shipyard.local_ci.act_report import read_log
from shipyard.plumbing.hashing import sha256_of
from shipyard.record.manifest import read_manifest
from shipyard.supply.keys import generate_key

# A whole release pipeline under act: 620 s on 2 cores with the Linux job image (2026-12-06), 1070 s
# before it. It runs in `nox -s nightly-ember`, not in `nox -s tests`: .ci/run's 30 minutes on 2 cores
# do not hold it beside the rest of the suite.
pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.ember_nightly, pytest.mark.timeout(2400)]

COMMITTED = "2026-12-01T12:00:00+00:00"
VERSION = "1.7.0.dev20261201"  # the nightly's development version: its commit's date
# Every job of the narrowed nightly that runs here, and what it is.
RUNS_HERE = {
    "plan": "runner", "wheel-linux wheel-ember-cpu-linux-x86_64": "job image",
    "wheel-linux wheel-embervision-cpu-linux-x86_64": "job image",
    "wheel-pure wheel-pure-cpu-linux-x86_64-any": "job image",
    "conda-linux conda-ember-cpu-linux-x86_64": "job image",
    "conda-linux conda-embervision-cpu-linux-x86_64": "job image",
    "conda-pure conda-pure-cpu-linux-x86_64-any": "job image",
    f"docker docker-{PIPELINE_IMAGES}-cpu-linux-x86_64": "runner",
    "manifest": "job image", "publish": "runner",
}


def test_embers_nightly_runs_green_under_act_and_users_install_what_it_published(
        tmp_path: Path, docker_engine: None, conda_bootstrap: BootstrapChannel) -> None:
    client = docker.from_env(timeout=600)
    with ember_pipeline(tmp_path, conda_bootstrap.path, COMMITTED) as pipeline:
        site, registry, conda_forge_stand_in = pipeline.site, pipeline.registry, pipeline.conda_forge_stand_in
        # The chain the pipeline must finish: every lane but mobile, which ember-lite's own tests
        # prove (test_mobile_release.py); it would add its cross builds under qemu to every run.
        # The provenance key from the repository secret the build steps name, as on GitHub (the
        # checkout holds no key file): every artifact comes out signed with it.
        private, public, _ = generate_key(tmp_path / "ci-secret" / "key.pem")
        secrets = {**pipeline.secrets, "SHIPYARD_SIGNING_KEY": private.read_text()}
        # linux-x86_64 only: the manylinux2014 job (another build of ember, with zig's clang) is
        # the same wheel job on another promise, which nox -s build-cpu and test_manylinux2014_zig.py prove.
        run = run_pipeline(pipeline.repo, tmp_path / "run", secrets, "--workflow", "nightly",
                           "--variant", "cpu", "--python", "3.11", "--package-type", "wheel,conda,docker",
                           "--platform", "linux-x86_64")
        assert run.returncode == 0, run.output[-5000:] + run.failed_jobs_log()
        assert run.ran() == dict.fromkeys(RUNS_HERE, "success"), run.table()
        # every container job in the one Linux job image the plan job built (or found) in the engine
        outputs = read_log(run.folder / "act.log.jsonl").outputs["plan"]
        job_image = outputs["linux_job_image"]
        assert job_image.startswith("shipyard/act-job:"), job_image
        for row in run.jobs:
            if row["name"] in RUNS_HERE:
                assert (row["container"] == job_image) == (RUNS_HERE[row["name"]] == "job image"), row
        foreign = [row for row in run.jobs if row["result"] == NOT_RUNNABLE]
        assert foreign and all("-windows-" in r["name"] or "-macos-" in r["name"] for r in foreign), run.table()
        # the table as printed, and the plan job's own narrowing (its inputs, not the runner's)
        printed = run.output.split("run folder:")[0].splitlines()
        assert printed[0].split() == ["job", "container", "seconds", "result"]
        plan_row = next(line.split() for line in printed if line.startswith("plan "))
        assert plan_row[1].startswith("shipyard/act-runner:") and int(plan_row[2]) > 0 and plan_row[3] == "success"
        wheel_linux = json.loads(outputs["wheel_linux"])["include"]
        assert {e["variant"] for e in wheel_linux} == {"cpu"} and {e["pythons"] for e in wheel_linux} == {"3.11"}
        assert json.loads(outputs["wheel_linux_cuda_image"]) == {"include": []}
        assert json.loads(outputs["wheel_windows"]) == {"include": []}  # --platform: what act runs here
        assert f"conda.channels: {conda_forge_stand_in}" in run.output
        # uv hardlinked from caches on its venvs' file system, in every job: shipyard's install
        # (steps.INSTALL_ENV) and the build jobs' test venvs (their state folder's cache)
        assert run.steps_printing("Failed to hardlink") == [], run.folder

        dist = run.artifact("release-dist", tmp_path / "release-dist")
        manifest = read_manifest(dist / "manifest.json")
        assert manifest is not None and manifest.version == VERSION, manifest and manifest.version
        wheels = {a.component: a for a in manifest.artifacts if a.package_type == "wheel"}
        conda = {a.name.rsplit("-", 2)[0]: a for a in manifest.artifacts if a.package_type == "conda"}
        [image] = [a for a in manifest.artifacts if a.package_type == "docker" and a.name.endswith("-runtime")]
        assert set(wheels) == {"ember", "embervision", "emberaudio", "emberelastic", "ember-variant-provider"}, \
            sorted(wheels)
        assert {"ember", "libember", "embervision", "emberaudio", "emberelastic"} <= set(conda), sorted(conda)
        assert not any(a.package_type == "mobile" for a in manifest.artifacts)  # narrowed out
        # merged from every fragment, each file as its record says, signed with the secret's key
        for record in manifest.artifacts:
            if record.package_type != "docker":  # an image is no file: its sha256 is the image id
                assert sha256_of(dist / record.path) == record.sha256, record.name
        # every feature the jobs tested passed, beta ones too: the job containers hold only what
        # ci/bootstrap.sh installs, and a test that needs more fails there and nowhere else (the
        # C++ API's build used make, which a bare container lacks), published marked
        failed = {(record.cell_id, feature): result.get("summary")
                  for record in manifest.artifacts if record.tests
                  for feature, result in record.tests["features"].items() if result["result"] == "failed"}
        assert failed == {}, failed
        for component in ("ember", "emberaudio"):
            assert main(["verify", str(dist / wheels[component].path), "--public-key", str(public)]) == 0
        index = (dist / "whl" / "cpu" / "index.json").read_text()
        assert '"name": "ember"' in index and '"name": "emberaudio"' in index
        # the release manager's report and notes, from the manifest job
        report = run.artifact("release-report", tmp_path / "release-report")
        assert 'data-state="passed"' in (report / "report" / "index.html").read_text()
        assert "## Stable" in (report / "RELEASE_NOTES.md").read_text()

        # pip, from devpi and from the static tree: the wheels the run built
        for component in ("ember", "embervision", "emberaudio"):
            artifact = wheels[component]
            requirement = f"{component}=={artifact.version}" + ("+cpu" if "+cpu" in artifact.name else "")
            assert artifact.version == VERSION, artifact.name
            assert pip_installed_sha(f"{site.devpi.url}/ember/nightly-cpu/+simple/", requirement,
                                     tmp_path / "pip" / component) == artifact.sha256
            assert pip_installed_sha(f"{site.tree_url}nightly/cpu/", requirement,
                                     tmp_path / "tree" / component) == artifact.sha256
        # the PEP 825 variants index the manifest job made, served by the static tree beside the
        # per-variant indexes: ember's cpu wheel as the variant `cpu`, the same bytes repacked
        served = requests.get(f"{site.tree_url}nightly/variants/ember/ember-{VERSION}-variants.json", timeout=30)
        assert served.status_code == 200, served.status_code
        assert served.json()["variants"] == {"cpu": {"ember": {"platform": ["cpu"]}}}, served.text
        # a conda solve from the published channel (its dependencies from the stand-in)
        result = solve_and_install(InstallRequest(
            channels=[f"{site.conda_url}conda/nightly/", conda_bootstrap.url()],
            specs=["python 3.11.*", "ember * *_cpu_*", "emberaudio"], prefix=str(tmp_path / "prefix"),
            cache_dir=str(tmp_path / "conda-cache")))
        assert result.error is None and result.unsatisfiable is None, result
        for name in ("ember", "libember", "emberaudio"):
            installed = result.named(name)
            assert installed is not None and installed.sha256 == conda[name].sha256, (name, installed)
        # docker pull: the image the run built, holding the wheel the run built
        try:
            digest = user_pulls(client, registry, image, "nightly", dist / wheels["ember"].path)
            registry_serves_every_blob(registry, PIPELINE_IMAGES, digest)
        finally:
            forget_pulls(client, registry)
        # The docker job built in this machine's engine under the run's own repository name: no tag
        # of the suite's images (ember:1.7.0-cpu-runtime, which test_docker_image.py reads while this
        # runs) names an image of this run.
        built = client.images.list(filters={"label": f"org.opencontainers.image.revision={pipeline.revision}"})
        assert built and all(tag.startswith(f"{PIPELINE_IMAGES}:") for b in built for tag in b.tags), \
            [b.tags for b in built]

