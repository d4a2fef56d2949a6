"""pytest plugin loaded into every component's test run: makes the modules beside the tests
importable by name, as the project's own runs see them (`from pytestingutils import conv`).

The run imports test modules and conftest files with --import-mode=importlib (no module of one
folder can clash with a same-named one of another, and nested conftest.py files without
__init__.py load each their own). That mode puts nothing on sys.path, so this plugin appends
each folder that pytest's default mode would prepend: the first folder above a test file that
is not a package. Appended, after site-packages: the installed package always wins over a
same-named folder among the tests. SHIPYARD_TESTS_ROOT is the copied tests folder, in a copy of
the project that holds none of its import packages (shipyard.testing.project_copy).

The run's folder is that copy: `python -m pytest` puts it first on sys.path, where a top-level
module of the project's (a flat layout's `setup.py`-listed module, say) would shadow the installed
one. It is taken off as this plugin loads, before any test or conftest.py imports anything.
"""

import os
import sys
from pathlib import Path

import pytest

if os.environ.get("SHIPYARD_TESTS_ROOT") and sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]


def _import_roots(root):
    """The folders a test or helper module under `root` is imported from: for each folder that
    holds Python files, itself, or the first folder above it that is not a package."""
    roots = []
    for folder, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        if not any(name.endswith(".py") for name in filenames):
            continue
        base = Path(folder)
        while (base / "__init__.py").is_file() and base != root.parent:
            base = base.parent
        if str(base) not in roots:
            roots.append(str(base))
    return roots


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    root = os.environ.get("SHIPYARD_TESTS_ROOT")
    if not root:
        return
    for folder in _import_roots(Path(root).resolve()):
        if folder not in sys.path:
            sys.path.append(folder)
