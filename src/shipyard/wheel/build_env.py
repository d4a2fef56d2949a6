"""Per-interpreter build environments with the PEP 517 backends preinstalled.

Builds run with `--no-isolation` inside these, so a backend is installed once per Python
instead of once per build (and the environment's contents are part of the cache key).
"""

from __future__ import annotations

import hashlib
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path

from shipyard import command
from shipyard.toolchains.discover import Interpreter

# Always present: the frontend itself and the backends ember's components use.
BASE_REQUIREMENTS = ("build>=1.2", "scikit-build-core>=0.10", "pybind11>=2.13", "hatchling>=1.25",
                     "setuptools>=70", "wheel>=0.43")


@dataclass(frozen=True)
class BuildEnv:
    interpreter: Interpreter
    root: Path
    requirements: tuple[str, ...]
    identity: str  # hash of `pip freeze`: the exact backend versions

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"


def build_requirements(project: Path) -> tuple[str, ...]:
    """[build-system].requires of a pyproject-based project."""
    data = tomllib.loads((project / "pyproject.toml").read_text())
    return tuple(data.get("build-system", {}).get("requires", []))


def ensure_build_env(interpreter: Interpreter, requirements: tuple[str, ...], state: Path) -> BuildEnv:
    """A venv of `interpreter` holding `requirements` (created once, reused after)."""
    wanted = tuple(sorted(set(BASE_REQUIREMENTS) | set(requirements)))
    tag = hashlib.sha256("\n".join(wanted).encode()).hexdigest()[:12]
    root = state / "envs" / f"build-{interpreter.full_version}-{tag}"
    marker = root / "shipyard-freeze.txt"
    if not marker.is_file():
        if root.exists():
            shutil.rmtree(root)
        command.run([interpreter.path, "-m", "venv", root], what=f"venv for Python {interpreter.version}")
        command.run([root / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                     *wanted], timeout=1200, what=f"build backends for Python {interpreter.version}")
        freeze = command.run([root / "bin" / "python", "-m", "pip", "freeze", "--all"]).stdout
        marker.write_text(freeze)
    identity = hashlib.sha256(marker.read_bytes()).hexdigest()[:16]
    return BuildEnv(interpreter, root, wanted, identity)
