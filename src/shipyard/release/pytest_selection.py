"""A component's `pytest_args`: which of its own tests this release leaves out, and nothing else.

A project's suite may hold tests that need what the release does not provide (a type checker, a
GPU, the network). release.yaml may leave them out with pytest's selection options only:
`-k EXPR`, `-m EXPR`, `--deselect ID` and `--ignore PATH` (ids and paths relative to the tests
folder). Anything else could change the verdict (`-x`, `--maxfail`, `-p`, `--lf`, `-n`, `--co` ...)
and is refused. What the selection leaves out is recorded with the cell's test verdict, and shown
in the report and the release notes.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

SELECTION_OPTIONS = {"-k": "a keyword expression", "-m": "a marker expression",
                     "--deselect": "a test id relative to the tests folder",
                     "--ignore": "a path relative to the tests folder"}
ALLOWED = "-k EXPR, -m EXPR, --deselect ID, --ignore PATH"


@dataclass(frozen=True)
class SelectionIssue:
    index: int  # the offending item of the list
    message: str
    fix: str


@dataclass(frozen=True)
class NamedPath:
    """A path (or test id) an --ignore or --deselect names, relative to the tests folder."""

    index: int  # its item in the list
    option: str
    path: str


@dataclass(frozen=True)
class PytestSelection:
    """The parsed `pytest_args` of a component."""

    args: tuple[str, ...]
    keyword: str | None = None
    markers: str | None = None
    deselect: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    paths: tuple[NamedPath, ...] = ()  # every --deselect and --ignore value, where the list gives it

    @property
    def expression(self) -> str:
        """The arguments as one would type them: `-k 'not mypy' --deselect test_x.py::test_y`."""
        return shlex.join(self.args)

    def ignores(self, test_id: str) -> bool:
        """Whether `test_id` (relative to the tests folder) lies under an --ignore path: pytest
        never collects it, so a feature that lists it must not wait for it."""
        file_part = test_id.split("::", 1)[0].rstrip("/")
        return any(file_part == path.rstrip("/") or file_part.startswith(path.rstrip("/") + "/")
                   for path in self.ignore)

    def pytest_argv(self, tests_copy: Path) -> list[str]:
        """What pytest is given: -k and -m as they are, --ignore made absolute in the copied tests
        folder (pytest reads it relative to where it runs). --deselect ids are applied by the
        selection plugin, relative to the tests folder, whatever pytest takes as its rootdir."""
        argv = [*(["-k", self.keyword] if self.keyword else []), *(["-m", self.markers] if self.markers else [])]
        for path in self.ignore:
            argv += ["--ignore", str(tests_copy / path)]
        return argv

    def plugin_env(self, work: Path) -> dict[str, str]:
        """The environment of the selection plugin (resources/pytest_plugin/shipyard_selection.py):
        the ids to deselect, and where it writes what it left out."""
        request = work / "selection.json"
        request.write_text(json.dumps({"deselect": list(self.deselect)}))
        return {"SHIPYARD_SELECTION": str(request), "SHIPYARD_LEFT_OUT": str(work / "left-out.json")}

    def left_out(self, work: Path) -> dict[str, Any]:
        """The record of what was left out: the arguments, the deselected tests (ids relative to
        the tests folder, from the plugin's report) and the ignored paths."""
        report = work / "left-out.json"
        deselected = json.loads(report.read_text())["deselected"] if report.is_file() else []
        return {"pytest_args": list(self.args), "expression": self.expression,
                "deselected": sorted(deselected), "ignored": list(self.ignore)}


def parse_pytest_args(args: Sequence[str]) -> tuple[PytestSelection, list[SelectionIssue]]:
    """The selection `args` make, and what is wrong with them (an empty list when nothing is)."""
    issues: list[SelectionIssue] = []
    found: dict[str, list[str]] = {option: [] for option in SELECTION_OPTIONS}
    paths: list[NamedPath] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--"):  # --deselect ID or --deselect=ID
            option, equals, value = arg.partition("=")
            inline = bool(equals)
        else:  # -k EXPR or -kEXPR
            option, value = arg[:2], arg[2:]
            inline = bool(value)
        if option in SELECTION_OPTIONS:
            if not inline:  # the value is the next item
                if i + 1 >= len(args):
                    issues.append(SelectionIssue(i, f"{option} needs {SELECTION_OPTIONS[option]}",
                                                 f"add it as the next item, e.g. [{option}, ...]"))
                    break
                i += 1
                value = args[i]
            if problem := _value_problem(option, value):
                issues.append(SelectionIssue(i, problem[0], problem[1]))
            else:
                found[option].append(value)
                if option in ("--deselect", "--ignore"):
                    paths.append(NamedPath(i, option, value))
        elif arg.startswith("-"):
            issues.append(SelectionIssue(
                i, f"{arg} is not a selection option: pytest_args may only leave tests out, and this could "
                   f"change what pytest runs or how the verdict is read",
                f"use {ALLOWED} (ids and paths relative to the tests folder), or remove it"))
            break  # what follows may be its value: nothing after it can be read
        else:
            issues.append(SelectionIssue(
                i, "a bare argument would name what pytest runs instead of the tests folder",
                f"leave tests out with {ALLOWED}"))
        i += 1
    for option in ("-k", "-m"):
        if len(found[option]) > 1:
            issues.append(SelectionIssue(len(args) - 1, f"{option} is given {len(found[option])} times and pytest "
                                         f"reads only the last", "combine the expressions with 'and'"))
    last = {option: values[-1] if values else None for option, values in found.items()}
    selection = PytestSelection(tuple(args), keyword=last["-k"], markers=last["-m"],
                                deselect=tuple(found["--deselect"]), ignore=tuple(found["--ignore"]),
                                paths=tuple(paths))
    return selection, issues


def _value_problem(option: str, value: str) -> tuple[str, str] | None:
    if not value.strip():
        return f"{option} needs {SELECTION_OPTIONS[option]}, not an empty value", "write the expression or the id"
    if option in ("--deselect", "--ignore"):
        path = PurePosixPath(value.split("::", 1)[0])
        if path.is_absolute() or ".." in path.parts or "\\" in value:
            return (f"{option} takes {SELECTION_OPTIONS[option]}",
                    "write it as the tests folder sees it, e.g. test_x.py::test_y or slow/")
    return None


def selection_of(args: Sequence[str]) -> PytestSelection | None:
    """The selection of validated `pytest_args`; None when there are none."""
    return parse_pytest_args(args)[0] if args else None


def left_out_text(record: Any) -> str:
    """The test record's `left_out` in words ('' when there is none): what the report and the
    release notes say a cell did not run, and why."""
    if not isinstance(record, dict):
        return ""
    deselected = [str(t) for t in record.get("deselected") or ()]
    ignored = [str(p) for p in record.get("ignored") or ()]
    parts = []
    if deselected:
        tests = f"{len(deselected)} test{'' if len(deselected) == 1 else 's'}"
        parts.append(f"{tests} deselected ({', '.join(deselected)})")
    if ignored:
        parts.append(f"{', '.join(ignored)} ignored")
    return (f"release.yaml's pytest_args `{record.get('expression', '')}` left out "
            + (" and ".join(parts) if parts else "no test"))
