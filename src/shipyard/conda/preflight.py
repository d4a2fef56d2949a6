"""Before any conda build starts: can every package's requirements be met from the channels?

Each package's build, host and run+test requirements, minus the packages this run builds
itself, are solved with py-rattler against the channels the build will use. A requirement no
channel satisfies is reported naming the package, the requirements and every channel searched
(py-rattler's SolverError names neither the channels nor the package that asked). The solved
records' sha256s are also what a package's cache key holds of the channels.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rattler import Channel, Gateway, Subdir, VirtualPackage, solve
from rattler.exceptions import GatewayError, SolverError

from shipyard.errors import UnsatisfiableDependency

ENVIRONMENTS = ("build", "host", "run")  # run also holds the recipe's test requirements


def spec_name(spec: str) -> str:
    """The package name a match spec asks for ("numpy >=1.22" -> "numpy")."""
    match = re.match(r"\s*([^\s=<>!~\[]+)", spec)
    return match.group(1).lower() if match else spec.strip().lower()


def _specs(entries: Iterable[Any]) -> list[str]:
    # pin_subpackage/pin_compatible entries name an output of the same recipe: built here.
    return [e for e in entries if isinstance(e, str)]


def requirements_of(recipe: dict[str, Any]) -> dict[str, list[str]]:
    """build/host/run match specs of a rendered (stage 1) recipe; run gets the tests' too."""
    requirements = recipe.get("requirements") or {}
    out = {env: _specs(requirements.get(env) or []) for env in ENVIRONMENTS}
    for test in recipe.get("tests") or []:
        if not isinstance(test, dict):
            continue
        for kind in test.values():
            if isinstance(kind, dict):
                needs = kind.get("requirements") or {}
                out["run"] += _specs(needs.get("run") or []) + _specs(needs.get("build") or [])
                if kind.get("python_version"):
                    out["run"].append(f"python {kind['python_version']}")
        needs = test.get("requirements") or {}
        out["run"] += _specs(needs.get("run") or []) + _specs(needs.get("build") or [])
    return out


@dataclass
class PreflightPackage:
    """One package to build: what it is called, what its environments need."""

    label: str  # name-version-build
    recipe: Path  # the recipe a person edits
    subdir: str  # linux-64 or noarch
    requirements: dict[str, list[str]]
    solved: dict[str, list[str]] = field(default_factory=dict)  # env -> sorted "file_name sha256"


async def _solve_all(packages: Sequence[PreflightPackage], produced: set[str], channels: Sequence[str],
                     host_subdir: str, cache_dir: Path) -> list[str]:
    gateway = Gateway(cache_dir=cache_dir)
    sources = [Channel(url) for url in channels]
    virtual = VirtualPackage.detect()
    # Every environment solves for this host's platform (noarch packages build here too).
    platforms = [Subdir(host_subdir), Subdir("noarch")]
    problems: list[str] = []
    for package in packages:
        for env in ENVIRONMENTS:
            specs = sorted({s for s in package.requirements.get(env, []) if spec_name(s) not in produced})
            if not specs:
                package.solved[env] = []
                continue
            try:
                records = await solve(sources, specs, gateway=gateway, platforms=platforms,
                                      virtual_packages=virtual)
            except SolverError as exc:
                problems.append(f"{package.label} ({package.recipe}): its {env} requirements "
                                f"[{', '.join(specs)}] cannot be met: {_solver_words(exc)}")
                continue
            except GatewayError as exc:
                problems.append(f"{package.label} ({package.recipe}): a channel cannot be read: "
                                f"{str(exc).strip().splitlines()[0]}")
                continue
            package.solved[env] = sorted(f"{r.file_name} {r.sha256.hex() if r.sha256 else ''}" for r in records)
    return problems


def _solver_words(exc: Exception) -> str:
    text = " ".join(line.strip() for line in str(exc).strip().splitlines() if line.strip())
    return text.removeprefix("Cannot solve the request because of: ")


def preflight(packages: Sequence[PreflightPackage], *, produced: set[str], channels: Sequence[str],
              host_subdir: str, cache_dir: Path) -> None:
    """Solve every package's environments; raise UnsatisfiableDependency listing each that
    cannot be, with the channels searched. Fills each package's `solved`."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    problems = asyncio.run(_solve_all(packages, produced, channels, host_subdir, cache_dir))
    if problems:
        searched = "\n".join(f"    {c}" for c in channels)
        raise UnsatisfiableDependency(
            f"{len(problems)} conda package{'s' if len(problems) > 1 else ''} cannot be built: "
            f"{'their' if len(problems) > 1 else 'its'} dependencies are not in the channels "
            f"(nothing was built)\n" + "\n".join(f"  {p}" for p in problems)
            + f"\n  channels searched, in this order:\n{searched}\n"
            "  fix: add the missing packages to one of these channels, pass --channel with one that has them "
            "(or --bootstrap-channel where release.yaml's conda.channels cannot be reached), or correct the "
            "requirement in the recipe")
