"""release.yaml -> the variant config rattler-build renders the conda recipes with.

The recipes under recipes/ name no version, Python, CUDA version or arch list: all of them
come from this file, one per variant, written to `.shipyard/conda/variants/<variant>.yaml`.
Each component keeps its own version (`<component>_version`, dashes as underscores, e.g.
`ember_version`): a recipe names its own and those of the components it depends on.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml
from packaging.version import Version

from shipyard.plumbing.atomic_files import write_atomic
from shipyard.release.spec import Release, Variant

# What a recipe reads a missing CUDA version or arch list as (a CPU variant).
NO_CUDA = "none"


def version_key(component: str) -> str:
    """The variant key of a component's own version: ember -> ember_version."""
    return f"{component.replace('-', '_')}_version"


def variant_config(release: Release, variant: Variant, versions: Mapping[str, str] | None = None
                   ) -> dict[str, list[str]]:
    """The variant keys of one variant. Each is a one-element list except `python`: one
    rendering per Python of the release. `versions`: each conda component's own version."""
    pythons = list(release.pythons)
    return {
        "release_version": [release.release.version],
        "variant_tag": [variant.tag],
        "cuda_version": [variant.cuda or NO_CUDA],
        "cuda_archs": [";".join(variant.archs) or NO_CUDA],
        "python": pythons,
        # noarch: python packages build with, and require at least, the oldest Python.
        "python_min": [min(pythons, key=Version)],
        **{version_key(name): [version] for name, version in (versions or {}).items()},
    }


def variant_config_path(state: Path, variant: Variant) -> Path:
    return state / "conda" / "variants" / f"{variant.name}.yaml"


def write_variant_config(release: Release, variant: Variant, state: Path,
                         versions: Mapping[str, str] | None = None) -> Path:
    """Write the variant's config (atomically) and return its path."""
    path = variant_config_path(state, variant)
    text = (f"# Written by shipyard from release.yaml (variant {variant.name}); do not edit: change\n"
            f"# release.yaml and run `shipyard conda build --variant {variant.name}` again.\n"
            + yaml.safe_dump(variant_config(release, variant, versions), sort_keys=False, default_flow_style=None))
    write_atomic(path, text)
    return path
