"""The third-party wheels an image installs below the release's own (numpy, NVIDIA's CUDA
runtime): resolved once with pip for the image's Python and platform, pinned, and kept in
shipyard's cache, so an unchanged re-run neither asks PyPI nor changes the dependency layer."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

from shipyard.errors import ToolchainMissing
from shipyard.host.toolchains.cuda_recipes import cuda_runtime_wheel
from shipyard.host.toolchains.discover import cache_root, discover
from shipyard.plumbing import command
from shipyard.plumbing.file_lock import exclusive
from shipyard.plumbing.hashing import sha256_hex
from shipyard.plumbing.progress import Progress
from shipyard.plumbing.wheel_metadata import requires_dist
from shipyard.release.spec import Variant

# Bump when what goes into a wheelhouse changes.
_RECIPE = "1"


@dataclass(frozen=True)
class Wheelhouse:
    """A folder of wheels plus `requirements.txt` pinning every one of them (name==version)."""

    path: Path
    pins: tuple[str, ...]


def third_party_requirements(wheels: Iterable[Path], own_projects: Iterable[str], variant: Variant) -> list[str]:
    """What the release wheels require that the release does not make, plus the CUDA runtime
    wheel of a CUDA variant (ember's CUDA backend loads it where a driver is mounted)."""
    own = {canonicalize_name(p) for p in own_projects}
    found: dict[str, str] = {}
    for wheel in wheels:
        for req in requires_dist(wheel):
            if canonicalize_name(req.name) in own or req.extras:
                continue
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue  # an extra's requirement, or another platform's
            found.setdefault(canonicalize_name(req.name), str(Requirement(f"{req.name}{req.specifier}")))
    if variant.cuda:
        pin = cuda_runtime_wheel(variant.cuda)
        found[canonicalize_name(Requirement(pin).name)] = pin
    return [found[name] for name in sorted(found)]


def ensure_wheelhouse(requirements: list[str], python: str, platform_tag: str, *,
                      progress: Progress | None = None, refresh: bool = False) -> Wheelhouse:
    """The wheels for `requirements` (and their dependencies) for CPython `python` on
    `platform_tag`, from the cache when the same request was resolved before."""
    request = {"recipe": _RECIPE, "requirements": sorted(requirements), "python": python, "platform": platform_tag}
    key = sha256_hex(json.dumps(request, sort_keys=True).encode())[:24]
    root = cache_root() / "image-deps"
    final = root / key
    with exclusive(root / f".{key}.lock"):
        if (final / "requirements.txt").is_file() and not refresh:
            return _load(final)
        interpreter = discover().interpreter(python)
        if interpreter is None:
            raise ToolchainMissing(f"resolving the image's dependencies needs a Python {python} here "
                                   f"(pyenv install {python})")
        if progress:
            progress(f"resolve the image's dependencies with pip: {' '.join(requirements)}")
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
        try:
            if requirements:
                nodot = python.replace(".", "")
                command.run([interpreter.path, "-m", "pip", "download", "--only-binary", ":all:",
                             "--python-version", python, "--implementation", "cp", "--abi", f"cp{nodot}",
                             *[arg for tag in compatible_platforms(platform_tag) for arg in ("--platform", tag)],
                             "--disable-pip-version-check", "--no-input",
                             "--progress-bar", "off", "--dest", staging, *requirements],
                            timeout=1800, what="pip download (the image's dependencies)",
                            extra_env={"PIP_NO_CACHE_DIR": "1"})
            found = [parse_wheel_filename(w.name) for w in staging.glob("*.whl")]
            pins = sorted(f"{canonicalize_name(name)}=={version}" for name, version, _b, _t in found)
            (staging / "requirements.txt").write_text("".join(f"{p}\n" for p in pins))
            if final.exists():
                shutil.rmtree(final)
            os.replace(staging, final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return _load(final)


def compatible_platforms(platform_tag: str) -> list[str]:
    """The platform tags a glibc platform accepts, newest first: pip takes `--platform` literally,
    so manylinux_2_35 must also name 2_34 … 2_17 (where numpy's wheels sit) and the legacy aliases."""
    match = re.fullmatch(r"manylinux_(\d+)_(\d+)_(\w+)", platform_tag)
    if match is None:
        return [platform_tag]
    major, minor, arch = int(match.group(1)), int(match.group(2)), match.group(3)
    tags = [f"manylinux_{major}_{m}_{arch}" for m in range(minor, 4, -1)]
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    return tags + [f"{legacy[m]}_{arch}" for m in legacy if m <= minor]


def _load(path: Path) -> Wheelhouse:
    pins = tuple(line for line in (path / "requirements.txt").read_text().splitlines() if line)
    return Wheelhouse(path, pins)
