"""Every Linux job of ember's release under act: the committed release workflow for tag
v1.7.0-rc1 (channel test) under `shipyard ci run`, with every Linux lane and variant that can run
here (cpu, cu118, cu124, cu130; wheel, conda, docker, mobile; both Linux x86_64 platforms),
publishing into a real devpi server, a pypiserver (TestPyPI's stand-in), a static wheel tree, a
served conda channel and a docker registry; then a user installs from each and gets the bytes the
run built.

What cannot run here, and why (the test prints it beside the job table):
- the CUDA 10.2 lanes (`*-linux-cuda-image`): their builder image is made from NVIDIA's archived
  installer, which this machine cannot reach; the run narrows the plan to the other variants, so
  the manifest job finishes a release of what ran (as `--platform` does for Windows and macOS);
- Python 3.11 only: a job container installs every other Python with `uv python install`, from
  GitHub's python-build-standalone releases, which this machine cannot reach; the conda
  bootstrap channel (conda-forge's stand-in) holds Python 3.11;
- the mobile job's Android targets: GitHub's Ubuntu runners carry the NDK ($ANDROID_NDK_LATEST_HOME);
  act's runner image has none and Google's download site is out of reach, so the job builds and
  tests the host and qemu targets and records the Android ones as unavailable.

Too long for .ci/run (about 22 minutes of CUDA and conda builds on 2 cores): `nox -s pipeline-linux` runs it, with -s,
so the job table and the wall time are printed.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from secrets import token_urlsafe

import docker
import pytest
from support.pipeline_run import NOT_RUNNABLE, commit, ember_pipeline, regenerate_workflows, run_pipeline
from support.publish_servers import pip_installed_sha, pypi_server
from support.user_installs import forget_pulls, registry_serves_every_blob, user_pulls

from shipyard.conda.bootstrap import BootstrapChannel
from shipyard.conda.solve_install import InstallRequest, solve_and_install
from shipyard.plumbing.hashing import sha256_of
from shipyard.record.manifest import read_manifest
from shipyard.supply.keys import generate_key

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.pipeline_linux, pytest.mark.timeout(4 * 3600)]

COMMITTED = "2026-12-01T12:00:00+00:00"
TAG = "v1.7.0-rc1"
VERSION = "1.7.0"  # a release candidate publishes release.yaml's version to the test channel
VARIANTS = ("cpu", "cuda11", "cuda12", "cuda13")  # every variant but cuda10.2 (the module's docstring)
VARIANT_TAGS = ("cpu", "cu118", "cu124", "cu130")
NOT_HERE = {  # beyond the table's not-runnable rows (Windows, macOS, CUDA 10.2)
    "Pythons other than 3.11": "uv python install downloads from GitHub, which this machine cannot reach",
    "mobile: the Android targets": "no Android NDK in act's runner image; Google's download site is out of reach",
}


def test_every_linux_job_of_the_release_runs_green_under_act_and_users_install_what_it_published(
        tmp_path: Path, docker_engine: None, conda_bootstrap: BootstrapChannel) -> None:
    client = docker.from_env(timeout=600)
    with ember_pipeline(tmp_path, conda_bootstrap.path, COMMITTED) as pipeline, \
            pypi_server(tmp_path / "testpypi") as testpypi:
        site, registry = pipeline.site, pipeline.registry
        # TestPyPI's stand-in: the test channel's pypi target, as the committed file has it, at
        # this test's pypiserver
        testpypi_password = token_urlsafe(18)
        testpypi.add_user("ember-test", testpypi_password)
        release = pipeline.repo / "release.yaml"
        text = release.read_text()
        for old, new in (("url: http://127.0.0.1:8084/\n", f"url: {testpypi.url}\n"),
                         ("index_url: http://127.0.0.1:8084/simple/\n", f"index_url: {testpypi.simple}\n")):
            assert old in text, f"release.yaml no longer holds {old!r}"
            text = text.replace(old, new)
        release.write_text(text)
        regenerate_workflows(pipeline.repo)
        commit(pipeline.repo, "fixture: the test channel's pypi target at this run's pypiserver", COMMITTED)
        subprocess.run(["git", "tag", TAG], cwd=pipeline.repo, check=True, timeout=60)
        private, public, _ = generate_key(tmp_path / "ci-secret" / "key.pem")
        secrets = {**pipeline.secrets, "SHIPYARD_SIGNING_KEY": private.read_text(),
                   "SHIPYARD_TESTPYPI_USERNAME": "ember-test", "SHIPYARD_TESTPYPI_PASSWORD": testpypi_password}

        start = time.monotonic()
        # no --variant: `ci run` plans every variant but CUDA 10.2, whose builder image the engine lacks
        run = run_pipeline(pipeline.repo, tmp_path / "run", secrets, "--workflow", "release", "--channel", "test",
                           "--ref", f"refs/tags/{TAG}", "--python", "3.11", timeout=4 * 3600)
        wall = time.monotonic() - start
        print(f"\npipeline-linux: `shipyard ci run --workflow release --channel test --ref refs/tags/{TAG}` "
              f"took {wall:.0f} s\n{run.table()}\nnot runnable here, and why:")
        for what, why in NOT_HERE.items():
            print(f"  {what}: {why}")
        assert run.returncode == 0, run.output[-5000:] + run.failed_jobs_log()
        ran = run.ran()
        assert ran and set(ran.values()) == {"success"}, run.table()
        # every Linux lane of the release ran, each variant of it
        for lane in ("wheel-linux", "conda-linux", "wheel-pure", "conda-pure", "mobile", "docker"):
            assert any(name.startswith(f"{lane} ") for name in ran), (lane, run.table())
        for tag in VARIANT_TAGS:
            assert {f"wheel-linux wheel-ember-{tag}-linux-x86_64", f"conda-linux conda-ember-{tag}-linux-x86_64",
                    f"wheel-linux wheel-embervision-{tag}-linux-x86_64"} <= set(ran), (tag, run.table())
        assert "wheel-linux wheel-ember-cpu-linux-x86_64-manylinux2014" in ran, run.table()
        # the jobs act skipped: the Windows and macOS ones (left out by the run's --platform) and
        # CUDA 10.2's (left out of the plan: its builder image)
        skipped = [r["name"] for r in run.jobs if r["result"] == NOT_RUNNABLE]
        assert all("-windows-" in name or "-macos-" in name or "-cu102-" in name for name in skipped), run.table()
        assert {name for name in skipped if "-cu102-" in name} == {
            f"{kind}-linux-cuda-image {kind}-{component}-cu102-linux-x86_64"
            for kind in ("wheel", "conda") for component in ("ember", "embervision")}, run.table()
        assert "leaving cuda10.2 out of the plan" in run.output

        dist = run.artifact("release-dist", tmp_path / "release-dist")
        manifest = read_manifest(dist / "manifest.json")
        assert manifest is not None and manifest.version == VERSION, manifest and manifest.version
        for record in manifest.artifacts:
            if record.package_type != "docker":  # an image is no file: its sha256 is the image id
                assert sha256_of(dist / record.path) == record.sha256, record.name
        failed = {(record.cell_id, feature): result.get("summary")
                  for record in manifest.artifacts if record.tests
                  for feature, result in record.tests.get("features", {}).items() if result["result"] == "failed"}
        assert failed == {}, failed
        assert any(a.package_type == "mobile" for a in manifest.artifacts), "no mobile artifact"

        # pip: every variant's ember and embervision from devpi's test indexes and the static tree's
        wheels = {(a.component, a.variant): a for a in manifest.artifacts
                  if a.package_type == "wheel" and a.platform == "linux-x86_64"}
        for variant, tag in zip(VARIANTS, VARIANT_TAGS, strict=True):
            for component in ("ember", "embervision"):
                artifact = wheels[(component, variant)]
                assert artifact.version == VERSION, artifact.name
                requirement = f"{component}=={VERSION}+{tag}"
                assert pip_installed_sha(f"{site.devpi.url}/ember/test-{tag}/+simple/", requirement,
                                         tmp_path / "pip" / component / tag) == artifact.sha256
                assert pip_installed_sha(f"{site.tree_url}test/{tag}/", requirement,
                                         tmp_path / "tree" / component / tag) == artifact.sha256
        # TestPyPI's stand-in: the cpu wheels under the plain version, as PyPI refuses +cpu; of ember's
        # two cp311 wheels (manylinux_2_31, manylinux2014) pip takes the newer glibc's on this glibc 2.36
        served = testpypi.files()
        newer_glibc = f"ember-{VERSION}-cp311-cp311-manylinux_2_31_x86_64.whl"
        assert sorted(n for n in served if n.startswith(f"ember-{VERSION}-cp311-")) == [
            f"ember-{VERSION}-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", newer_glibc], sorted(served)
        assert pip_installed_sha(testpypi.simple, f"ember=={VERSION}", tmp_path / "testpypi-pip") == served[newer_glibc]

        # conda: a solve from the published test channel, cpu and CUDA 11.8 builds of ember
        conda = {(a.name.rsplit("-", 2)[0], a.variant): a for a in manifest.artifacts if a.package_type == "conda"}
        for variant, tag in (("cpu", "cpu"), ("cuda11", "cu118")):
            result = solve_and_install(InstallRequest(
                channels=[f"{site.conda_url}conda/test/", pipeline.conda_forge_stand_in],
                specs=["python 3.11.*", f"ember * *_{tag}_*"], prefix=str(tmp_path / f"prefix-{tag}"),
                cache_dir=str(tmp_path / "conda-cache")))
            assert result.error is None and result.unsatisfiable is None, (tag, result)
            installed = result.named("ember")
            assert installed is not None and installed.sha256 == conda[("ember", variant)].sha256, (tag, installed)

        # docker pull: the cpu and the CUDA 11 runtime images, each holding the ember wheel the run built
        images = {a.variant: a for a in manifest.artifacts
                  if a.package_type == "docker" and a.name.endswith("-runtime")}
        assert set(images) == {"cpu", "cuda11"}, sorted(images)
        try:
            for variant, image in images.items():
                digest = user_pulls(client, registry, image, "test", dist / wheels[("ember", variant)].path)
                registry_serves_every_blob(registry, pipeline.repository, digest)
        finally:
            forget_pulls(client, registry)
