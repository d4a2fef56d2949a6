"""The two files shipyard adds to a wheel's top-level package: `_build_info.json` (how it
was built) and `_features.json` (its features with their statuses)."""

from __future__ import annotations

import json

from shipyard.matrix import Cell
from shipyard.spec import Component, Variant
from shipyard.validate import Spec


def _dump(data: object) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


def package_files(spec: Spec, cell: Cell, component: Component, variant: Variant,
                  git_sha: str | None) -> dict[str, bytes]:
    """_build_info.json and _features.json for `cell`'s wheel, by wheel-relative path. A pure
    wheel's are platform-, variant- and Python-neutral: the same bytes wherever it is built.
    The conda packages carry the same two files (git_sha None: they are keyed by their sources)."""
    assert component.import_name
    version = spec.release.release.version
    if cell.is_pure:
        statuses: dict[str, dict[str, object]] = {}
        for platform in cell.platforms:  # every feature with its status on each platform
            for fid, title, status in spec.features_for(component.name, platform):
                entry = statuses.setdefault(fid, {"id": fid, "title": title, "status": {}})
                entry["status"][platform] = status  # type: ignore[index]
        info: dict[str, object] = {"component": component.name, "version": version, "git_sha": git_sha}
        features: dict[str, object] = {"features": list(statuses.values())}
    else:
        info = {"component": component.name, "version": version, "variant": variant.name,
                "variant_tag": variant.tag, "cuda_version": variant.cuda, "cuda_archs": list(variant.archs),
                "git_sha": git_sha, "python": cell.python, "platform": cell.platform}
        features = {"platform": cell.platform,
                    "features": [{"id": fid, "title": title, "status": status}
                                 for fid, title, status in spec.features_for(component.name, cell.platform)]}
    return {f"{component.import_name}/_build_info.json": _dump(info),
            f"{component.import_name}/_features.json": _dump(features)}
