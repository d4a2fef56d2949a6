"""Exit statuses: every error class lives in errors.py with a status from its table, the docs
table is that table, a CI step can tell apart every status it branches on, and none is 1."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from shipyard import errors
from shipyard.cli import main
from shipyard.errors import CRASHED, EXIT_STATUSES, STABLE_FEATURE_FAILED, error_classes, exit_status_table

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "shipyard"
DOC = ROOT / "docs" / "exit-statuses.md"
START, END = "<!-- exit-status-table: generated from src/shipyard/errors.py -->\n", "<!-- end of exit-status-table -->"


def test_the_docs_table_is_the_table_in_errors_py() -> None:
    text = DOC.read_text()
    table = text.split(START, 1)[1].split(END, 1)[0]
    assert table == exit_status_table(), (
        "docs/exit-statuses.md's table differs from src/shipyard/errors.py; paste this between its markers:\n"
        + exit_status_table())


def test_the_readme_links_the_table() -> None:
    assert "(docs/exit-statuses.md)" in (ROOT / "README.md").read_text()


def test_every_class_has_a_status_of_the_table_never_1_and_shares_it_only_where_documented() -> None:
    by_status: dict[int, list[str]] = {}
    for cls in error_classes():
        assert cls.exit_code in EXIT_STATUSES, f"{cls.__name__}: exit status {cls.exit_code} is not in EXIT_STATUSES"
        assert cls.exit_code not in (0, CRASHED), f"{cls.__name__}: exit status {cls.exit_code}"
        by_status.setdefault(cls.exit_code, []).append(cls.__name__)
    for status, names in by_status.items():
        assert len(names) == 1 or EXIT_STATUSES[status].shared, f"status {status} is shared by {names}"
    # A verdict (a status no class carries) is never also an error's: the workflows branch on it.
    assert STABLE_FEATURE_FAILED not in by_status
    verdicts = {errors.OK, CRASHED, STABLE_FEATURE_FAILED, errors.VERIFY_FAILED, errors.NOT_SIGNED,
                errors.NOT_REPRODUCIBLE, errors.HOST_NOT_READY}
    assert set(EXIT_STATUSES) == set(by_status) | verdicts and not verdicts & set(by_status)


def test_a_class_must_state_its_status() -> None:
    with pytest.raises(TypeError, match="state its exit status"):
        type("Unstated", (errors.BuildError,), {})


@functools.cache
def _shipyard_modules() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text())) for path in sorted(SRC.rglob("*.py"))]


def test_no_error_class_lives_outside_errors_py_and_the_base_is_never_raised() -> None:
    names = {cls.__name__ for cls in error_classes()} | {"ShipyardError"}
    found = []
    for path, tree in _shipyard_modules():
        for node in ast.walk(tree):
            if path.name != "errors.py" and isinstance(node, ast.ClassDef) and any(
                    isinstance(base, ast.Name) and base.id in names for base in node.bases):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: class {node.name}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "ShipyardError":
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: ShipyardError(...) (give it its kind)")
    assert not found, "\n".join(found)


def test_the_commands_invent_no_exit_status() -> None:
    """A command (`cmd_*`) returns 0 or a named status; cli/__init__.py's main maps errors to theirs."""
    invented = []
    for path, tree in _shipyard_modules():
        if path.parent.name != "cli":
            continue
        commands = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name.startswith("cmd_")]
        for node in (n for f in commands for n in ast.walk(f)):
            if isinstance(node, ast.Return) and node.value is not None:
                for leaf in ast.walk(node.value):
                    if isinstance(leaf, ast.Constant) and type(leaf.value) is int and leaf.value != 0:
                        invented.append(f"{path.relative_to(ROOT)}:{node.lineno}: return {ast.unparse(node.value)}")
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("sys.exit", "exit", "SystemExit"):
                invented.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert not invented, "\n".join(invented)


def test_the_workflows_build_step_lets_through_the_stable_feature_status_only() -> None:
    from shipyard.ci.steps import build_upload_and_judge

    run = build_upload_and_judge("Build", {}, "shipyard build --variant cpu\n")[0]["run"]
    assert f'[ "$status" -ne {STABLE_FEATURE_FAILED} ]' in run
    assert STABLE_FEATURE_FAILED != CRASHED


def test_a_toolkit_for_a_cpu_variant_is_bad_usage_in_one_line(spec_copy, capsys) -> None:  # noqa: ANN001
    """Was a bare ShipyardError: exit 1, the status of a crash."""
    assert main(["--root", str(spec_copy.root), "toolchain", "install", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "variant 'cpu' needs no toolkit" in err, err
