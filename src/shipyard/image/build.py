"""`shipyard image build --variant V`: the runtime and devel images of one variant.

Stages the build context (verified wheels as a small index, the pinned dependency wheels, the
example scripts from the emberelastic wheel), builds each target through the docker SDK, tags it with
its versioned and channel tags, checks its size budget and scans it for secrets, pip caches and
apt lists, and records it in dist/manifest.json. An image whose inputs did not change is not
rebuilt: its inputs' digest is a label, and a re-run that finds it does nothing else.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import tempfile
import time
import zipfile
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import docker

from shipyard.errors import BuildError, CheckFailed
from shipyard.host import docker_base
from shipyard.host.docker_base import docker_client
from shipyard.host.source_tree import git_info
from shipyard.image.bases import Bases, resolve_bases
from shipyard.image.deps import Wheelhouse, ensure_wheelhouse, third_party_requirements
from shipyard.image.hygiene import Finding, scan_image
from shipyard.image.plan import LABEL_PREFIX, TARGETS, ImagePlan, ImageResult, image_labels, image_plans
from shipyard.image.record import record_images
from shipyard.image.wheels import ReleaseWheel, licenses, release_wheels, stage_index
from shipyard.plumbing.hashing import sha256_hex
from shipyard.plumbing.progress import Progress
from shipyard.record.manifest import CudaArchs
from shipyard.release.spec import Spec
from shipyard.supply.sbom import SBOM_LABEL

# The images' recipe is shipyard's own data (src/shipyard/resources/docker/Dockerfile), read through
# importlib.resources: found in a wheel install as in a checkout.
DOCKERFILE = resources.files("shipyard.resources").joinpath("docker", "Dockerfile")
# Bump when the staging below changes what reaches the image.
_RECIPE = "1"
INPUTS_LABEL = f"{LABEL_PREFIX}.inputs"


@dataclass(frozen=True)
class ImageRequest:
    variant: str
    dist: Path
    targets: tuple[str, ...] = TARGETS
    channel: str | None = None
    base_image: str | None = None
    python_image: str | None = None
    python_prefix: str | None = None
    allow_untested: bool = False
    no_cache: bool = False  # build every layer again (the cold build of bench-docker)
    dockerfile: Path | Traversable = DOCKERFILE  # shipyard's own, unless a test names another


def build_images(spec: Spec, request: ImageRequest, progress: Progress = lambda _: None) -> list[ImageResult]:
    """Build (or find unchanged) every requested image of the variant; raise CheckFailed for an
    image over its budget or carrying a secret, a pip cache or an apt list."""
    plans = image_plans(spec, request.variant, targets=request.targets, channel=request.channel, dist=request.dist)
    settings = plans[0].settings
    variant = plans[0].variant
    docker_base.ensure_docker_engine(required=True)
    wheels = release_wheels(spec, variant, request.dist, allow_untested=request.allow_untested)
    platform_tag = spec.release.platforms[settings.platform].wheel_platform_tag
    requirements = third_party_requirements([w.path for w in wheels], spec.release.components, variant)
    wheelhouse = ensure_wheelhouse(requirements, settings.python, platform_tag, progress=progress)
    bases = resolve_bases(settings, variant.name, base_image=request.base_image, python_image=request.python_image,
                          python_prefix=request.python_prefix, progress=progress)
    git = git_info(spec.root)
    build_args = {"BASE_IMAGE": bases.base_image, "PYTHON_IMAGE": bases.python_image,
                  "PYTHON_PREFIX": bases.python_prefix, "CUDA_VERSION": variant.cuda or "",
                  "EMBER_REQUIREMENTS": " ".join(w.requirement for w in wheels),
                  "LAYER_EPOCH": str(_layer_epoch(bases.base_image))}
    # The image's kernels are its release wheels' binaries, the very bytes their arch check read
    # (release_wheels verified each sha256 against the manifest): what all of them carry.
    cuda_archs = CudaArchs.common_to_artifacts(w.record.cuda_archs for w in wheels)
    results = []
    with tempfile.TemporaryDirectory(prefix="shipyard-image-", dir="/var/tmp") as work:
        context: Path | None = None
        for plan in plans:
            start = time.monotonic()
            labels = image_labels(plan, revision=git.sha, created_epoch=git.commit_time, source=settings.source,
                                  licenses=licenses(wheels), cuda_archs=cuda_archs)
            labels[f"{LABEL_PREFIX}.base"] = f"{bases.origin}: {bases.base_image}"
            sbom = _sbom(plan, wheels, wheelhouse, bases, git.commit_time)
            labels[SBOM_LABEL] = sha256_hex(sbom)  # the document, attached in dist/sboms/
            inputs = _inputs_digest(request, plan, wheels, wheelhouse, bases, build_args, labels)
            labels[INPUTS_LABEL] = inputs
            cached = not request.no_cache and _unchanged(plan, inputs)
            findings: tuple[Finding, ...] = ()
            if not cached:
                if context is None:
                    context = stage_context(Path(work), wheels, wheelhouse, request.dockerfile, git.commit_time)
                progress(f"docker build {plan.tag} (target {plan.target})")
                _docker_build(request, plan, context, build_args, labels)
                findings = tuple(scan_image(plan.tag, _secret_texts(spec)))
                if findings:  # untagged, so that a re-run builds and scans it again rather than trusting it
                    for ref in plan.tags:
                        docker_client().images.remove(ref, noprune=True)
            else:
                progress(f"{plan.tag} is up to date")
            size = docker_base.image_size(plan.tag)
            results.append(ImageResult(plan, docker_base.image_id(plan.tag), size, cached,
                                       time.monotonic() - start, labels, findings, sbom, cuda_archs,
                                       tuple(w.record.cell_id for w in wheels)))
    _check(results)  # an image over budget or with a finding is never recorded
    record_images(spec, request.dist, results)
    return results


def _sbom(plan: ImagePlan, wheels: list[ReleaseWheel], wheelhouse: Wheelhouse, bases: Bases, epoch: int) -> bytes:
    from shipyard.supply.sbom import ImageContents, image_sbom

    identity = bases.identity()
    contents = ImageContents(
        repository=plan.settings.repository, version=plan.version,
        release_wheels=tuple((w.record.name, w.record.sha256) for w in wheels), pins=tuple(wheelhouse.pins),
        bases=(("base", bases.base_image, identity["base"]), ("python", bases.python_image, identity["python"])))
    return image_sbom(contents, epoch=epoch)


def _inputs_digest(request: ImageRequest, plan: ImagePlan, wheels: list[ReleaseWheel], wheelhouse: Wheelhouse,
                   bases: Bases, build_args: dict[str, str], labels: dict[str, str]) -> str:
    """Everything that can change the image: the Dockerfile, the wheels' bytes (their manifest
    sha256, checked), the pinned dependencies, the base images' ids, the arguments and labels."""
    inputs = {
        "recipe": _RECIPE,
        "dockerfile": sha256_hex(request.dockerfile.read_bytes()),
        "target": plan.target,
        "wheels": {w.record.name: w.record.sha256 for w in wheels},
        "deps": list(wheelhouse.pins),
        "bases": bases.identity(),
        "args": build_args,
        "labels": labels,
    }
    return sha256_hex(json.dumps(inputs, sort_keys=True).encode())


