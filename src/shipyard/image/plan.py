"""What one image is: its variant, target (runtime or devel), tags and labels.

Everything here comes from the validated spec and the manifest; nothing is re-derived from
the YAML files.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import ValidationError

from shipyard.errors import UsageError, nearest
from shipyard.image.tags import image_kind, moving_tag, versioned_tag
from shipyard.record.manifest import CudaArchs, read_manifest
from shipyard.release.channel_version import require_channel_version
from shipyard.release.destinations import ImageSettings, ImageVariant
from shipyard.release.spec import Spec, Variant

if TYPE_CHECKING:
    from shipyard.image.hygiene import Finding

Target = Literal["runtime", "devel"]
TARGETS: tuple[Target, ...] = ("runtime", "devel")
CHANNELS = ("nightly", "test", "release")
LABEL_PREFIX = "org.shipyard.image"
# What the image's kernels run on: the SASS and PTX its release wheels' binaries carry, as their
# arch check read them (the manifest's cuda_archs), comma-separated ("sm_70,sm_80", "compute_80").
CUDA_SASS_LABEL = f"{LABEL_PREFIX}.cuda-sass"
CUDA_PTX_LABEL = f"{LABEL_PREFIX}.cuda-ptx"
OCI = "org.opencontainers.image"


@dataclass(frozen=True)
class ImagePlan:
    """One image to build: `ember:1.7.0-cuda11.8-runtime` and its channel tag."""

    spec: Spec
    variant: Variant
    target: Target
    channel: str
    built_version: str | None = None  # the version of the wheels it holds (dist/manifest.json's)

    @property
    def settings(self) -> ImageSettings:
        assert self.spec.release.images is not None
        return self.spec.release.images

    @property
    def budget(self) -> ImageVariant:
        return self.settings.variants[self.variant.name]

    @property
    def budget_mb(self) -> float:
        return self.budget.runtime_budget_mb if self.target == "runtime" else self.budget.devel_budget_mb

    @property
    def flavour(self) -> str:
        """What a tag says about the hardware: `cpu`, or `cuda` and the CUDA version."""
        return f"cuda{self.variant.cuda}" if self.variant.cuda else "cpu"

    @property
    def version(self) -> str:
        """The version of the wheels it holds: a nightly's development version (1.7.0.dev20261201)
        when they were built for nightly, else release.yaml's."""
        return self.built_version or self.spec.release.release.version

    @property
    def tag(self) -> str:
        """The versioned tag, e.g. ember:1.7.0-cpu-runtime."""
        return versioned_tag(self.settings.repository, self.version, image_kind(self.flavour, self.target))

    @property
    def channel_tag(self) -> str:
        """The moving tag of the channel, e.g. ember:nightly-cpu-runtime (a publish moves the
        registry's own, image/tags.py)."""
        return moving_tag(self.settings.repository, self.channel, image_kind(self.flavour, self.target))

    @property
    def tags(self) -> tuple[str, str]:
        return (self.tag, self.channel_tag)


@dataclass(frozen=True)
class ImageResult:
    """What building one image gave: its id, size, labels, the hygiene scan's findings, its SBOM."""

    plan: ImagePlan
    image_id: str
    size: int
    cached: bool
    seconds: float
    labels: dict[str, str]
    findings: tuple[Finding, ...] = ()
    sbom: bytes = b""  # CycloneDX JSON, written to dist/sboms/<cell id>.cdx.json by record_images
    cuda_archs: CudaArchs | None = None  # what its wheels' binaries verifiably carry (None: no kernels)
    wheel_cells: tuple[str, ...] = ()  # the manifest cells of the wheels it installs: their tests prove it

    @property
    def size_mb(self) -> float:
        return self.size / 1e6


