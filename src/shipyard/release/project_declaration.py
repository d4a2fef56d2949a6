"""What a component's own project files declare, read without building it: its PEP 517 build
backend (with the setuptools fallback of a setup.py-only project) and the Pythons it supports.

Any PEP 517 project can be a component: setuptools with or without pyproject.toml,
setuptools_scm, meson-python, hatchling, scikit-build-core. What its backend computes at build
time (the version, above all) is read from the built wheel, not from here.
"""

from __future__ import annotations

import configparser
import hashlib
import tomllib
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from shipyard.errors import ToolError
from shipyard.plumbing import command
from shipyard.plumbing.input_files import input_error

# PEP 517's fallback for a project without a [build-system] table (the one `build` uses too).
LEGACY_BACKEND = "setuptools.build_meta:__legacy__"
SCIKIT_BUILD_CORE = "scikit_build_core.build"
# The files that declare how a project builds: a change in one is a new build environment.
DECLARATION_FILES = ("pyproject.toml", "setup.py", "setup.cfg")
# Build plugins that compute the version from the project's git history: the tag, not the
# sources, decides the version, so it is part of the build's cache key.
VCS_VERSION_PLUGINS = frozenset({"setuptools-scm", "hatch-vcs", "versioningit", "dunamai", "setuptools-git-versioning"})


def pyproject_table(project: Path) -> dict[str, Any]:
    """The project's pyproject.toml as a mapping ({} when it has none)."""
    file = project / "pyproject.toml"
    if not file.is_file():
        return {}
    try:
        return tomllib.loads(file.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise input_error(file, "(file)", f"not valid TOML ({exc})", "fix the file") from exc


def build_backend(project: Path) -> str:
    """The project's PEP 517 backend: [build-system].build-backend, or setuptools' legacy backend
    for a setup.py-only project (PEP 517's fallback)."""
    return str(pyproject_table(project).get("build-system", {}).get("build-backend", LEGACY_BACKEND))


def writes_into_sources(backend: str) -> bool:
    """Whether the backend leaves files in the project as it builds (setuptools' build/ and
    egg-info, meson-python's .mesonpy-* folder); hatchling and scikit-build-core (with its
    build-dir) do not."""
    return backend.split(":")[0] in ("setuptools.build_meta", "mesonpy")


def declaration_hash(project: Path) -> str:
    """A hash of the files that declare how `project` builds (pyproject.toml, setup.py, setup.cfg)."""
    digest = hashlib.sha256()
    for name in DECLARATION_FILES:
        file = project / name
        digest.update(name.encode() + b"\0" + (file.read_bytes() if file.is_file() else b"-") + b"\0")
    return digest.hexdigest()[:16]


def uses_vcs_version(requirements: set[str] | tuple[str, ...]) -> bool:
    """Whether build requirements include a plugin that versions from git (setuptools_scm …)."""
    names = set()
    for text in requirements:
        try:
            names.add(canonicalize_name(Requirement(text).name))
        except InvalidRequirement:
            continue
    return bool(names & VCS_VERSION_PLUGINS)


def vcs_state(project: Path) -> str:
    """The git state a VCS-versioned project computes its version from (commit, nearest tag,
    dirty or not); '' outside a git checkout."""
    try:
        return command.run(["git", "-C", project, "describe", "--tags", "--long", "--dirty", "--always"],
                           timeout=30).stdout.strip()
    except ToolError:
        return ""


def _setup_cfg(project: Path) -> configparser.ConfigParser | None:
    """The project's setup.cfg, read; None when it has none."""
    cfg = project / "setup.cfg"
    if not cfg.is_file():
        return None
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(cfg, encoding="utf-8")
    except configparser.Error as exc:
        raise input_error(cfg, "(file)", f"not a valid setup.cfg ({exc})", "fix the file") from exc
    return parser


def declared_requires_python(project: Path) -> tuple[str, str] | None:
    """(specifier, where it is declared) from pyproject.toml's [project] table or setup.cfg's
    [options]; None when the project computes it (setup.py) or does not say."""
    table = pyproject_table(project).get("project", {})
    if "requires-python" in table:
        return str(table["requires-python"]), "pyproject.toml [project] requires-python"
    parser = _setup_cfg(project)
    if parser and parser.has_option("options", "python_requires"):
        return parser.get("options", "python_requires").strip(), "setup.cfg [options] python_requires"
    return None


def declared_version(project: Path) -> str | None:
    """The version the project states in its files (pyproject.toml's [project] version, unless
    listed as dynamic, or setup.cfg's [metadata] version); None when its build computes it."""
    table = pyproject_table(project).get("project", {})
    if "version" in table and "version" not in table.get("dynamic", ()):
        return str(table["version"])
    parser = _setup_cfg(project)
    if parser and parser.has_option("metadata", "version"):
        value = parser.get("metadata", "version").strip()
        return value if value and not value.startswith(("attr:", "file:")) else None
    return None
