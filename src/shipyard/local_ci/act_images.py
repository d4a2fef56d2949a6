"""The bare images a local workflow run (`shipyard ci run`) starts its jobs in, built here.

Two kinds, both from shipyard's debootstrapped Debian base (host/docker_base.py), since no
registry can be pulled from:
- the runner image that the workflows' Linux `runs-on` labels map to: the base plus git, curl and
  the docker CLI (resources/act/Dockerfile.runner says why each);
- the job containers a workflow names (`container: debian:bookworm`): the debootstrapped base of
  that suite, the same Debian minbase the registry serves, built under the workflow's name.
Both end with one layer: the host's trust store and pip settings (act_host.py), because act gives
a workflow's job containers no mounts. Nothing else of this host is in them.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from shipyard.host import docker_base
from shipyard.local_ci.act_host import CA_VARIABLES, CONTAINER_CA, CONTAINER_HOST_DIR, CONTAINER_PIP_CONF, HostShare
from shipyard.plumbing.hashing import sha256_hex
from shipyard.plumbing.progress import Progress

RUNNER_REPOSITORY = "shipyard/act-runner"
RECIPE = resources.files("shipyard.resources").joinpath("act", "Dockerfile.runner")
_LABEL = "org.shipyard.act-runner.inputs"
_JOB_LABEL = "org.shipyard.act-job.inputs"
# The host share (act_host.py), the last layers of both kinds of image: its files, and the variables
# that point pip, uv, requests, curl and git at its trust store, for what runs outside a job's
# steps too (a `docker build` FROM the image: the plan job's Linux job image).
SHARE_LAYER = (f"COPY host/ {CONTAINER_HOST_DIR}/\n"
               f"ENV {' '.join(f'{name}={CONTAINER_CA}' for name in CA_VARIABLES)} "
               f"PIP_CONFIG_FILE={CONTAINER_PIP_CONF}\n")
# Job container images a debootstrapped suite can stand for: debian:<suite>, nothing else.
_DEBIAN = re.compile(r"^(?:docker\.io/)?(?:library/)?debian:(?P<suite>[a-z]+)$")


@dataclass(frozen=True)
class JobImage:
    """A job container image a workflow names, and whether this machine can provide it."""

    name: str
    available: bool
    origin: str  # "engine" (already there), "debootstrap" (tagged from the base), or why it is missing


def _build(tag: str, dockerfile: str, share: HostShare, label: str, inputs: dict[str, str],
           progress: Progress | None, what: str) -> str:
    """Build `tag` from `dockerfile` with the host share in its context (as host/), unless the
    engine holds it with the same inputs; returns the tag."""
    digest = sha256_hex(json.dumps(inputs, sort_keys=True).encode())
    labels = docker_base.image_labels(tag)
    if labels is not None and labels.get(label) == digest:
        return tag
    if progress:
        progress(f"building {what} {tag}")
    with tempfile.TemporaryDirectory(prefix="shipyard-act-image-", dir="/var/tmp") as work:
        (Path(work) / "Dockerfile").write_text(dockerfile)
        shutil.copytree(share.staged, Path(work) / "host")
        docker_base.legacy_build(["--force-rm", "--label", f"{label}={digest}", work], tag, what, timeout=1800)
    return tag


def runner_image(share: HostShare, progress: Progress | None = None) -> str:
    """Build (or reuse) the bare runner image; returns its tag, named after its inputs."""
    base = docker_base.bootstrap_base_image(progress=progress)
    recipe = RECIPE.read_text()
    inputs = {"base": docker_base.image_id(base), "recipe": sha256_hex(recipe.encode()),
              "share_layer": sha256_hex(SHARE_LAYER.encode()), **share.digest_inputs()}
    tag = f"{RUNNER_REPOSITORY}:{sha256_hex(json.dumps(inputs, sort_keys=True).encode())[:16]}"
    dockerfile = recipe.replace("${BASE_IMAGE}", base) + SHARE_LAYER
    return _build(tag, dockerfile, share, _LABEL, inputs, progress, "the bare runner image")


def job_image(name: str, share: HostShare, progress: Progress | None = None) -> JobImage:
    """Make a workflow's job container image here: `debian:<suite>` is the debootstrapped suite
    plus the host share; any other image is used as the engine holds it, if it does."""
    found = _DEBIAN.match(name)
    if found is None:
        if docker_base.image_labels(name) is not None:
            return JobImage(name, True, "engine (without this host's trust store)")
        return JobImage(name, False, f"{name} is not in the Docker engine and no registry can be pulled from here")
    base = docker_base.bootstrap_base_image(suite=found.group("suite"), progress=progress)
    inputs = {"base": docker_base.image_id(base), "name": name, "share_layer": sha256_hex(SHARE_LAYER.encode()),
              **share.digest_inputs()}
    _build(name, f"FROM {base}\n{SHARE_LAYER}", share, _JOB_LABEL, inputs, progress,
           f"the job container image (debootstrapped {found.group('suite')})")
    return JobImage(name, True, "debootstrap")
