"""What a test id of feature_status.yaml names, in one place for `shipyard validate` (which reads
test files with `ast`, never importing them) and for the pytest plugin (which sees the ids that
pytest collected). It imports nothing but the standard library: the plugin runs in a
component's environment, where shipyard is not installed.

A test id is relative to one root (the repository for validate, the tests folder at run time):
`sub/` (a folder), `test_x.py` (a file), `test_x.py::TestA` (a class), `test_x.py::test_y` (a
test, every case of it when parametrised) or `test_x.py::test_y[case]` (one parametrised case,
spelled as pytest spells its node id). The empty id is the root folder itself, every test: a
feature proved by its whole tests folder (`tests/`, as `shipyard init` writes it).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path


def function_id(test_id: str) -> str:
    """The id without its parametrised case: `test_x.py::test_y[1]` -> `test_x.py::test_y`."""
    head, sep, last = test_id.rpartition("::")
    return f"{head}{sep}{last.split('[', 1)[0]}" if sep else test_id


def case_of(test_id: str) -> str | None:
    """The parametrised case an id names (`1` for `test_x.py::test_y[1]`), or None."""
    _, sep, last = test_id.rpartition("::")
    if not sep or "[" not in last or not last.endswith("]"):
        return None
    return last.split("[", 1)[1][:-1]


def selects(test_id: str, node_id: str) -> bool:
    """Whether `test_id` names the collected test `node_id` (both relative to the same root)."""
    if node_id == test_id or node_id.startswith(test_id + "::"):
        return True
    if case_of(test_id) is None and "::" in test_id and node_id.startswith(test_id + "["):
        return True  # every case of a parametrised test
    folder = test_id.rstrip("/")
    if not folder:  # the root folder itself: every test under it
        return True
    return "::" not in test_id and node_id.partition("::")[0].startswith(folder + "/")


@dataclass(frozen=True)
class DefinedTest:
    """A test function as its file defines it (pytest's default naming: `test*`, in a `Test*`
    class or a unittest TestCase)."""

    id: str  # file::[Class::]name, no case
    line: int
    function: ast.FunctionDef | ast.AsyncFunctionDef
    classes: tuple[ast.ClassDef, ...]  # the enclosing classes, outermost first
    # The ids of its parametrised cases when the source states them all as literals; () when it
    # is not parametrised at all; None when they cannot be known without running it.
    cases: tuple[str, ...] | None


def defined_tests(tree: ast.Module, relative: str, param_fixtures: frozenset[str] = frozenset()
                  ) -> list[DefinedTest]:
    """Every test `tree` (the file `relative`) defines. `param_fixtures` names the fixtures with
    `params=` that the test can see (they parametrise it in ways the source does not spell)."""
    module_marks = _parametrize_marks(pytestmark_of(tree.body))
    return _walk(tree.body, relative, (), [module_marks], param_fixtures | _param_fixture_names(tree))


def _walk(body: list[ast.stmt], prefix: str, classes: tuple[ast.ClassDef, ...], outer: list[list[ast.Call]],
          param_fixtures: frozenset[str]) -> list[DefinedTest]:
    tests: list[DefinedTest] = []
    for stmt in body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name.startswith("test"):
            marks = [*reversed(_parametrize_marks(stmt.decorator_list)), *(m for level in reversed(outer)
                                                                             for m in level)]
            args = {a.arg for a in [*stmt.args.posonlyargs, *stmt.args.args, *stmt.args.kwonlyargs]}
            cases = None if args & param_fixtures else _cases(marks)
            tests.append(DefinedTest(f"{prefix}::{stmt.name}", stmt.lineno, stmt, classes, cases))
        elif isinstance(stmt, ast.ClassDef) and _is_test_class(stmt):
            own = [*reversed(_parametrize_marks(stmt.decorator_list)),
                   *_parametrize_marks(pytestmark_of(stmt.body))]
            tests += _walk(stmt.body, f"{prefix}::{stmt.name}", (*classes, stmt), [*outer, own], param_fixtures)
    return tests


def test_id_problem(test_id: str, tests: list[DefinedTest]) -> str | None:
    """Why `test_id` (`file::...`) names none of `tests` (those its file defines), with the fix;
    None when it names one. A case is checked when the source states every case."""
    file, _, bare = function_id(test_id).partition("::")
    named = [t for t in tests if selects(function_id(test_id), t.id)]
    if not named:
        return f"no test {bare!r} in {file}; fix the name or add the test"
    case = case_of(test_id)
    if case is None:
        return None
    if len(named) > 1 or named[0].id != function_id(test_id):
        return f"{bare} is not a test, and only a test has cases; list a test with its case"
    test = named[0]
    if test.cases == ():
        return f"{test.id.partition('::')[2]} is not parametrised; drop [{case}] or parametrise the test"
    if test.cases is not None and case not in test.cases:
        shown = ", ".join(test.cases[:6]) + (" …" if len(test.cases) > 6 else "")
        return f"{test.id.partition('::')[2]} has no case [{case}]; use one of its cases ({shown})"
    return None


def _is_test_class(cls: ast.ClassDef) -> bool:
    """`Test*`, as pytest collects by default, or a unittest TestCase whatever its name."""
    bases = [b.attr if isinstance(b, ast.Attribute) else b.id if isinstance(b, ast.Name) else "" for b in cls.bases]
    return cls.name.startswith("Test") or any(b.endswith("TestCase") for b in bases)


def pytestmark_of(body: list[ast.stmt]) -> ast.expr | None:
    """The value of a module's or a class's `pytestmark = ...`."""
    for stmt in body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark"
                                                for t in stmt.targets):
            return stmt.value
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == "pytestmark":
            return stmt.value
    return None


def mark_name(node: ast.AST) -> str | None:
    """`feature` for `pytest.mark.feature(...)` or `mark.feature(...)`; None for anything else."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    base = node.func.value
    if (isinstance(base, ast.Attribute) and base.attr == "mark") or (isinstance(base, ast.Name) and base.id == "mark"):
        return node.func.attr
    return None


