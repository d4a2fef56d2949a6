"""The device code of a CUDA conda package: the wheels' arch check (wheel/checks.py) run on the
binaries the package installs, and what it found, written into its info/about.json.

In conda the kernels live in the core package (libember cu118); the per-Python packages and the
mutex hold none and record nothing. A package with kernels must hold SASS for exactly the
variant's arch list and PTX for its highest arch, as a wheel must; what every one of its
kernel-bearing binaries carries is recorded (record.manifest.CudaArchs), never the list.
"""

from __future__ import annotations

import json
from pathlib import Path

from shipyard.conda.features import EXTRA_KEY
from shipyard.errors import BuildError
from shipyard.host.toolchains.resolve import Toolchain
from shipyard.record.manifest import CudaArchs
from shipyard.release.spec import Variant
from shipyard.supply.binaries import conda_binaries, conda_files
from shipyard.wheel.checks import binaries_device_code, check_device_code, toolkit_device_code

ABOUT = "info/about.json"


def checked_cuda_archs(package: Path, variant: Variant, toolchain: Toolchain | None) -> CudaArchs | None:
    """What the kernel-bearing binaries of a freshly built `package` carry; None when it has none
    (or the variant is CPU). BuildError when they break the arch rule, naming the package."""
    read = toolkit_device_code(variant, toolchain)
    if read is None:
        return None
    found = binaries_device_code(conda_binaries(package), read)
    if not found:
        return None
    failures = check_device_code(package.name, variant.archs, found.values())
    if failures:
        raise BuildError("; ".join(str(f) for f in failures) + f" (release.yaml variants.{variant.name}.arch_list; "
                         "the recipe must compile with SHIPYARD_CMAKE_ARGS' arch list)")
    return CudaArchs.common_to(found.values())


def about_with_cuda_archs(package: Path, cuda_archs: CudaArchs) -> bytes:
    """`package`'s info/about.json with `extra.shipyard.cuda_archs` ({sass, ptx}) set."""
    about = json.loads(conda_files(package, "info")[ABOUT])
    about.setdefault("extra", {}).setdefault(EXTRA_KEY, {})["cuda_archs"] = cuda_archs.to_json()
    return (json.dumps(about, indent=2) + "\n").encode()


def recorded_cuda_archs(package: Path) -> CudaArchs | None:
    """The verified archs a built package's about.json records (None: no kernels)."""
    about = json.loads(conda_files(package, "info").get(ABOUT, b"{}"))
    found = ((about.get("extra") or {}).get(EXTRA_KEY) or {}).get("cuda_archs")
    return CudaArchs.model_validate(found) if isinstance(found, dict) else None