def image_plans(spec: Spec, variant_name: str, *, targets: Iterable[str] = TARGETS,
                channel: str | None = None, dist: Path | None = None) -> list[ImagePlan]:
    """The images of one variant, versioned like the wheels of `dist` (its manifest's version);
    UsageError naming the fix for a variant without images, ChannelVersionError (exit 2) for
    nightly wheels in an image of another channel."""
    images = spec.release.images
    if images is None:
        raise UsageError(f"{spec.root / 'release.yaml'}: images: the release describes no Docker images; "
                         "add an `images:` section (docs/images.md)")
    variant = spec.release.find_variant(variant_name)
    if variant is None or variant.name not in images.variants:
        hint = nearest(variant_name, images.variants)
        raise UsageError(f"--variant {variant_name}: release.yaml's images.variants has no such variant "
                         f"(it has {', '.join(images.variants)})" + (f"; did you mean {hint!r}?" if hint else ""))
    chosen = channel or images.channel
    if chosen not in CHANNELS:
        raise UsageError(f"--channel {chosen}: the channels are {', '.join(CHANNELS)}")
    wrong = [t for t in targets if t not in TARGETS]
    if wrong:
        raise UsageError(f"--target {', '.join(wrong)}: the targets are {', '.join(TARGETS)}")
    manifest_path = dist / "manifest.json" if dist is not None else None
    manifest = read_manifest(manifest_path) if manifest_path is not None else None
    version = manifest.version if manifest is not None else None
    if version is not None:
        require_channel_version(version, chosen, f"{manifest_path}: images of channel {chosen}")
    return [ImagePlan(spec, variant, t, chosen, version)  # type: ignore[arg-type]
            for t in TARGETS if t in targets]


def with_repository(spec: Spec, repository: str) -> Spec:
    """`spec` with its images named `repository` instead of images.repository (a repro's own
    name, so that its builds never move the release's tags in a shared engine)."""
    images = spec.release.images
    if images is None:
        return spec
    try:
        renamed = ImageSettings.model_validate({**images.model_dump(), "repository": repository})
    except ValidationError as exc:
        raise UsageError(f"--repository {repository}: {exc.errors()[0]['msg']}") from exc
    return dataclasses.replace(spec, release=spec.release.model_copy(update={"images": renamed}))


def feature_ids(spec: Spec, components: Iterable[str], platform: str) -> dict[str, list[str]]:
    """Status → the sorted ids of the features the image ships with that status on `platform`."""
    by_status: dict[str, list[str]] = {status: [] for status in spec.statuses.names}
    for component in components:
        for fid, _title, status in spec.features_for(component, platform):
            by_status[status].append(fid)
    return {status: sorted(ids) for status, ids in by_status.items()}


def rfc3339(epoch: int) -> str:
    return datetime.datetime.fromtimestamp(epoch, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def feature_label(status: str) -> str:
    """The label listing the features of `status` (feature_status.yaml's vocabulary), in the
    lowercase a label key is written in: org.shipyard.image.features.api-stable."""
    return f"{LABEL_PREFIX}.features.{status.lower()}"


def image_labels(plan: ImagePlan, *, revision: str, created_epoch: int, source: str,
                 licenses: str, cuda_archs: CudaArchs | None = None) -> dict[str, str]:
    """The OCI labels plus what the image ships: its features by status, variant, CUDA and Python,
    and (a CUDA image) the SASS and PTX archs its wheels' binaries verifiably carry, `cuda_archs`.

    `created` is SOURCE_DATE_EPOCH (the commit time otherwise), so the same commit gives the
    same labels."""
    settings = plan.settings
    features = feature_ids(plan.spec, settings.components, settings.platform)
    labels = {
        f"{OCI}.title": f"{settings.repository} {plan.flavour} {plan.target}",
        f"{OCI}.version": plan.version,
        f"{OCI}.revision": revision,
        f"{OCI}.source": source,
        f"{OCI}.created": rfc3339(created_epoch),
        f"{OCI}.licenses": licenses,
        f"{LABEL_PREFIX}.variant": plan.variant.name,
        f"{LABEL_PREFIX}.variant-tag": plan.variant.tag,
        f"{LABEL_PREFIX}.cuda-version": plan.variant.cuda or "none",
        f"{LABEL_PREFIX}.python": settings.python,
        f"{LABEL_PREFIX}.target": plan.target,
        f"{LABEL_PREFIX}.components": ",".join(settings.components),
    }
    for status, ids in features.items():
        labels[feature_label(status)] = ",".join(ids)
    if cuda_archs is not None:
        labels[CUDA_SASS_LABEL] = ",".join(cuda_archs.sass)
        labels[CUDA_PTX_LABEL] = ",".join(cuda_archs.ptx)
    return labels
