"""The Linux job image: what every Linux container job of a release needs, built once per content.

A bare `debian:bookworm` job spent most of its time setting itself up: apt-get for git and Python,
a venv with shipyard in it, the lane's apt packages, a CUDA job's host compiler, zig's libc++ for
the manylinux2014 wheels. Every job paid that again. The plan job now builds one image that
holds all of it (`shipyard ci linux-job-image`), named by the sha256 of its Dockerfile and of
where shipyard comes from, and every Linux container lane starts in it:
- on GitHub the image goes to a registry (GHCR by default, with the job's GITHUB_TOKEN) and the
  jobs pull it by digest; a later run whose Dockerfile is the same finds it there and builds
  nothing;
- with `SHIPYARD_JOB_IMAGE_PUSH=false` (a repository variable) it stays in the Docker engine the
  plan job talks to, which the jobs must share: runners on one machine, and `shipyard ci run`.
What stays in the jobs is what differs between them: their CUDA toolkit, their Pythons, their
build cache.
"""

from __future__ import annotations

import importlib.metadata
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from shipyard.ci.jobs import Lane, lanes
from shipyard.ci.runners import CUDA_BUILDER_IMAGES, LINUX_BUILDER_IMAGE
from shipyard.ci.steps import SHIPYARD_SOURCE, SHIPYARD_SOURCE_ARGS, Step, shipyard_requirement, uv_requirement
from shipyard.errors import UsageError
from shipyard.host import docker_base
from shipyard.plumbing import command
from shipyard.plumbing.hashing import sha256_hex
from shipyard.plumbing.progress import Progress
from shipyard.release.build_routes import route_for_glibc
from shipyard.release.kinds import KINDS
from shipyard.release.spec import Spec

# Where the image keeps shipyard and what `shipyard toolchain install` put there: not under $HOME,
# which GitHub points at a mount of its own (/github/home) in a container job.
VENV = "/opt/shipyard/venv"
CACHE = "/opt/shipyard/cache"
# The repository variables the plan job's step reads (Settings → Variables): where the image goes
# (default: GHCR, the repository's own packages) and whether it is pushed there at all.
REPOSITORY_VARIABLE = "SHIPYARD_JOB_IMAGE_REPOSITORY"
PUSH_VARIABLE = "SHIPYARD_JOB_IMAGE_PUSH"
# The plan job's output the container lanes start in.
OUTPUT = "linux_job_image"
_LABEL = "org.shipyard.linux-job-image.key"
# A job's `container:` in it: found in the engine the runners share, or pulled from GHCR. No
# `credentials:`: a hosted runner pulls a ghcr.io image with the job's own token when none are given
# (its `packages: read`; actions/runner's ContainerRegistryManager.UpdateRegistryAuthForGitHubToken),
# and act refuses empty ones.
JOB_CONTAINER = {"image": f"${{{{ needs.plan.outputs.{OUTPUT} }}}}"}


def job_image_step() -> Step:
    """A job's first step after the checkout in the Linux job image: shipyard's venv on PATH, and
    the checkout trusted by git (it belongs to the runner's user, not the container's root)."""
    return {"name": "shipyard, from the Linux job image",
            "env": {"SHIPYARD_BIN": f"{VENV}/bin"},
            "run": "git config --global --add safe.directory \"$GITHUB_WORKSPACE\"\n"
                   "echo \"$SHIPYARD_BIN\" >> \"$GITHUB_PATH\"\n"
                   "echo \"$HOME/.local/bin\" >> \"$GITHUB_PATH\"\n"
                   "\"$SHIPYARD_BIN/shipyard\" --version\n"}


def container_lanes(spec: Spec) -> list[Lane]:
    """The Linux lanes whose jobs run in a container (ci/linux_lanes.py's linux_lane): every one on
    Linux but the mobile and docker lanes (on the runner) and the CUDA builder-image lanes (in the
    image of their toolkit)."""
    return [lane for lane in lanes(spec.release)
            if lane.os == "linux" and len(KINDS[lane.kind].ci_lanes) > 1 and not lane.name.endswith("-cuda-image")]


def toolchain_routes(spec: Spec) -> list[str]:
    """`shipyard toolchain install` names of the glibc routes the container lanes' platforms need."""
    promises = {spec.release.platforms[job.platform].promised_glibc for lane in container_lanes(spec)
                for job in lane.jobs if KINDS[job.kind].keeps_glibc_promise and job.platform in spec.release.platforms}
    return sorted({route.name for glibc in promises if glibc and (route := route_for_glibc(glibc))})


def _host_compilers(spec: Spec) -> list[str]:
    """The CUDA host compilers (Debian packages) of the container lanes' CUDA jobs."""
    return sorted({job.cuda_host_cxx for lane in container_lanes(spec) for job in lane.jobs
                   if job.cuda and job.cuda not in CUDA_BUILDER_IMAGES})


