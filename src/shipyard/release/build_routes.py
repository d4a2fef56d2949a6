"""What shipyard can build a platform's wheels with, and why a platform it cannot build is refused.

The one place for these facts: `validate` refuses a platform no route builds (one line per platform,
with the reason and what would be needed), `doctor` names a value that works in its fix, and the CI
lane generator assembles the sysroot a platform's promise takes. A route to Linux wheels is:

- a compiler that links a glibc no newer than the tag promises: a Debian sysroot of
  resources/sysroots.toml (bullseye, glibc 2.31), whose gcc runs on an x86_64 host (this machine,
  or the `debian:bookworm` builder container on the platform's runner, ci/runners.py);
- an interpreter for the architecture: pyenv's here, uv's on the runner, all glibc builds;
- auditwheel, which repairs every manylinux wheel to exactly its tag (`--only-plat`) and knows only
  its own policies (manylinux_2_31, 2_34 …, no 2_32 or 2_33).

A tag that promises a NEWER glibc than a sysroot's (manylinux_2_35_x86_64) is fine: the wheel needs no
symbol newer than the sysroot's, which the newer policy allows, and auditwheel labels it as promised.
Windows and macOS wheels build on their own runners with the runner's compilers (ci/host_lanes.py).
"""

from __future__ import annotations

import functools
import json
import re
import tomllib
from dataclasses import dataclass
from importlib import resources

from shipyard.release.spec import PLATFORM_DEFAULTS, Platform


@dataclass(frozen=True)
class SysrootRecipe:
    """One entry of resources/sysroots.toml."""

    name: str  # "bullseye"
    suite: str
    component: str
    glibc: str  # "2.31"
    gcc: int
    packages: tuple[str, ...]


# The architecture Linux wheels build for: the sysroots are assembled from amd64 .debs
# (host/apt_sources.py), their gcc runs on and targets x86_64, and the builder container's Pythons are
# the runner's own architecture's.
LINUX_WHEEL_ARCH = "x86_64"
SYSROOT_TRIPLE = f"{LINUX_WHEEL_ARCH}-linux-gnu"

# Architecture names a platform may use for the one above (PEP 425 says x86_64, Windows amd64).
_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64"}

# The operating system a GitHub-hosted runner label runs (ubuntu-22.04, windows-2022, macos-14); a
# self-hosted label says nothing here. Linux jobs run in a container, which only Linux runners start.
_HOSTED_RUNNER_OS = {"ubuntu": "linux", "windows": "windows", "macos": "macos"}


def _glibc_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def sysroot_recipes() -> list[SysrootRecipe]:
    """The sysroots shipyard can assemble, from resources/sysroots.toml."""
    data = tomllib.loads(resources.files("shipyard.resources").joinpath("sysroots.toml").read_text())
    return [SysrootRecipe(name, t["suite"], t["component"], t["glibc"], int(t["gcc"]), tuple(t["packages"]))
            for name, t in data["sysroots"].items()]


def recipe_for_glibc(promise: str) -> SysrootRecipe | None:
    """The recipe with the newest glibc that still keeps `promise` ('2.31'), if any."""
    fitting = [r for r in sysroot_recipes() if _glibc_tuple(r.glibc) <= _glibc_tuple(promise)]
    return max(fitting, key=lambda r: _glibc_tuple(r.glibc)) if fitting else None


def oldest_buildable_tag(arch: str = LINUX_WHEEL_ARCH) -> str:
    """The oldest-glibc manylinux tag a sysroot keeps: manylinux_2_31_x86_64, the value to promise."""
    oldest = min(sysroot_recipes(), key=lambda r: _glibc_tuple(r.glibc))
    return f"manylinux_{oldest.glibc.replace('.', '_')}_{arch}"


@functools.cache
def auditwheel_policies(arch: str) -> frozenset[str] | None:
    """The manylinux policies (names and aliases: manylinux_2_17, manylinux2014) the installed
    auditwheel repairs to for `arch`; None when auditwheel is not installed (nothing is refused then)."""
    try:
        text = resources.files("auditwheel").joinpath("policy/manylinux-policy.json").read_text()
    except (ModuleNotFoundError, OSError):
        return None
    return frozenset(name for policy in json.loads(text) if arch in (policy.get("symbol_versions") or {})
                     for name in (policy["name"], *policy.get("aliases", ())))


