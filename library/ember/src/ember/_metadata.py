"""Build metadata: what shipyard stamped into the wheel, and where the C++ API lives."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

# Like torch.utils.cmake_prefix_path: pass as CMAKE_PREFIX_PATH (or use
# -Dember_DIR=<this>/ember) so find_package(ember CONFIG) finds the installed libember. A wheel
# bundles the core inside the package (<package>/share/cmake, <package>/lib); a conda install
# has it in the environment, as the libember package (<prefix>/lib/cmake, <prefix>/lib).
_BUNDLED_CMAKE = os.path.join(_PACKAGE_DIR, "share", "cmake")
cmake_prefix_path = (_BUNDLED_CMAKE if os.path.isdir(_BUNDLED_CMAKE)
                     else os.path.join(sys.prefix, "lib", "cmake"))


def _read_json(name: str) -> Dict[str, Any]:
    path = os.path.join(_PACKAGE_DIR, name)
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def build_info() -> Dict[str, Any]:
    """The wheel's ``_build_info.json`` (variant, cuda_version, cuda_archs, git_sha, python),
    or ``{"variant": "unlabelled", ...}`` for a build that shipyard did not label."""
    try:
        return _read_json("_build_info.json")
    except FileNotFoundError:
        from . import _C

        return {
            "variant": "unlabelled",
            "labelled": False,
            "cuda_version": None,
            "cuda_archs": list(_C.cuda_arch_list()),
            "git_sha": None,
            "python": None,
        }


def features() -> Any:
    """The wheel's ``_features.json`` (feature ids and statuses), or an unlabelled marker."""
    try:
        return _read_json("_features.json")
    except FileNotFoundError:
        return {"labelled": False, "features": []}


def package_version() -> str:
    """The version this copy was published as, as torch.__version__ is: what shipyard stamped
    (a nightly's ``1.7.0.dev20261201``; the variant is ``build_info()["variant"]``), else the
    installed distribution's own, else ``0+unknown``."""
    stamped = build_info().get("version")
    if stamped:
        return str(stamped)
    import importlib.metadata  # only here: every labelled build has its version stamped

    try:
        return importlib.metadata.version("ember")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"