def _layer_epoch(base_image: str) -> int:
    """The time the Dockerfile's RUN steps give every file they write: the base image's creation
    time (seconds). Fixed for one base, so that two builds write the same layers, and changing only
    with the base, so that the layer cache holds across commits."""
    created = str(docker_client().images.get(base_image).attrs["Created"])  # RFC 3339, nanoseconds
    return int(datetime.datetime.strptime(created[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.UTC).timestamp())


def _unchanged(plan: ImagePlan, inputs: str) -> bool:
    """Both tags name one image built from these inputs."""
    labels = docker_base.image_labels(plan.tag)
    if labels is None or labels.get(INPUTS_LABEL) != inputs:
        return False
    channel = docker_base.image_labels(plan.channel_tag)
    return channel is not None and docker_base.image_id(plan.channel_tag) == docker_base.image_id(plan.tag)


def stage_context(work: Path, wheels: list[ReleaseWheel], wheelhouse: Wheelhouse, dockerfile: Path | Traversable,
                  epoch: int) -> Path:
    """index/ (the wheels, by name), deps/ (dependency wheels + requirements.txt), examples/ and
    the Dockerfile: only these, never a whole folder of dist/ (it may hold anything)."""
    context = work / "context"
    context.mkdir()
    (context / "Dockerfile").write_bytes(dockerfile.read_bytes())
    stage_index(wheels, context / "index")
    (context / "deps").mkdir(parents=True)
    for item in wheelhouse.path.iterdir():
        if item.is_file():
            _link_or_copy(item, context / "deps" / item.name)
    _stage_examples(wheels, context / "examples", epoch)
    # Only what the Dockerfile names reaches the daemon.
    return context


def _link_or_copy(src: Path, dest: Path) -> None:
    try:
        os.link(src, dest)
    except OSError:
        shutil.copy2(src, dest)


def _stage_examples(wheels: list[ReleaseWheel], dest: Path, epoch: int) -> None:
    """The example training scripts, taken from the released wheels (the bytes that were tested).
    Their times are the source's and their modes fixed (not the umask's), so the layer holding
    them is the same bytes on every build."""
    dest.mkdir(parents=True)
    os.chmod(dest, 0o755)
    for wheel in wheels:
        with zipfile.ZipFile(wheel.path) as zf:
            for name in zf.namelist():
                parts = name.split("/")
                if len(parts) == 3 and parts[1] == "examples" and name.endswith(".py") and parts[2] != "__init__.py":
                    (dest / parts[2]).write_bytes(zf.read(name))
                    os.chmod(dest / parts[2], 0o644)
                    os.utime(dest / parts[2], (epoch, epoch))
    os.utime(dest, (epoch, epoch))


def _secret_texts(spec: Spec) -> list[str]:
    """The values no image may hold: the credentials release.yaml names, when they are set here."""
    texts = []
    for target in spec.release.publish.values():
        for env in (target.username_env, target.password_env, target.token_env):
            if env and os.environ.get(env):
                texts.append(os.environ[env])
    return texts


def _docker_build(request: ImageRequest, plan: ImagePlan, context: Path, build_args: dict[str, str],
                  labels: dict[str, str]) -> None:
    """One target through the engine's classic builder (the docker SDK speaks only its API; BuildKit
    through the CLI needs the buildx plugin, which Debian's docker.io lacks). Both tags name it."""
    client = docker_client()
    output: list[str] = []
    image_id = None
    try:
        for chunk in client.api.build(path=str(context), dockerfile="Dockerfile", target=plan.target,
                                      buildargs=build_args, labels=labels, nocache=request.no_cache, rm=True,
                                      forcerm=True, pull=False, decode=True):
            if "stream" in chunk:
                output += chunk["stream"].rstrip().splitlines()
            if "error" in chunk:
                output.append(chunk["error"])
                raise BuildError(f"docker build of {plan.tag} failed:\n    " + "\n    ".join(output[-40:]))
            if "aux" in chunk and "ID" in chunk["aux"]:
                image_id = chunk["aux"]["ID"]
    except docker.errors.APIError as exc:
        raise BuildError(f"docker build of {plan.tag} failed: {exc.explanation or exc}") from exc
    if image_id is None:
        raise BuildError(f"docker build of {plan.tag} named no image:\n    " + "\n    ".join(output[-40:]))
    for ref in plan.tags:
        repository, tag = ref.rsplit(":", 1)
        client.api.tag(image_id, repository, tag, force=True)


def _check(results: list[ImageResult]) -> None:
    problems = []
    for result in results:
        plan = result.plan
        if result.size_mb > plan.budget_mb:
            key = f"images.variants.{plan.variant.name}.{plan.target}_budget_mb"
            problems.append(f"{plan.tag} is {result.size_mb:.0f} MB, over its budget of {plan.budget_mb:g} MB "
                            f"(release.yaml: {key}); make the image smaller or raise {key}")
        problems += [f"{plan.tag}: {finding}; nothing secret or cached may stay in an image"
                     for finding in result.findings]
    if problems:
        raise CheckFailed("\n".join(problems))