@dataclass(frozen=True)
class Unbuildable:
    """Why no route of shipyard builds a platform's wheels, and what would."""

    key: str  # the platform's key the reason is about: wheel_platform_tag, arch, github_runner
    reason: str
    needed: str  # what would be needed, and the value that works where there is one


def unbuildable(platform: Platform) -> Unbuildable | None:
    """Why `platform`'s wheels cannot be built here or on its runner, or None when a route builds them."""
    runner = _runner_problem(platform)
    if platform.os != "linux":
        return runner  # Windows and macOS wheels build on their runners
    tag = platform.wheel_platform_tag
    arch = _ARCH_ALIASES.get(platform.arch.lower(), platform.arch.lower())
    works = oldest_buildable_tag()
    if arch != LINUX_WHEEL_ARCH:
        sysroots = ", ".join(r.name for r in sysroot_recipes())
        return Unbuildable("arch", f"no route builds {platform.arch} Linux wheels: shipyard's Linux compilers are "
                           f"the {sysroots} sysroot's, {LINUX_WHEEL_ARCH} only (amd64 .debs), and it has no "
                           f"{platform.arch} one for the builder container on {platform.github_runner}",
                           f"an {platform.arch} sysroot, which shipyard does not have; remove the platform (Linux "
                           f"wheels build for linux-{LINUX_WHEEL_ARCH}, {works})")
    if tag.startswith("musllinux"):
        return Unbuildable("wheel_platform_tag", f"{tag} needs a musl C library, compiler and Python, and shipyard "
                           f"has none: its sysroots are Debian's (glibc) and its Pythons glibc builds",
                           f"a musl toolchain and musl Pythons (an Alpine builder), which shipyard does not have; "
                           f"promise {works} instead, or remove the platform")
    if runner is not None:
        return runner
    glibc = platform.promised_glibc
    if glibc is None:
        return None  # linux_x86_64: the host's compiler, no repair (a tag PyPI refuses, but it builds)
    if recipe_for_glibc(glibc) is None:
        oldest = min(sysroot_recipes(), key=lambda r: _glibc_tuple(r.glibc))
        return Unbuildable("wheel_platform_tag", f"{tag} promises glibc {glibc}, older than any compiler shipyard "
                           f"has: its oldest sysroot is Debian {oldest.suite}'s glibc {oldest.glibc} (no older "
                           f"Debian suite is served by the machine's mirror)",
                           f"a compiler that targets glibc {glibc}'s symbol versions, which shipyard does not "
                           f"have; promise {works} (installs on Debian 11, Ubuntu 20.04, RHEL 9 and newer)")
    policies = auditwheel_policies(arch)
    policy = re.sub(rf"_{re.escape(arch)}$", "", tag)
    if policies is not None and policy not in policies:
        known = sorted((p for p in policies if p.startswith("manylinux_")
                        and recipe_for_glibc(p.removeprefix("manylinux_").replace("_", ".")) is not None),
                       key=lambda p: _glibc_tuple(p.removeprefix("manylinux_").replace("_", ".")))
        return Unbuildable("wheel_platform_tag", f"auditwheel, which repairs every Linux wheel to exactly its "
                           f"tag, has no {policy} policy (it has {', '.join(known)})",
                           f"a tag auditwheel knows; promise {works} or one of those")
    return None


def _runner_problem(platform: Platform) -> Unbuildable | None:
    """A GitHub-hosted runner of another OS (the job's steps are the platform's), or an arm runner for
    an x86_64 Linux platform (its builder container would be arm64)."""
    label = platform.github_runner.lower()
    runs = _HOSTED_RUNNER_OS.get(label.split("-", 1)[0])
    if runs is not None and runs != platform.os:
        return Unbuildable("github_runner", f"{platform.github_runner} is a GitHub {runs} runner, and "
                           f"{platform.os} wheels build on a {platform.os} runner",
                           f"a {platform.os} runner; set github_runner to one (e.g. "
                           f"{_default_runner(platform.os)})")
    if runs == "linux" and label.endswith("-arm") and platform.arch.lower() in (LINUX_WHEEL_ARCH, *_ARCH_ALIASES):
        return Unbuildable("github_runner", f"{platform.github_runner} is an arm64 runner: its builder container "
                           f"and compilers are arm64, not {platform.arch}",
                           f"an {platform.arch} runner; set github_runner to one (e.g. {_default_runner('linux')})")
    return None


def _default_runner(os_name: str) -> str:
    return next(d["github_runner"] for name, d in PLATFORM_DEFAULTS.items() if name.startswith(f"{os_name}-"))