def _parametrize_marks(expr: ast.AST | list[ast.expr] | None) -> list[ast.Call]:
    if expr is None:
        return []
    items = expr if isinstance(expr, list) else expr.elts if isinstance(expr, ast.List | ast.Tuple) else [expr]
    return [item for item in items if isinstance(item, ast.Call) and mark_name(item) == "parametrize"]


def _param_fixture_names(tree: ast.Module) -> frozenset[str]:
    """Fixtures defined with `params=` in this file: where pytest finds fixtures, at module level
    (inside an `if` or a `try` too) and in classes. Function bodies, most of a test file, are not
    read: a fixture defined inside a function is never collected. Every command that loads the
    release reads every component's test files, so this walk is kept to the statements that count."""
    names = set()
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if any(isinstance(dec, ast.Call) and any(k.arg == "params" for k in dec.keywords)
                   for dec in node.decorator_list):
                names.add(node.name)
            continue
        pending += [child for child in ast.iter_child_nodes(node)
                    if isinstance(child, ast.stmt | ast.excepthandler | ast.match_case)]
    return frozenset(names)


def param_fixtures_for(root: Path, relative: str) -> frozenset[str]:
    """Fixtures with `params=` in the conftest.py files that `root/relative` sees (its folder and
    those above it, up to `root`)."""
    names: set[str] = set()
    folder = (root / relative).parent
    while True:
        conftest = folder / "conftest.py"
        if conftest.is_file():
            try:
                names |= _param_fixture_names(ast.parse(conftest.read_bytes()))
            except (SyntaxError, ValueError, OSError):
                pass
        if folder == root or root not in folder.parents:
            break
        folder = folder.parent
    return frozenset(names)


def _cases(marks: list[ast.Call]) -> tuple[str, ...] | None:
    """The case ids pytest gives a test parametrised by `marks` (closest to the function first),
    when every value is a literal; None otherwise."""
    ids: list[str] = [""]
    for mark in marks:
        mine = _mark_ids(mark)
        if mine is None:
            return None
        ids = [f"{a}-{b}" if a else b for a in ids for b in mine]
    cases = tuple(ids) if marks else ()
    # pytest makes duplicate ids unique with suffixes of its own: not worth predicting.
    return cases if len(set(cases)) == len(cases) else None


def _mark_ids(mark: ast.Call) -> list[str] | None:
    if len(mark.args) < 2:
        return None
    try:
        names = ast.literal_eval(mark.args[0])
    except ValueError:
        return None
    multiple = not isinstance(names, str) or "," in names
    values = mark.args[1]
    if not isinstance(values, ast.List | ast.Tuple):
        return None
    explicit = next((k.value for k in mark.keywords if k.arg == "ids"), None)
    if explicit is not None:
        if not isinstance(explicit, ast.List | ast.Tuple):
            return None
        try:
            given = [ast.literal_eval(e) for e in explicit.elts]
        except ValueError:
            return None
        if len(given) != len(values.elts) or not all(isinstance(g, str) for g in given):
            return None
        return given
    out = []
    for value in values.elts:
        param_id, value = _pytest_param(value)
        if param_id is None:
            try:
                literal = ast.literal_eval(value)
            except ValueError:
                return None
            parts = list(literal) if multiple and isinstance(literal, list | tuple) else [literal]
            shown = [_literal_id(p) for p in parts]
            if any(s is None for s in shown):
                return None
            param_id = "-".join(s for s in shown if s is not None)
        out.append(param_id)
    return out


def _pytest_param(value: ast.expr) -> tuple[str | None, ast.expr]:
    """(its `id=`, its values) for `pytest.param(..., id="x")`; (None, value) otherwise."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "param":
        given = next((k.value for k in value.keywords if k.arg == "id"), None)
        if isinstance(given, ast.Constant) and isinstance(given.value, str):
            return given.value, value
        return None, ast.Tuple(elts=value.args, ctx=ast.Load()) if len(value.args) > 1 else (
            value.args[0] if value.args else value)
    return None, value


def _literal_id(value: object) -> str | None:
    """pytest's id for one literal value (its `_idval`)."""
    if isinstance(value, str):
        return value.encode("unicode_escape").decode("ascii")
    if isinstance(value, bytes):
        return value.decode("ascii", "backslashreplace")
    if value is None or isinstance(value, bool | int | float | complex):
        return str(value)
    return None
