"""The package's floors (docs/architecture.md, "The layering rule"), read from the imports of
src/shipyard: no import circle between modules nor between packages, nothing imports the CLI,
and no import runs up a floor. A new import that breaks the rule fails here with the modules it joins."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
# Lowest first; a module may import its own floor or a lower one.
FLOORS = (("redaction",), ("errors",), ("plumbing", "resources"), ("release",), ("host",),
          ("record", "testing", "supply"), ("wheel", "conda", "image", "mobile"),
          ("publish", "report", "ci", "local_ci"), ("cli",))
FLOOR = {package: rank for rank, packages in enumerate(FLOORS) for package in packages}


def _module(path: Path) -> str:
    return ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")


def _exists(module: str) -> bool:
    base = SRC / module.replace(".", "/")
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


@functools.cache
def _import_statements() -> dict[str, tuple[ast.Import | ast.ImportFrom, ...]]:
    """Each module of src/shipyard with its import statements (local imports included), read once."""
    return {_module(path): tuple(node for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                                 if isinstance(node, (ast.Import, ast.ImportFrom)))
            for path in sorted(SRC.rglob("*.py"))}


def _imports() -> dict[str, set[str]]:
    """Each module of src/shipyard with the shipyard modules it imports (local imports included)."""
    edges: dict[str, set[str]] = {}
    for module, statements in _import_statements().items():
        found = edges.setdefault(module, set())
        for node in statements:
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("shipyard"):
                names = [node.module or "", *(f"{node.module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names if alias.name.startswith("shipyard")]
            found.update(name for name in names if _exists(name) and name != module)
    return edges


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_module_of_shipyard_imports_another_in_a_circle() -> None:
    assert _circles(_imports()) == []


def _package_imports(edges: dict[str, set[str]]) -> dict[str, dict[str, list[str]]]:
    """Each package of shipyard with the other packages it imports, and the module imports that do it."""
    found: dict[str, dict[str, list[str]]] = {}
    for module, targets in edges.items():
        for target in sorted(targets):
            if _package(module) != _package(target):
                found.setdefault(_package(module), {}).setdefault(_package(target), []).append(f"{module} -> {target}")
    return found


def test_no_package_of_shipyard_imports_another_in_a_circle() -> None:
    packages = _package_imports(_imports())
    circles = _circles({package: set(targets) for package, targets in packages.items()})
    joined = {" ".join(circle): [why for a in circle for b, whys in packages.get(a, {}).items() if b in circle
                                 for why in whys] for circle in circles}
    assert joined == {}, "packages that import each other, with the imports that join them"


def test_imports_run_down_the_floors() -> None:
    upward = sorted((module, target) for module, targets in _imports().items() for target in targets
                    if _package(module) in FLOOR and _package(target) in FLOOR
                    and FLOOR[_package(target)] > FLOOR[_package(module)])
    assert upward == [], "imports that run up a floor (docs/architecture.md, the layering rule)"


def test_every_package_of_shipyard_has_a_floor() -> None:
    packages = {path.name for path in (SRC / "shipyard").iterdir() if path.is_dir() and path.name != "__pycache__"}
    packages |= {path.stem for path in (SRC / "shipyard").glob("*.py") if path.stem != "__init__"}
    assert packages - set(FLOOR) == set()


def test_nothing_outside_the_cli_imports_it_and_no_cli_module_imports_a_sibling_but_shared() -> None:
    for module, targets in _imports().items():
        cli_targets = {t for t in targets if t == "shipyard.cli" or t.startswith("shipyard.cli.")}
        if _package(module) != "cli":
            assert not cli_targets, f"{module} imports {sorted(cli_targets)}"
        elif module not in ("shipyard.cli", "shipyard.cli.__main__"):
            assert cli_targets <= {"shipyard.cli.shared", "shipyard.cli.build_report"}, (module, sorted(cli_targets))


def test_no_module_imports_another_modules_private_names() -> None:
    """A planner hands its builder public names (issue: builders took eleven `_names` from their
    planners); a name with a leading underscore is its module's own."""
    taken = []
    for module, statements in _import_statements().items():
        for node in statements:
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("shipyard"):
                taken += [f"{module} takes {node.module}.{alias.name}" for alias in node.names
                          if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert taken == []
