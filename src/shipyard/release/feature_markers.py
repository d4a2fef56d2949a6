"""The features that test files claim with `@pytest.mark.feature(...)`, read without importing them.

feature_status.yaml is the authority on which tests prove which feature; markers are optional.
Where a test does carry feature markers they must agree with the YAML, and `shipyard validate`
reports where they do not. Test files are parsed with `ast`, never imported: validating a
release must not run a component's code (or need its dependencies).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from shipyard.errors import NO_VALUE, InputError, SpecIssue, nearest
from shipyard.plumbing.input_files import read_input_bytes
from shipyard.release.spec import FeatureFile, Release
from shipyard.release.yaml_source import YamlDocument
from shipyard.resources.pytest_plugin.shipyard_test_ids import (
    DefinedTest,
    defined_tests,
    function_id,
    mark_name,
    pytestmark_of,
    selects,
)


@dataclass(frozen=True)
class FeatureMarker:
    """One `pytest.mark.feature(...)` in a test file. `feature` is None when not a string literal."""

    line: int
    feature: str | None
    owner: str  # "pytestmark", a class name, or a test name


@dataclass(frozen=True)
class MarkedTest:
    """A test function, with the features its own, its class's and its module's markers name."""

    node_id: str  # path::[Class::]name, the path relative to the release root
    line: int
    markers: tuple[FeatureMarker, ...]

    @property
    def features(self) -> set[str]:
        return {m.feature for m in self.markers if m.feature}


@dataclass(frozen=True)
class TestFile:
    path: str  # relative to the release root, posix
    tests: tuple[MarkedTest, ...]
    markers: tuple[FeatureMarker, ...]  # every feature marker in the file
    error: str | None = None  # why the file could not be read, if it could not


def _marks_in(expr: ast.AST | None, owner: str, constants: dict[str, str]) -> list[FeatureMarker]:
    """The feature markers in a decorator or a `pytestmark = ...` value (one mark or a list)."""
    if expr is None:
        return []
    items = expr.elts if isinstance(expr, ast.List | ast.Tuple) else [expr]
    out = []
    for item in items:
        if not isinstance(item, ast.Call) or mark_name(item) != "feature":
            continue
        arg = item.args[0] if item.args else None
        feature = None
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            feature = arg.value
        elif isinstance(arg, ast.Name):
            feature = constants.get(arg.id)
        out.append(FeatureMarker(item.lineno, feature, owner))
    return out


def _marked(test: DefinedTest, module_marks: list[FeatureMarker], constants: dict[str, str]) -> MarkedTest:
    """The test with its module's, its classes' and its own feature markers."""
    marks = list(module_marks)
    for cls in test.classes:
        marks += [m for d in cls.decorator_list for m in _marks_in(d, cls.name, constants)]
        marks += _marks_in(pytestmark_of(cls.body), cls.name, constants)
    marks += [m for d in test.function.decorator_list for m in _marks_in(d, test.function.name, constants)]
    return MarkedTest(test.id, test.line, tuple(marks))


def read_test_file(root: Path, relative: str) -> TestFile:
    """Every test in `root/relative` with the feature markers that apply to it."""
    try:
        stat = (root / relative).stat()
    except OSError:
        return _read_test_file(root, relative, ())
    return _read_test_file(root.resolve(), relative, (stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns))


# Every command loads the release description, which reads every component's test files: parse
# each once per process (the suite and `shipyard ci` load it many times), again when it changes.
@functools.lru_cache(maxsize=1024)
def _read_test_file(root: Path, relative: str, _stat: tuple[int, ...]) -> TestFile:
    try:
        source = read_input_bytes(root / relative, limit="test file", missing_fix="")
        tree = ast.parse(source, filename=relative)
    except (SyntaxError, ValueError) as exc:
        return TestFile(relative, (), (), f"does not parse as Python ({exc.__class__.__name__})")
    except InputError as exc:  # a FIFO, a folder, a file too large: never read, never waited on
        return TestFile(relative, (), (), exc.issue.message)
    constants = {t.id: s.value.value for s in tree.body if isinstance(s, ast.Assign)
                 and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)
                 for t in s.targets if isinstance(t, ast.Name)}
    module_marks = _marks_in(pytestmark_of(tree.body), "pytestmark", constants)
    tests = [_marked(t, module_marks, constants) for t in defined_tests(tree, relative)]
    known = {m.line: m for t in tests for m in t.markers} | {m.line: m for m in module_marks}
    # Every marker in the file, a helper's decorator included, must name a real feature. Walking
    # the whole tree is the slow part, so it is done only when some marker is not a test's.
    text_lines = {n for n, line in enumerate(source.splitlines(), 1) if b"feature(" in line}
    if text_lines <= set(known):
        return TestFile(relative, tuple(tests), tuple(known[n] for n in sorted(known)))
    markers = tuple(known.get(m.line) or FeatureMarker(m.line, m.feature, "marker")
                    for node in ast.walk(tree) if mark_name(node) == "feature" for m in _marks_in(node, "", constants))
    return TestFile(relative, tuple(tests), markers)


def test_files(root: Path, folders: list[Path], listed: list[str]) -> list[str]:
    """Test files to read: those feature_status.yaml names plus every test_*.py in `folders`."""
    found = {f for f in listed if f.endswith(".py") and (root / f).is_file()}
    for folder in folders:
        if folder.is_dir():
            for path in [*folder.rglob("test_*.py"), *folder.rglob("*_test.py")]:
                found.add(path.relative_to(root.resolve()).as_posix())
    return sorted(found)


def covers(test_id: str, node_id: str) -> bool:
    """Whether the YAML test id (a folder, a file, a class, a test or one case of it) names some
    case of the test function `node_id` (as the file defines it, so with no case of its own)."""
    return selects(function_id(test_id), node_id)


def marker_issues(release: Release, features: FeatureFile, doc: YamlDocument, root: Path) -> list[SpecIssue]:
    """Where the `@pytest.mark.feature` markers in the test files disagree with feature_status.yaml.

    The YAML is the authority and a test needs no marker; but a marker must name a feature
    whose tests list names that test, and a marked test that the YAML lists under a feature
    must carry that feature's marker too.
    """
    ids = [f.id for f in features.features]
    listed = [(i, j, test_id) for i, f in enumerate(features.features) for j, test_id in enumerate(f.tests)]
    # Test files are named relative to the release; a component whose tests lie elsewhere names its
    # own relative to its project (Component.test_id_root), and its markers are not read here.
    folders = [c.tests_folder(root) for c in release.components.values()
               if c.tests and c.test_id_root(root) == root.resolve()]
    issues: list[SpecIssue] = []
    for relative in test_files(root, folders, [t.partition("::")[0] for _, _, t in listed]):
        test_file = read_test_file(root, relative)
        path = root / relative
        if test_file.error:
            issues.append(SpecIssue(path, None, "(file)", NO_VALUE, test_file.error,
                                    "fix it so that its feature markers can be read"))
            continue
        for marker in test_file.markers:
            if marker.feature is None:
                issues.append(SpecIssue(path, marker.line, marker.owner, NO_VALUE,
                                        "feature marker's id is not a string", "write pytest.mark.feature(\"<id>\")"))
            elif marker.feature not in ids:
                issues.append(SpecIssue(path, marker.line, marker.owner, marker.feature,
                                        "marker names no feature of feature_status.yaml",
                                        "use one of its ids or add the feature", nearest(marker.feature, ids)))
        unlisted: dict[str, list[tuple[str, FeatureMarker]]] = {}
        unmarked: dict[tuple[int, int], list[str]] = {}
        # Only an id that names this file or a folder holding it can name one of its tests.
        listed_here = [(i, j, t) for i, j, t in listed if covers(t.partition("::")[0], relative)]
        for test in test_file.tests:
            name = test.node_id.removeprefix(relative + "::")
            under = {features.features[i].id: (i, j) for i, j, t in listed_here if covers(t, test.node_id)}
            marks = test.features & set(ids)
            for feature in sorted(marks - set(under)):
                marker = min((m for m in test.markers if m.feature == feature), key=lambda m: m.line)
                unlisted.setdefault(feature, []).append((name, marker))
            if marks:
                for feature in sorted(set(under) - marks):
                    unmarked.setdefault(under[feature], []).append(name)
        for feature, found in unlisted.items():
            names = [name for name, _ in found]
            elsewhere = sorted({features.features[k].id for k, _, t in listed for name in names
                                if covers(t, f"{relative}::{name}")})
            note = f" (it lists them under {', '.join(elsewhere)})" if elsewhere else ""
            marker = found[0][1]
            issues.append(SpecIssue(path, marker.line, marker.owner, feature,
                                    f"marked as proving this feature, but its tests list in feature_status.yaml "
                                    f"does not name {_names(names)}{note}",
                                    f"add them (or {relative}) to that list, or change the marker"))
        for (i, j), names in unmarked.items():
            doc_loc = ("features", i, "tests", j)
            issues.append(SpecIssue(doc.path, doc.line_of(doc_loc), ".".join(map(str, doc_loc)),
                                    features.features[i].tests[j],
                                    f"lists {_names(names)}, whose feature markers do not name "
                                    f"{features.features[i].id!r}",
                                    f"add pytest.mark.feature({features.features[i].id!r}) to them, or move "
                                    f"the entry to the feature they are marked with"))
    return issues


def _names(names: Iterable[str]) -> str:
    items = list(names)
    shown = ", ".join(items[:3])
    return shown + (f" and {len(items) - 3} more" if len(items) > 3 else "")
