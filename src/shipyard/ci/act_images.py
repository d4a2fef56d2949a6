"""The bare images a local workflow run (`shipyard ci run`) starts its jobs in, built here.

Two kinds, both from shipyard's debootstrapped Debian base (host/docker_base.py), since no
registry can be pulled from:
- the runner image that the workflows' Linux `runs-on` labels map to: the base plus git, curl and
  the docker CLI (resources/act/Dockerfile.runner says why each);
- the job containers a workflow names (`container: debian:bookworm`): where the engine does not
  hold that image, the debootstrapped base of the same suite is tagged with its name. It is the
  same Debian minbase the registry serves; an image the engine already holds is used as it is.

Neither holds anything of this host: its trust store, package-index settings and Pythons reach
the containers as read-only mounts the run adds (ci/act_host.py), not as image layers.
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from shipyard.errors import BuildError
from shipyard.host import docker_base
from shipyard.plumbing import command
from shipyard.plumbing.hashing import sha256_hex
from shipyard.plumbing.progress import Progress

RUNNER_REPOSITORY = "shipyard/act-runner"
RECIPE = resources.files("shipyard.resources").joinpath("act", "Dockerfile.runner")
_LABEL = "org.shipyard.act-runner.inputs"
# Job container images a debootstrapped suite can stand for: debian:<suite>, nothing else.
_DEBIAN = re.compile(r"^(?:docker\.io/)?(?:library/)?debian:(?P<suite>[a-z]+)$")


@dataclass(frozen=True)
class JobImage:
    """A job container image a workflow names, and whether this machine can provide it."""

    name: str
    available: bool
    origin: str  # "engine" (already there), "debootstrap" (tagged from the base), or why it is missing


def runner_image(progress: Progress | None = None) -> str:
    """Build (or reuse) the bare runner image; returns its tag, named after its inputs."""
    base = docker_base.bootstrap_base_image(progress=progress)
    recipe = RECIPE.read_bytes()
    inputs = {"base": docker_base.image_id(base), "recipe": sha256_hex(recipe)}
    digest = sha256_hex(json.dumps(inputs, sort_keys=True).encode())
    tag = f"{RUNNER_REPOSITORY}:{digest[:16]}"
    labels = docker_base.image_labels(tag)
    if labels is not None and labels.get(_LABEL) == digest:
        return tag
    if progress:
        progress(f"building the bare runner image {tag} (git, curl, docker CLI on {base})")
    with tempfile.TemporaryDirectory(prefix="shipyard-act-runner-", dir="/var/tmp") as work:
        (Path(work) / "Dockerfile").write_bytes(recipe)
        done = command.run(["docker", "build", "--force-rm", "--tag", tag, "--build-arg", f"BASE_IMAGE={base}",
                            "--label", f"{_LABEL}={digest}", work],
                           extra_env={"DOCKER_BUILDKIT": "0"}, timeout=1800, check=False,
                           what=f"docker build {tag}")
    if done.returncode != 0:
        tail = "\n    ".join(done.output.splitlines()[-30:])
        raise BuildError(f"building the runner image {tag} failed (exit {done.returncode}):\n    {tail}")
    return tag


def job_image(name: str, progress: Progress | None = None) -> JobImage:
    """Make a workflow's job container image available: the engine's own, else a debootstrapped
    Debian suite tagged with its name. Anything else cannot be made here."""
    if docker_base.image_labels(name) is not None:
        return JobImage(name, True, "engine")
    found = _DEBIAN.match(name)
    if found is None:
        return JobImage(name, False, f"{name} is not in the Docker engine and no registry can be pulled from here")
    base = docker_base.bootstrap_base_image(suite=found.group("suite"), progress=progress)
    command.run(["docker", "tag", base, name], timeout=60, what="docker tag")
    return JobImage(name, True, "debootstrap")
