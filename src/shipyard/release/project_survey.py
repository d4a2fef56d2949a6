"""What a project says about itself beyond its build, read from its files without building it, for
`shipyard init`: native or pure, the import name, the tests folder and what its tests need.

The PEP 517 metadata (name, version, Requires-Python, extras) is read by the caller (a [project]
table, or the backend's hook, a floor above) and handed in as a `ProjectMetadata`; this module
reads what metadata does not carry: the build backend and extension sources, the top-level
packages, pytest's `testpaths`, PEP 735 dependency groups.
"""

from __future__ import annotations

import configparser
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from shipyard.release.project_declaration import build_backend, pyproject_table

# Backends that build compiled code whatever the sources look like.
NATIVE_BACKENDS = {"mesonpy": "meson-python", "scikit_build_core.build": "scikit-build-core",
                   "maturin": "maturin", "py_build_cmake.build": "py-build-cmake"}
# Sources a compiler or Cython turns into an extension module.
NATIVE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".pyx", ".rs")
# Folders of a project that hold no importable package of its own and no sources of its wheel.
NOT_PACKAGES = frozenset({"tests", "test", "testing", "docs", "doc", "examples", "example", "benchmarks", "bench",
                          "build", "dist", "scripts", "tools", "ci", "venv", "env", "site-packages"})
NOT_MODULES = frozenset({"setup", "conftest", "noxfile", "tasks", "fabfile", "manage"})
# Where test requirements come from, in the order looked at: extras first, then dependency groups.
TEST_EXTRAS = ("test", "tests", "testing")
TEST_GROUPS = ("test", "tests", "dev")
USUAL_TEST_FOLDERS = ("tests", "test")


@dataclass(frozen=True)
class ProjectMetadata:
    """The core metadata shipyard reads from a project (PEP 621 [project] table or the PEP 517
    `prepare_metadata_for_build_wheel` hook): None where it is not known."""

    name: str | None
    version: str | None
    requires_python: str | None
    summary: str | None = None
    requires_dist: tuple[str, ...] = ()  # PEP 508 strings, extras as `extra == "x"` markers


@dataclass(frozen=True)
class ProjectSurvey:
    """What init writes for one project, each fact with where it came from (for the comments)."""

    folder: Path
    native: bool
    kind_reason: str
    import_name: str | None
    other_import_names: tuple[str, ...]
    tests: str | None  # relative to the project
    tests_reason: str
    test_requires: tuple[str, ...]
    test_requires_reason: str | None


def is_python_project(folder: Path) -> bool:
    """Whether `folder` holds a project a PEP 517 frontend builds (pyproject.toml or setup.py)."""
    return (folder / "pyproject.toml").is_file() or (folder / "setup.py").is_file()


def static_metadata(project: Path, *, need_version: bool) -> ProjectMetadata | None:
    """The metadata of the project's [project] table, or None when the table is missing or leaves
    a fact init needs to the build (dynamic name, requires-python or extras; the version only
    when `need_version`)."""
    table = pyproject_table(project).get("project")
    if not isinstance(table, dict) or "name" not in table:
        return None
    dynamic = set(table.get("dynamic") or ())
    if dynamic & {"requires-python", "optional-dependencies"} or (need_version and "version" in dynamic):
        return None
    requires: list[str] = [str(r) for r in table.get("dependencies") or ()]
    for extra, items in (table.get("optional-dependencies") or {}).items():
        requires += [f"{item}; extra == {extra!r}" if ";" not in item else f"{item} and extra == {extra!r}"
                     for item in map(str, items)]
    version = table.get("version") if "version" not in dynamic else None
    return ProjectMetadata(str(table["name"]), str(version) if version else None,
                           str(table["requires-python"]) if "requires-python" in table else None,
                           str(table["description"]) if table.get("description") else None, tuple(requires))


def survey(project: Path, metadata: ProjectMetadata) -> ProjectSurvey:
    """The facts of `project` its files show, `metadata` being its core metadata."""
    native, kind_reason = native_or_pure(project)
    name = canonicalize_name(metadata.name or project.resolve().name)
    packages = top_level_packages(project)
    wanted = name.replace("-", "_")
    ordered = sorted(packages, key=lambda p: (p.lower() != wanted, p))
    tests, tests_reason = tests_folder(project, ordered)
    requires, requires_reason = test_requirements(project, metadata, name)
    return ProjectSurvey(project, native, kind_reason, ordered[0] if ordered else None, tuple(ordered[1:]),
                         tests, tests_reason, requires, requires_reason)


def native_or_pure(project: Path) -> tuple[bool, str]:
    """Whether the project builds extension modules, and what says so (or why pure)."""
    backend = build_backend(project).split(":")[0]
    if backend in NATIVE_BACKENDS:
        return True, f"its build backend is {NATIVE_BACKENDS[backend]}"
    setup_py = project / "setup.py"
    if setup_py.is_file():
        text = setup_py.read_text(encoding="utf-8", errors="replace")
        for sign in ("Extension(", "ext_modules", "cythonize(", "RustExtension("):
            if sign in text:
                return True, f"setup.py says {sign.rstrip('(')}"
    setuptools = pyproject_table(project).get("tool", {}).get("setuptools", {})
    if isinstance(setuptools, dict) and setuptools.get("ext-modules"):
        return True, "pyproject.toml has [tool.setuptools] ext-modules"
    for source in _sources(project):
        if source.suffix in NATIVE_SUFFIXES:
            return True, f"it has compiled sources ({source.relative_to(project).as_posix()})"
    return False, f"no extension modules found (build backend {backend}, no {'/'.join(NATIVE_SUFFIXES)} sources)"


