"""The two files shipyard adds to a wheel's top-level package: `_build_info.json` (how it
was built) and `_features.json` (its features with their statuses)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from shipyard.record.manifest import CudaArchs
from shipyard.release.matrix import Cell
from shipyard.release.spec import Component, Spec, Variant


def _dump(data: object) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


def features_document(spec: Spec, component: str, platform: str | Sequence[str]) -> dict[str, object]:
    """What a package says about its features (a wheel's `_features.json`, a conda package's
    about.json extra). For one platform: `{"platform", "features": [{id, title, status}]}`; for a
    package that serves several (a pure wheel, a noarch conda package): each feature with its
    status per platform, `{"features": [{id, title, status: {platform: status}}]}`."""
    if isinstance(platform, str):
        return {"platform": platform,
                "features": [{"id": fid, "title": title, "status": status}
                             for fid, title, status in spec.features_for(component, platform)]}
    statuses: dict[str, dict[str, object]] = {}
    for one in platform:  # every feature with its status on each platform
        for fid, title, status in spec.features_for(component, one):
            entry = statuses.setdefault(fid, {"id": fid, "title": title, "status": {}})
            entry["status"][one] = status  # type: ignore[index]
    return {"features": list(statuses.values())}


def package_files(spec: Spec, cell: Cell, component: Component, variant: Variant,
                  git_sha: str | None, version: str | None = None,
                  cuda_archs: CudaArchs | None = None) -> dict[str, bytes]:
    """_build_info.json and _features.json for `cell`'s wheel, by wheel-relative path. A pure
    wheel's are platform-, variant- and Python-neutral: the same bytes wherever it is built.
    The conda packages carry the same two files (git_sha None: they are keyed by their sources).
    `version` is the package's own (the release's when not given). `cuda_archs` is what the arch
    check read out of its binaries: `verified_cuda_archs` ({sass, ptx}, or null), beside the
    declared `cuda_archs` list the library reports at run time."""
    assert component.import_name
    version = version or spec.release.release.version
    if cell.is_pure:
        info: dict[str, object] = {"component": component.name, "version": version, "git_sha": git_sha}
        features = features_document(spec, component.name, cell.platforms)
    else:
        info = {"component": component.name, "version": version, "variant": variant.name,
                "variant_tag": variant.tag, "cuda_version": variant.cuda, "cuda_archs": list(variant.archs),
                "git_sha": git_sha, "python": cell.python, "platform": cell.platform,
                "verified_cuda_archs": cuda_archs.to_json() if cuda_archs else None}
        if cell.is_abi3:  # `python` built it; the one wheel serves these
            info |= {"limited_api": cell.limited_api, "pythons": list(cell.pythons)}
        features = features_document(spec, component.name, cell.platform)
    return {f"{component.import_name}/_build_info.json": _dump(info),
            f"{component.import_name}/_features.json": _dump(features)}
