"""`shipyard build-mobile`: the mobile cells of release.yaml built by shipyard.mobile and
recorded in dist/manifest.json beside the wheels."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from shipyard.errors import UsageError
from shipyard.host.source_tree import git_info
from shipyard.mobile import MobileBuildTarget, MobileResult, build_mobile
from shipyard.plumbing.hashing import sha256_of
from shipyard.record.manifest import ArtifactRecord, FeatureRecord, merge_artifacts
from shipyard.release.channel_version import build_version
from shipyard.release.matrix import expand, select
from shipyard.release.spec import Spec
from shipyard.release.validate import nearest


def build_mobile_release(spec: Spec, *, targets: tuple[str, ...], dist: Path, state: Path,
                         progress: Callable[[str], None], nightly: bool = False) -> list[MobileResult]:
    """Build every mobile cell (or those of `targets`), package, test, record in the manifest;
    `nightly`: under the nightly development version (ember-lite-1.7.0.dev20261201-host.tar.gz)."""
    release = spec.release
    cells = select(expand(release), package_type="mobile")
    known = [c.platform for c in cells]
    for name in targets:
        if name not in known:
            hint = nearest(name, known)
            raise UsageError(f"no mobile target {name!r} in release.yaml"
                                + (f"; did you mean {hint!r}?" if hint else f" (targets: {', '.join(known)})"))
    cells = [c for c in cells if not targets or c.platform in targets]
    by_target = {c.platform: c for c in cells}
    component = cells[0].component if cells else "ember-lite"
    git = git_info(spec.root)
    # The component's release version; a nightly's development version.
    version = build_version(release.component_version(component), nightly=nightly, commit_time=git.commit_time)
    results = build_mobile(
        [MobileBuildTarget.from_spec(release.mobile_targets[c.platform]) for c in cells], version=version,
        features_for_target=lambda t: spec.features_for(component, t.name),
        source_dir=spec.component_dir(component), build_root=state / "mobile",
        dist_dir=dist / "mobile", progress=progress)
    records = []
    for result in results:
        cell = by_target[result.target]
        if result.package is None or result.status == "failed":
            continue
        records.append(ArtifactRecord(
            name=result.package.name, path=result.package.relative_to(dist).as_posix(),
            sha256=sha256_of(result.package), size=result.package.stat().st_size, cell_id=cell.id,
            component=cell.component, package_type="mobile", variant=cell.variant, variant_tag=cell.variant_tag,
            platform=cell.platform, python=None, version=version,
            features=tuple(FeatureRecord(id=i, title=t, status=s)
                           for i, t, s in spec.features_for(cell.component, cell.platform)),
            tests={"result": result.status, "tests_run": result.tests_run, "detail": result.reason},
            build={"seconds": round(result.seconds, 2), "git_sha": git.sha,
                   "aar": result.aar.relative_to(dist).as_posix() if result.aar else None}))
    release_version = build_version(release.release.version, nightly=nightly, commit_time=git.commit_time)
    merge_artifacts(dist / "manifest.json", release=release.release.name, version=release_version,
                    records=records)
    return results
