"""The artifact kinds (src/shipyard/release/kinds.py): every kind satisfies the one Protocol, and no
module outside the kind packages branches on a package type's name.

The scan's rule, kept simple: in every module of src/shipyard but the kind packages (wheel/,
conda/, image/, mobile/) and the registry itself, a comparison (==, !=, in, not in) fails when one
side is "wheel", "conda", "docker" or "mobile" (alone, or inside a tuple, list or set written
there) and another side names a package type: a variable or attribute called `package_type`,
`package_types` or `kind`. A publish target's kind is its own vocabulary (devpi, pypi, static,
conda, docker; publish/run.py's BACKENDS dispatches on it) and is not a package type:
`target.kind`, `t.kind`, and `self.kind` inside release/destinations.py are left alone. What to
write instead: `KINDS[cell.package_type].<fact>` for a matrix cell, `kind_of(record.package_type)`
for a manifest record, `WHEEL.name` where a module is about one kind's own format."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

from shipyard.release.destinations import ROUTES, PublishTarget
from shipyard.release.fields import PackageType
from shipyard.release.kinds import KINDS, UNKNOWN, ArtifactKind, kind_of

SHIPYARD = Path(__file__).resolve().parents[2] / "src" / "shipyard"
KIND_PACKAGES = ("wheel", "conda", "image", "mobile")
NAMES = frozenset({"wheel", "conda", "docker", "mobile"})
PACKAGE_TYPE_NAMES = frozenset({"package_type", "package_types", "kind"})


def _is_kind_literal(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in NAMES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(isinstance(e, ast.Constant) and e.value in NAMES for e in node.elts)
    return False


def _names_package_type(node: ast.expr, module: str) -> bool:
    if isinstance(node, ast.Name):
        return node.id in PACKAGE_TYPE_NAMES
    if isinstance(node, ast.Attribute) and node.attr in PACKAGE_TYPE_NAMES:
        owner = node.value.id if isinstance(node.value, ast.Name) else ""
        target_kind = node.attr == "kind" and (owner in ("target", "t")
                                              or (owner == "self" and module == "release/destinations.py"))
        return not target_kind
    return False


def literal_comparisons(source: str, module: str) -> list[str]:
    """`line: code` of each comparison of a package type with a kind's name in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(map(_is_kind_literal, sides)) and any(_names_package_type(s, module) for s in sides):
                found.append(f"{module}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_outside_the_kind_packages_compares_a_package_type_with_a_kinds_name() -> None:
    found = []
    for path in sorted(SHIPYARD.rglob("*.py")):
        module = path.relative_to(SHIPYARD).as_posix()
        if module.split("/")[0] in KIND_PACKAGES or module == "release/kinds.py":
            continue
        found += literal_comparisons(path.read_text(encoding="utf-8"), module)
    assert found == [], "look the kind up in shipyard.release.kinds.KINDS instead:\n" + "\n".join(found)


def test_the_scan_finds_what_its_rule_names_and_leaves_target_kinds_alone() -> None:
    flagged = literal_comparisons(
        'a = cell.package_type == "mobile"\nb = "conda" in c.package_types\nc = kind != "docker"\n'
        'd = r.package_type in ("wheel", "sdist")\ne = lane.kind == "wheel"\n', "x.py")
    assert [line.split(":")[1] for line in flagged] == ["1", "2", "3", "4", "5"]
    assert literal_comparisons('a = target.kind == "conda"\nb = t.kind == "docker"\nc = installer == "conda"\n'
                               'd = cell.package_type == WHEEL.name\n', "x.py") == []
    assert literal_comparisons('a = self.kind == "docker"\n', "release/destinations.py") == []
    assert literal_comparisons('a = self.kind == "docker"\n', "ci/jobs.py") != []


def test_every_kind_satisfies_the_protocol_under_its_own_name() -> None:
    for name, kind in KINDS.items():
        assert isinstance(kind, ArtifactKind), name
        assert kind.name == name
    assert isinstance(UNKNOWN, ArtifactKind)


def test_the_registry_names_the_package_types_release_yaml_takes() -> None:
    assert set(KINDS) == set(get_args(PackageType))


def test_each_kind_names_real_publish_targets_and_its_own_installers_and_lanes() -> None:
    target_kinds = set(ROUTES)  # every kind, and the conda channel in a bucket (s3-conda)
    assert set(get_args(PublishTarget.model_fields["kind"].annotation)) < target_kinds
    installers = [i for kind in KINDS.values() for i in kind.installers]
    lanes = [lane for kind in KINDS.values() for lane in kind.ci_lanes]
    assert all(set(kind.publish_targets) <= target_kinds for kind in KINDS.values())
    assert len(installers) == len(set(installers)) and len(lanes) == len(set(lanes))
    assert all(set(kind.ci_after_lanes) <= set(lanes) for kind in KINDS.values())


def test_a_package_type_the_registry_does_not_know_is_a_plain_file_with_a_question_mark() -> None:
    unknown = kind_of("wheelhouse")
    assert (unknown.letter, unknown.is_image, unknown.contents_check, unknown.size_budget) == ("?", False, None, None)
    assert kind_of(None) is UNKNOWN and kind_of("wheel") is KINDS["wheel"]
