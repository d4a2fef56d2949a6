"""The lanes of a CUDA version no runner can install (10.2): a builder image made by the job itself.

NVIDIA removed its CUDA 10.2 devel image from Docker Hub. The Dockerfile in shipyard's package
data (resources/docker/<folder>/, runners.CUDA_BUILDER_IMAGES) rebuilds it from NVIDIA's archived
installer. The job restores the saved image from actions/cache under a key made of the
Dockerfile's sha256 (and tags it with it), builds and saves it only on a miss, then runs the build
step in it with `docker run`: the image's glibc is too old for the Node 20 that actions run on.
"""

from __future__ import annotations

from importlib import resources

from shipyard.ci.actions import uses
from shipyard.ci.jobs import Lane
from shipyard.ci.runners import CUDA_BUILDER_IMAGES
from shipyard.ci.steps import (
    MATRIX_ENV,
    SHIPYARD_SOURCE,
    SHIPYARD_SOURCE_ARGS,
    Job,
    Step,
    build_cache,
    build_upload_and_judge,
    checkout,
    for_job,
    host_tools,
    shipyard_source_env,
    signing_env,
    tools_python,
)
from shipyard.errors import SpecError
from shipyard.plumbing.hashing import sha256_hex
from shipyard.release.spec import Spec

BUILDER_REPOSITORY = "shipyard/cuda-builder"
SAVED_IMAGE = ".shipyard/builder-image/image.tar"


def builder_dockerfile(cuda: str) -> str:
    """The builder's Dockerfile, from shipyard's package data: a user's checkout holds no shipyard
    source, so the job prints it (`shipyard ci builder-dockerfile`) and builds with no context
    (it copies nothing in)."""
    return resources.files("shipyard.resources").joinpath("docker", CUDA_BUILDER_IMAGES[cuda], "Dockerfile").read_text()


def builder_dockerfile_sha256(cuda: str) -> str:
    return sha256_hex(builder_dockerfile(cuda).encode())


def builder_image_tag(cuda: str) -> str:
    """`shipyard/cuda-builder:<cuda>-<12 hex of the Dockerfile's sha256>`: a new Dockerfile is a new image."""
    return f"{BUILDER_REPOSITORY}:{cuda}-{builder_dockerfile_sha256(cuda)[:12]}"


def _builder_steps(cuda: str) -> list[Step]:
    env = {"TOOLKIT_IMAGE": builder_image_tag(cuda), "CUDA_VERSION": cuda, "SAVED_IMAGE": SAVED_IMAGE}
    return [
        {"name": f"CUDA {cuda} builder image (cached by its Dockerfile's sha256)", "id": "builder-image",
         "uses": uses("actions/cache"),
         "with": {"path": SAVED_IMAGE, "key": f"cuda-builder-{cuda}-{builder_dockerfile_sha256(cuda)}"}},
        {"name": f"Load the cached CUDA {cuda} builder image", "if": "steps.builder-image.outputs.cache-hit == 'true'",
         "env": env, "run": "docker load -i \"$SAVED_IMAGE\"\n"},
        {"name": f"Build the CUDA {cuda} builder image from NVIDIA's archived installer",
         "if": "steps.builder-image.outputs.cache-hit != 'true'", "env": env,
         "run": "shipyard ci builder-dockerfile \"$CUDA_VERSION\" | docker build --pull --tag \"$TOOLKIT_IMAGE\" -\n"
                "mkdir -p \"$(dirname \"$SAVED_IMAGE\")\"\n"
                "docker save -o \"$SAVED_IMAGE\" \"$TOOLKIT_IMAGE\"\n"},
    ]


def cuda_builder_lane(spec: Spec, lane: Lane, command: str) -> Job:
    """Every job of the lane builds in the builder image of its CUDA version (one per lane)."""
    versions = sorted({job.cuda for job in lane.jobs})
    if len(versions) != 1:
        raise SpecError(f"lane {lane.job_id}: its jobs need different builder images (CUDA {', '.join(versions)}); "
                            f"give each CUDA version of shipyard.ci.runners.CUDA_BUILDER_IMAGES its own lane")
    cuda = versions[0]
    signing = signing_env(spec)
    passed = "".join(f" -e {name}" for name in signing)  # by name: the value never is on a command line
    run = ("# The image's glibc (2.27) is too old for the actions' Node 20: only this step runs in it.\n"
           "# The whole checkout at /work (a release folder below its top reaches the projects beside it),\n"
           "# the step's own folder as the working directory.\n"
           "docker run --rm -v \"$GITHUB_WORKSPACE:/work\" -w \"/work${PWD#\"$GITHUB_WORKSPACE\"}\" \\\n"
           "  -e VARIANT -e COMPONENTS -e PYTHONS -e SHIPYARD_CHANNEL"
           " -e SHIPYARD_REQUIREMENT -e SHIPYARD_INDEX_URL -e SHIPYARD_WHEEL_URL"
           f"{passed} \\\n"
           "  -e OWNER=\"$(id -u):$(id -g)\" \\\n"
           "  -e CUDA_HOME=/usr/local/cuda -e HOME=/work/.home \"$TOOLKIT_IMAGE\" bash -euo pipefail -c '\n"
           "  apt-get update -qq\n"
           "  apt-get install -y -qq --no-install-recommends ca-certificates git g++ libpng-dev libjpeg-turbo8-dev \\\n"
           "    >/dev/null\n"
           "  trap \"chown -R $OWNER /work\" EXIT  # the runner (not root) cleans the workspace up\n"
           "  # The checkout belongs to the runner user, not root: git (the build records the commit)\n"
           "  # refuses a repository of another owner unless told it is safe.\n"
           "  git config --global --add safe.directory /work\n"
           "  .venv-host/bin/uv venv --python " + tools_python(spec.release) + " .venv-image\n"
           + "".join(f"  {line}\n" for line in SHIPYARD_SOURCE.splitlines()) +
           f"  .venv-host/bin/uv pip install --python .venv-image {SHIPYARD_SOURCE_ARGS} cmake ninja\n"
           "  export PATH=\"$PWD/.venv-image/bin:$HOME/.local/bin:$PATH\"\n"
           "  shipyard ci pythons $PYTHONS\n"
           + "".join(f"  {line}\n" for line in for_job(command).splitlines()) +
           "'\n")
    steps = [checkout(), *host_tools(spec),
             {"name": "uv for the builder image", "run": "mkdir -p .venv-host/bin && cp \"$(command -v uv || "
              "echo .venv/bin/uv)\" .venv-host/bin/uv\n"},
             *build_cache(), *_builder_steps(cuda),
             *build_upload_and_judge(f"Build and test every Python in the CUDA {cuda} builder image",
                                     {**MATRIX_ENV, "PYTHONS": "${{ matrix.pythons }}",
                                      "TOOLKIT_IMAGE": builder_image_tag(cuda), **shipyard_source_env(),
                                      **signing}, run)]
    return {"steps": steps}
