"""The Linux lanes: wheels and conda packages in the Debian 12 builder container, and the mobile
runtime on the runner itself."""

from __future__ import annotations

from shipyard.ci.jobs import Lane, lanes
from shipyard.ci.linux_job_image import JOB_CONTAINER, job_image_step
from shipyard.ci.steps import (
    MATRIX_ENV,
    PYTHONS_ENV,
    Job,
    bootstrap_set,
    build_upload_and_judge,
    checkout,
    download_fragments,
    for_job,
    host_tools,
    pythons_and_cache,
    signing_env,
)
from shipyard.release.kinds import WHEEL
from shipyard.release.spec import Spec


def linux_lane(spec: Spec, lane: Lane, command: str) -> Job:
    """Wheels or conda packages in the Linux job image: Debian 12 with shipyard, every container
    lane's apt packages (`shipyard ci bootstrap <lane>`) and the toolchains, made once by the plan
    job. Conda packages solve from release.yaml's conda.channels (conda-forge), never from the
    bootstrap channel, which needs this host's pyenv Pythons."""
    bootstrap_set(lane.name)  # the image installs the lane's apt set: a lane without one is refused here
    steps = [checkout(), job_image_step(), *pythons_and_cache()]
    # A pure lane is tested against its builder's native packages, where the release has any (a
    # release of pure components only has nothing to download, and its merge would find nothing).
    natives = [other for other in lanes(spec.release) if other.name == f"{lane.kind}-linux"]
    if lane.name.endswith("-pure") and natives:
        first = lane.jobs[0]
        kind = lane.kind
        # A component tag of a pure component that needs no native one plans no native job.
        steps += download_fragments(f"fragment-{kind}-*-{first.variant_tag}-{first.builder}",
                                    f"the {first.variant_tag} {first.builder} {kind} fragments it is tested against",
                                    when=f"fromJSON(needs.plan.outputs.{natives[0].output}).include[0] != null")
    if any(job.cuda for job in lane.jobs):
        # Only a CUDA job installs its toolkit's host compiler (nvcc 11.8 takes gcc <= 11): the
        # lane's apt set has the builder image's own g++ alone.
        install = "apt-get install -y -qq --no-install-recommends \"$HOST_CXX\" >/dev/null"
        steps.append({"name": "CUDA toolkit (its host compiler from apt, shipyard toolchain install)",
                      "if": "matrix.cuda != ''",
                      "env": {"VARIANT": "${{ matrix.variant }}", "HOST_CXX": "${{ matrix.cuda_host_cxx }}",
                              "DEBIAN_FRONTEND": "noninteractive"},
                      "run": "if ! command -v \"$HOST_CXX\" >/dev/null; then\n"
                             f"  {install} || {{ apt-get update -qq && {install}; }}\n"
                             "fi\n"
                             "shipyard toolchain install \"$VARIANT\"\n"})
    env = {**MATRIX_ENV, **PYTHONS_ENV, **signing_env(spec)}
    if lane.kind == WHEEL.name:
        # `shipyard build` builds every platform of the runner's OS and architecture (linux-x86_64 and
        # linux-x86_64-manylinux2014): each job only its own (a pure job: the platform it is tested on),
        # so that no two jobs build, and upload, the same cells.
        env["BUILDER"] = "${{ matrix.builder }}"
        command = command.rstrip() + " --platform \"$BUILDER\""
    steps += build_upload_and_judge("Build and test every Python", env, for_job(command))
    return {"container": JOB_CONTAINER, "steps": steps}


def mobile_lane(spec: Spec, lane: Lane, command: str) -> Job:
    """The mobile runtime: the runner's Android NDK, and the cross compilers and emulators that
    release.yaml's mobile_targets name (their apt_packages)."""
    cross = sorted({p for target in spec.release.mobile_targets.values() for p in target.apt_packages})
    steps = [checkout(), *host_tools(spec),
             {"name": "Android NDK and cross compilers",
              "run": "echo \"ANDROID_NDK_HOME=$ANDROID_NDK_LATEST_HOME\" >> \"$GITHUB_ENV\"\n"
                     "sudo apt-get update -qq\n"
                     f"sudo apt-get install -y -qq --no-install-recommends {' '.join(['cmake', 'ninja-build', *cross])}"
                     " >/dev/null\n"},
             *build_upload_and_judge("Build and test every mobile target", signing_env(spec), command)]
    return {"steps": steps}
