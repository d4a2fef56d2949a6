"""Images in dist/manifest.json: one record per image, so that publish finds what was built
(its tags, id, size, features) without asking the engine how it came about."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from shipyard.image.plan import ImageResult
from shipyard.record.manifest import ArtifactRecord, FeatureRecord, merge_artifacts
from shipyard.release.spec import Spec


def image_name(repository: str) -> str:
    """The image's own name, without a registry or namespace (`registry.example.com/ember` → `ember`):
    what the record names its component and cell by, which are identifiers (no '/')."""
    return repository.rsplit("/", 1)[-1]


def image_cell_id(result: ImageResult) -> str:
    plan = result.plan
    return f"{image_name(plan.settings.repository)}-{plan.variant.tag}-{plan.settings.platform}-{plan.target}-docker"


def record_images(spec: Spec, dist: Path, results: Sequence[ImageResult]) -> None:
    if not results:
        return
    release = spec.release
    records = []
    for result in results:
        plan = result.plan
        sbom = f"sboms/{image_cell_id(result)}.cdx.json"
        (dist / sbom).parent.mkdir(parents=True, exist_ok=True)
        (dist / sbom).write_bytes(result.sbom)
        features = tuple(FeatureRecord(id=fid, title=title, status=status)
                         for component in plan.settings.components
                         for fid, title, status in spec.features_for(component, plan.settings.platform))
        records.append(ArtifactRecord(
            name=plan.tag, path="", sha256=result.image_id.removeprefix("sha256:"), size=result.size,
            cell_id=image_cell_id(result), component=image_name(plan.settings.repository), package_type="docker",
            variant=plan.variant.name, variant_tag=plan.variant.tag, platform=plan.settings.platform,
            python=plan.settings.python, version=plan.version, features=features, tests=None,
            build={"tags": list(plan.tags), "target": plan.target, "cached": result.cached,
                   "seconds": round(result.seconds, 2), "inputs": result.labels.get("org.shipyard.image.inputs"),
                   "budget_mb": plan.budget_mb, "sbom": sbom}, cuda_archs=result.cuda_archs,
            proven_by=result.wheel_cells))
    dist.mkdir(parents=True, exist_ok=True)
    # The wheels' manifest version (a nightly's development version): the images join their manifest.
    version = results[0].plan.version if results else release.release.version
    merge_artifacts(dist / "manifest.json", release=release.release.name, version=version, records=records)
