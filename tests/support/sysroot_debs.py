"""What a test compares an SBOM with: the .debs apt downloaded into an assembled sysroot."""

from __future__ import annotations

import json

from shipyard.host.toolchains.discover import toolchain_cache
from shipyard.host.toolchains.sysroot import Sysroot, find_installed_sysroots


def installed_sysroot(name: str) -> Sysroot:
    """The assembled sysroot `name` of this machine's toolchain cache (conftest assembles it for slow tests)."""
    (sysroot,) = [s for s in find_installed_sysroots(toolchain_cache()) if s.name == name]
    return sysroot


def deb_versions(sysroot: Sysroot) -> dict[str, str]:
    """{package: version} of every .deb unpacked into the sysroot, from the file names apt gave
    them (sysroot.json's `debs`: name_version_arch), not from the per-file owners the SBOM reads."""
    debs = json.loads((sysroot.root / "sysroot.json").read_text())["debs"]
    return dict(entry.split("_")[:2] for entry in debs)
