"""release.yaml -> the variant config rattler-build renders the conda recipes with.

The recipes under recipes/ name no version, Python, CUDA version or arch list: all of them
come from this file, one per variant, written to `.shipyard/conda/variants/<variant>.yaml`.
Each component keeps its own version (`<component>_version`, dashes as underscores, e.g.
`ember_version`): a recipe names its own and those of the components it depends on.

A CUDA variant also says which of conda-forge's CUDA packages it builds and runs with
(conda/cuda_packages.py): `cuda_runtime` (`cudatoolkit` up to CUDA 11, `cuda-cudart` from 12;
`none` for CPU), and conda-forge's own keys for `${{ compiler('cuda') }}`, `cuda_compiler`
(`nvcc`, `cuda-nvcc`) and `cuda_compiler_version`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml
from packaging.version import Version

from shipyard.conda.cuda_packages import cuda_conda_packages
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
    cuda: dict[str, list[str]] = {"cuda_runtime": [NO_CUDA]}
    if variant.cuda:
        packages = cuda_conda_packages(variant.cuda)
        cuda = {"cuda_runtime": [packages.runtime], "cuda_compiler": [packages.compiler],
                "cuda_compiler_version": [variant.cuda]}
    return {
        "release_version": [release.release.version],
        "variant_tag": [variant.tag],
        "cuda_version": [variant.cuda or NO_CUDA],
        "cuda_archs": [";".join(variant.archs) or NO_CUDA],
        **cuda,
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