def dockerfile(spec: Spec) -> str:
    """The image's Dockerfile, from release.yaml and this shipyard: it copies nothing in (built
    with an empty context), and SHIPYARD_INDEX_URL and SHIPYARD_WHEEL_URL (build arguments, from
    the repository variables of those names) say where shipyard comes from."""
    apt = "apt-get install -y -qq --no-install-recommends"
    lines = [
        "# shipyard's Linux job image (shipyard ci linux-job-image): every Linux container job of this",
        "# release starts in it.",
        f"FROM {LINUX_BUILDER_IMAGE}",
        'SHELL ["/bin/bash", "-eo", "pipefail", "-c"]',
        f"ENV DEBIAN_FRONTEND=noninteractive SHIPYARD_CACHE={CACHE} PATH={VENV}/bin:$PATH",
        "# git for the checkout, Python for shipyard's venv",
        f"RUN apt-get update -qq && {apt} python3 python3-venv git ca-certificates >/dev/null",
        "ARG SHIPYARD_INDEX_URL=",
        "ARG SHIPYARD_WHEEL_URL=",
        "# Debian's python3 has no pip of its own: the venv's puts uv in, uv the rest",
        f"RUN python3 -m venv {VENV} \\",
        f" && {VENV}/bin/python -m pip install --quiet --disable-pip-version-check '{uv_requirement()}' \\",
        f" && SHIPYARD_REQUIREMENT='{shipyard_requirement()}' \\",
        " && " + SHIPYARD_SOURCE.strip().replace("\n", " \\\n ; ") + " \\",
        f" && UV_NO_CACHE=1 {VENV}/bin/uv pip install --quiet --python {VENV}/bin/python {SHIPYARD_SOURCE_ARGS}",
        "# every container lane's apt packages (ci_lane_packages.toml)",
        "RUN " + " \\\n && ".join(f"shipyard ci bootstrap {lane}" for lane in
                                    dict.fromkeys(lane.name for lane in container_lanes(spec))),
    ]
    if compilers := _host_compilers(spec):
        lines += ["# the host compilers of the CUDA jobs' toolkits (cuda_toolkits.toml)",
                  f"RUN {apt} {' '.join(compilers)} >/dev/null"]
    if routes := toolchain_routes(spec):
        lines += ["# the compilers that keep the older glibc promises (release/build_routes.py)",
                  "RUN " + " && ".join(f"shipyard toolchain install {name}" for name in routes)]
    return "\n".join(lines) + "\n"


def installed_shipyard() -> str:
    """The sha256 of every file of the shipyard running this, and of its metadata (its RECORD, less
    what each install writes of its own: scripts naming their venv, the installer's files). The
    image installs the same version from the same place as the plan job did, so this names the
    bytes the image holds, where a version or an index URL would not (a local index serves a new
    wheel of one version)."""
    record = importlib.metadata.distribution("shipyard").read_text("RECORD") or ""
    kept = [line for line in record.splitlines()
            if line.startswith("shipyard/") or line.split(",")[0].endswith((".dist-info/METADATA",
                                                                             ".dist-info/entry_points.txt"))]
    return "\n".join(sorted(kept)) or shipyard_requirement()


def image_key(text: str, shipyard_record: str) -> str:
    """16 hex of the sha256 of the Dockerfile and of the shipyard it installs: the image's tag."""
    return sha256_hex(json.dumps({"dockerfile": text, "shipyard": shipyard_record}).encode())[:16]


@dataclass(frozen=True)
class JobImageRequest:
    repository: str  # e.g. ghcr.io/owner/repo/shipyard-job
    push: bool
    index_url: str = ""
    wheel_url: str = ""

    def source(self) -> dict[str, str]:
        return {"SHIPYARD_INDEX_URL": self.index_url, "SHIPYARD_WHEEL_URL": self.wheel_url}


def default_repository(github_repository: str) -> str:
    """GHCR's package of the repository (owner/name, lower-cased as GHCR requires)."""
    if not github_repository or "/" not in github_repository:
        raise UsageError(f"ci linux-job-image: --repository: none given and GITHUB_REPOSITORY is not owner/name; "
                         f"set the repository variable {REPOSITORY_VARIABLE} (got {github_repository!r})")
    return f"ghcr.io/{github_repository.lower()}/shipyard-job"


def _docker(*args: str, timeout: float = 120, check: bool = True) -> command.Completed:
    return command.run(["docker", *args], timeout=timeout, check=check, what=f"docker {args[0]}")


def _remote_digest(ref: str) -> str | None:
    """The digest the registry holds `ref` under, or None when it holds no such tag."""
    done = _docker("manifest", "inspect", "--verbose", ref, check=False)
    if done.returncode != 0:
        return None
    found = json.loads(done.stdout)
    descriptor = (found[0] if isinstance(found, list) else found).get("Descriptor") or {}
    return descriptor.get("digest")


def _build(text: str, ref: str, key: str, request: JobImageRequest, progress: Progress) -> None:
    progress(f"building the Linux job image {ref}")
    with tempfile.TemporaryDirectory(prefix="shipyard-job-image-") as context:
        (Path(context) / "Dockerfile").write_text(text)
        # the host's network: an index on the runner's loopback (a local run's) is reachable
        docker_base.legacy_build(["--network", "host", "--label", f"{_LABEL}={key}",
                                  *(arg for name, value in request.source().items() if value
                                    for arg in ("--build-arg", f"{name}={value}")), context],
                                 ref, "the Linux job image", timeout=3600)


def ensure_job_image(spec: Spec, request: JobImageRequest, progress: Progress) -> str:
    """The image's reference for the jobs' `container.image`, built only when missing: by digest
    when pushed (`repository@sha256:…`), by its tag when it stays in the engine."""
    text = dockerfile(spec)
    key = image_key(text, installed_shipyard())
    ref = f"{request.repository}:{key}"
    if not request.push:
        if docker_base.image_labels(ref) is not None:
            progress(f"the Linux job image {ref} is in the engine: built by an earlier run")
        else:
            _build(text, ref, key, request, progress)
        return ref
    if (digest := _remote_digest(ref)) is not None:
        progress(f"the Linux job image {ref} is in the registry: built by an earlier run")
        return f"{request.repository}@{digest}"
    _build(text, ref, key, request, progress)
    _docker("push", "--quiet", ref, timeout=3600)
    [repo_digest] = [d for d in json.loads(_docker("image", "inspect", "--format", "{{json .RepoDigests}}", ref)
                                          .stdout) if d.startswith(request.repository + "@")]
    return repo_digest
