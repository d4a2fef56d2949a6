"""The copy of a project that its tests run in: the project's tree as its own runs see it (its
pytest configuration, its root conftest.py, the files beside its tests), minus everything from
which the package itself could be imported, so that the tests exercise the installed package.

A tests folder outside the project (`tests: ../tests-of/x`, for projects whose sources ship no
tests) belongs to no project tree: it is copied alone, as the tests' own root.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# What no test reads and a project's tree may hold, at any depth: version control, environments
# and caches. Copying them costs time, and a cache (.pytest_cache's last failures, .hypothesis'
# examples) would make a run depend on the ones before it.
NOT_COPIED = frozenset({".git", ".hg", ".svn", ".tox", ".nox", ".venv", ".eggs", "__pycache__",
                        ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis"})
# Build outputs at the project's root: a wheel's build/lib holds an importable copy of the sources.
NOT_COPIED_AT_ROOT = frozenset({"build", "dist"})
# Extension modules built in place (`build_ext --inplace`) import only from the sources.
EXTENSION_SUFFIXES = (".so", ".pyd")


@dataclass(frozen=True)
class TestsCopy:
    """Where a copy of a component's tests lies: `root` is what pytest runs in and takes as its
    rootdir (the project's copy, or the copied tests folder alone), `tests` the tests folder in it."""

    root: Path
    tests: Path


def copy_for_tests(tests_dir: Path, project_dir: Path | None, dest: Path, *, keep_out: Path) -> TestsCopy:
    """Copy `project_dir` (the component's project folder) into `dest`, without its import
    packages, caches and build outputs, nor `keep_out` (the run's own folder, which a project at
    the release root holds); only `tests_dir` when it lies outside the project or no project is given."""
    tests_dir, keep_out = tests_dir.resolve(), keep_out.resolve()
    project = project_dir.resolve() if project_dir is not None else None
    if project is None or not tests_dir.is_relative_to(project):
        shutil.copytree(tests_dir, dest, ignore=_ignore(None, tests_dir, keep_out))
        return TestsCopy(dest, dest)
    shutil.copytree(project, dest, ignore=_ignore(project, tests_dir, keep_out))
    return TestsCopy(dest, dest / tests_dir.relative_to(project))


def _ignore(root: Path | None, tests_dir: Path, keep_out: Path) -> Callable[[str, list[str]], set[str]]:
    """copytree's filter: what is left out of a copy of the project `root` (None: of the tests alone)."""

    def ignored(folder: str, names: list[str]) -> set[str]:
        here = Path(folder)
        left = set()
        for name in names:
            path = here / name
            if name in NOT_COPIED or name.endswith(".egg-info") or path == keep_out or keep_out.is_relative_to(path):
                left.add(name)
            elif root is None or tests_dir.is_relative_to(path):
                continue  # the tests themselves, or a folder that holds them (a package's own tests/)
            elif here == root and (name in NOT_COPIED_AT_ROOT or _importable_from_root(path)):
                left.add(name)
            elif here == root / "src":
                left.add(name)  # a src layout: everything under src/ is the package's sources
        return left

    return ignored


def _importable_from_root(path: Path) -> bool:
    """A flat layout's package (a folder with __init__.py) or an extension built in place: what
    `import name` would find in the project's folder instead of site-packages."""
    if path.is_dir():
        return (path / "__init__.py").is_file()
    return path.name.endswith(EXTENSION_SUFFIXES)