def _sources(project: Path) -> list[Path]:
    """The project's files outside tests, docs, build output and hidden folders, in a stable order."""
    found: list[Path] = []
    stack = [project]
    while stack:
        folder = stack.pop()
        for entry in sorted(folder.iterdir()):
            if entry.name.startswith(".") or entry.is_symlink():
                continue
            if entry.is_dir():
                if entry.name not in NOT_PACKAGES and not entry.name.endswith(".egg-info"):
                    stack.append(entry)
            else:
                found.append(entry)
    return sorted(found)


def top_level_packages(project: Path) -> list[str]:
    """The importable top-level names of a src layout (src/<pkg>) or a flat one (<pkg>/ beside
    pyproject.toml), single modules included; [] when there is none."""
    for base in (project / "src", project):
        if not base.is_dir():
            continue
        names = [entry.name for entry in sorted(base.iterdir())
                 if entry.is_dir() and entry.name.isidentifier() and entry.name not in NOT_PACKAGES
                 and (entry / "__init__.py").is_file()]
        names += [entry.stem for entry in sorted(base.glob("*.py"))
                  if entry.stem.isidentifier() and entry.stem not in NOT_MODULES]
        if names:
            return names
    return []


def tests_folder(project: Path, packages: list[str]) -> tuple[str | None, str]:
    """The folder of the project's tests relative to it (pytest's testpaths, else a usual folder),
    with where it came from; None when there is none."""
    for where, paths in _testpaths(project):
        for path in paths:
            if (project / path).is_dir() and not Path(path).is_absolute() and ".." not in Path(path).parts:
                return Path(path).as_posix(), f"pytest's testpaths in {where}"
    usual = [*USUAL_TEST_FOLDERS, *(f"{p}/tests" for p in packages), *(f"src/{p}/tests" for p in packages)]
    for path in usual:
        if (project / path).is_dir():
            return path, "the usual folder"
    return None, "no tests folder found (no testpaths, none of tests/, test/, <package>/tests)"


def _testpaths(project: Path) -> list[tuple[str, list[str]]]:
    """pytest's `testpaths` as each configuration file states it, in pytest's order of precedence."""
    found: list[tuple[str, list[str]]] = []
    options = pyproject_table(project).get("tool", {}).get("pytest", {}).get("ini_options", {})
    if isinstance(options, dict) and options.get("testpaths"):
        value = options["testpaths"]
        found.append(("pyproject.toml", [value] if isinstance(value, str) else [str(v) for v in value]))
    for name, section in (("pytest.ini", "pytest"), ("setup.cfg", "tool:pytest"), ("tox.ini", "pytest")):
        file = project / name
        if not file.is_file():
            continue
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read(file, encoding="utf-8")
        except configparser.Error:
            continue  # pytest would refuse the file too; the usual folders still apply
        if parser.has_option(section, "testpaths"):
            found.append((name, parser.get(section, "testpaths").split()))
    return found


def test_requirements(project: Path, metadata: ProjectMetadata, name: str) -> tuple[tuple[str, ...], str | None]:
    """What the project's tests need by its own word: its first `test`/`tests`/`testing` extra,
    else its first `test`/`tests`/`dev` dependency group (PEP 735); the project itself left out."""
    for extra in TEST_EXTRAS:
        found = _extra_requirements(metadata, extra)
        if found:
            return _without(found, name), f"the project's [{extra}] extra"
    groups = pyproject_table(project).get("dependency-groups", {})
    if isinstance(groups, dict):
        for group in TEST_GROUPS:
            if group in groups:
                found = _group_requirements(groups, group, ())
                return _without(found, name), f"the project's {group!r} dependency group"
    return (), None


def _extra_requirements(metadata: ProjectMetadata, extra: str) -> list[str]:
    found = []
    for text in metadata.requires_dist:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        marker = str(requirement.marker or "")
        # Read as text, not evaluated: `python_version < "3.11" and extra == "test"` belongs to the
        # extra whatever Python reads it. packaging writes the clause as `extra == "name"`.
        if extra not in {canonicalize_name(e) for e in re.findall(r'extra == "([^"]+)"', marker)}:
            continue
        # The extra's own condition is dropped; the rest of the marker (a python_version) is kept.
        rest = [m.strip() for m in re.split(r"\band\b", marker) if "extra ==" not in m]
        requirement.marker = None
        found.append(f"{requirement}; {' and '.join(rest)}" if rest else str(requirement))
    return found


def _group_requirements(groups: dict[str, Any], group: str, seen: tuple[str, ...]) -> list[str]:
    """A dependency group's requirements, `include-group` entries expanded (a cycle ends there)."""
    found: list[str] = []
    for item in groups.get(group) or ():
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict) and isinstance(item.get("include-group"), str):
            included = item["include-group"]
            if included not in seen and included != group:
                found += _group_requirements(groups, included, (*seen, group))
    return found


def _without(requirements: list[str], name: str) -> tuple[str, ...]:
    """`requirements` without the project itself (its wheel is installed anyway) or repeats."""
    kept: list[str] = []
    for text in requirements:
        try:
            if canonicalize_name(Requirement(text).name) == name:
                continue
        except InvalidRequirement:
            continue
        if text not in kept:
            kept.append(text)
    return tuple(kept)
