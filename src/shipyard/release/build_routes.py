"""What shipyard can build a platform's wheels with, and why a platform it cannot build is refused.

The one place for these facts: `validate` refuses a platform no route builds (one line per platform,
with the reason and what would be needed), `doctor` names a value that works in its fix, and the CI
lane generator installs the compiler a platform's promise takes (`route_for_glibc`). A route to Linux
wheels is:

- a compiler that links a glibc no newer than the tag promises, run on an x86_64 host (this machine,
  or the `debian:bookworm` builder container on the platform's runner, ci/runners.py): a Debian
  sysroot of resources/sysroots.toml (bullseye, glibc 2.31) for the promises it keeps, and for older
  ones, down to manylinux2014 (glibc 2.17), zig's clang from the `ziglang` package (a dependency of
  shipyard, so on every host shipyard is) targeting exactly the promised glibc's symbol versions
  (host/toolchains/zig.py);
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


# The oldest glibc the zig route targets: manylinux2014's, the oldest manylinux policy pip, cibuildwheel
# and PyPI's build images still serve. zig's clang would target an older one too, but no Python the
# project could test on runs there, and CentOS 6 (glibc 2.12) has been out of support since 2020.
ZIG_OLDEST_GLIBC = "2.17"


@dataclass(frozen=True)
class ZigTarget:
    """zig's clang targeting one glibc's symbol versions (host/toolchains/zig.py): the route for a
    promise older than any sysroot's glibc."""

    glibc: str  # "2.17"

    @property
    def name(self) -> str:
        """What `shipyard toolchain install` takes: zig-2.17."""
        return f"zig-{self.glibc}"

    @property
    def triple(self) -> str:
        """zig's -target: x86_64-linux-gnu.2.17 (the glibc version picks the symbol versions linked)."""
        return f"{SYSROOT_TRIPLE}.{self.glibc}"


def zig_target_named(name: str) -> ZigTarget | None:
    """The zig target `shipyard toolchain install` names (zig-2.17), None for another name or a glibc
    the zig route does not serve."""
    match = re.fullmatch(r"zig-(\d+\.\d+)", name)
    if match is None:
        return None
    route = route_for_glibc(match.group(1))
    return route if isinstance(route, ZigTarget) and route.glibc == match.group(1) else None


def route_for_glibc(promise: str) -> SysrootRecipe | ZigTarget | None:
    """What compiles wheels that keep a glibc `promise` ('2.17'): the sysroot with the newest glibc that
    keeps it (bullseye for 2.31 and newer), else zig targeting the promise itself (2.17 … 2.30); None
    for a promise older than manylinux2014's."""
    if (recipe := recipe_for_glibc(promise)) is not None:
        return recipe
    return ZigTarget(promise) if _glibc_tuple(promise) >= _glibc_tuple(ZIG_OLDEST_GLIBC) else None


def oldest_buildable_tag(arch: str = LINUX_WHEEL_ARCH) -> str:
    """The oldest-glibc manylinux tag a route keeps: manylinux2014's (manylinux_2_17_x86_64), the value
    to promise where an older one is refused."""
    return f"manylinux_{ZIG_OLDEST_GLIBC.replace('.', '_')}_{arch}"


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
                           f"the {sysroots} sysroot's and zig's, {LINUX_WHEEL_ARCH} only (amd64 .debs, x86_64 "
                           f"targets), and it has no {platform.arch} sysroot for the builder container on "
                           f"{platform.github_runner}",
                           f"an {platform.arch} sysroot, which shipyard does not have; remove the platform (Linux "
                           f"wheels build for linux-{LINUX_WHEEL_ARCH}, {works})")
    if tag.startswith("musllinux"):
        return Unbuildable("wheel_platform_tag", f"{tag} needs a musl C library, compiler and Python, and shipyard "
                           f"has none: its compilers target glibc and its Pythons are glibc builds",
                           f"a musl toolchain and musl Pythons (an Alpine builder), which shipyard does not have; "
                           f"promise {works} instead, or remove the platform")
    if runner is not None:
        return runner
    glibc = platform.promised_glibc
    if glibc is None:
        return None  # linux_x86_64: the host's compiler, no repair (a tag PyPI refuses, but it builds)
    if route_for_glibc(glibc) is None:
        return Unbuildable("wheel_platform_tag", f"{tag} promises glibc {glibc}, older than any compiler shipyard "
                           f"has: its oldest target is manylinux2014's glibc {ZIG_OLDEST_GLIBC} (zig), the oldest "
                           f"policy pip and PyPI's build images still serve",
                           f"a compiler and Pythons for glibc {glibc}, which shipyard does not have; promise "
                           f"{works} (manylinux2014: installs on CentOS 7, RHEL 8, Debian 8, Ubuntu 14.04 and newer)")
    policies = auditwheel_policies(arch)
    policy = re.sub(rf"_{re.escape(arch)}$", "", tag)
    if policies is not None and policy not in policies:
        known = sorted((p for p in policies if p.startswith("manylinux_")
                        and route_for_glibc(p.removeprefix("manylinux_").replace("_", ".")) is not None),
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
