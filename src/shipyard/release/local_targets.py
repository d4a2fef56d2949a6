"""A local targets file (`shipyard --targets FILE …`): the same shape as release.yaml's `publish:`,
one stand-in for each target release.yaml names, so that the committed release.yaml names the
real targets (PyPI, a registry, a bucket) while `publish` and `promote` run here against stand-ins
on this machine. Every target of release.yaml must have its stand-in and the file names no other:
a run against half real, half local targets is never what was meant.

Under `shipyard ci run --targets FILE` the committed workflow's publish step runs a plain `shipyard
publish`: the run hands it the file through TARGETS_VARIABLE (local_ci/publish_stand_ins.py), which
`publish` and `promote` read when no --targets is given. Only a local run sets it; the generated
workflows never do."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

from pydantic import BeforeValidator, ValidationError

from shipyard.errors import SpecError
from shipyard.plumbing.identifiers import Name
from shipyard.release.destinations import PublishTarget
from shipyard.release.fields import Frozen, named_entries
from shipyard.release.issues import Collector, pydantic_issues
from shipyard.release.yaml_source import YamlDocument, load_yaml

# The variable `shipyard ci run --targets FILE` sets in its jobs: the targets file, for `publish` and
# `promote` in the committed workflow's publish step.
TARGETS_VARIABLE = "SHIPYARD_TARGETS"
FIX = "give each target of release.yaml's publish its stand-in under the same name, and no other"


class TargetsFile(Frozen):
    """What a local targets file holds: `publish:`, as release.yaml's."""

    publish: Annotated[dict[Name, PublishTarget], BeforeValidator(named_entries("publish"))]


def stand_in_targets(path: Path, release_doc: YamlDocument, out: Collector) -> dict[str, object] | None:
    """The `publish` mapping of the targets file at `path` (as YAML data, for release.yaml's data
    to take instead of its own), or None with the issues in `out`: a file that does not parse or
    validate, a target of release.yaml without a stand-in, or a stand-in of no target."""
    try:
        doc = load_yaml(path)
    except SpecError as exc:
        out.issues.extend(exc.issues)
        return None
    try:
        TargetsFile.model_validate(doc.data)
    except ValidationError as exc:
        pydantic_issues(exc, TargetsFile, doc, out)
        return None
    given = dict(doc.data["publish"])
    named = dict((release_doc.data or {}).get("publish") or {})
    for name in sorted(set(named) - set(given)):
        out.add(doc, ("publish",), f"release.yaml's target {name} has no stand-in here; {FIX}", value=name)
    for name in sorted(set(given) - set(named)):
        out.add(doc, ("publish", name), f"release.yaml names no target {name}; {FIX}", value=name)
    return None if set(given) != set(named) else given


def targets_file_for(given: str | None, environ: Mapping[str, str]) -> str | None:
    """The targets file of `publish` or `promote`: --targets when given, else TARGETS_VARIABLE's
    value (a local `ci run`), else none (release.yaml's own targets)."""
    return given or environ.get(TARGETS_VARIABLE) or None
