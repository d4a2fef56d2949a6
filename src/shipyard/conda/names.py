"""PyPI project names as conda package names. The bootstrap channel names its repacks as
conda-forge does, so that a recipe written against it builds unchanged from conda-forge: mostly
the normalised PyPI name, except where conda-forge chose another."""

from __future__ import annotations

from packaging.utils import canonicalize_name

# PyPI name (normalised) -> conda-forge's package of it, where they differ.
CONDA_FORGE_NAMES = {"installer": "python-installer"}


def conda_name(project: str) -> str:
    """`installer` -> `python-installer`; `scikit_build_core` -> `scikit-build-core`."""
    name = canonicalize_name(project)
    return CONDA_FORGE_NAMES.get(name, name)
