"""The order a release's files go up to an index without staging (`kind: pypi`): a project before
the projects of the release that depend on it (ember before emberaudio).

Each upload there is visible the moment it lands, so a release goes up one file at a time in front
of its users: were emberaudio 1.7.0 up before ember 1.7.0, `pip install emberaudio` in between
would find no ember to satisfy its `ember==1.7.0` and fail (and a publish stopped there would
leave it so). Who depends on whom is read from each wheel's own Requires-Dist, the fact pip acts
on (an sdist states none: it keeps its place).
"""

from __future__ import annotations

from collections.abc import Sequence

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from shipyard.plumbing.wheel_metadata import wheel_metadata
from shipyard.publish.plan import PublishFile


def _requires(f: PublishFile) -> set[str]:
    """The canonical project names `f`'s Requires-Dist names (extras' too: an extra's install needs them)."""
    if not f.filename.endswith(".whl"):
        return set()
    names: set[str] = set()
    for line in wheel_metadata(f.path).get_all("Requires-Dist") or []:
        try:
            names.add(canonicalize_name(Requirement(line).name))
        except InvalidRequirement:
            continue  # pip refuses such a wheel; the order does not make it worse
    return names


def dependencies_first(files: Sequence[PublishFile]) -> list[PublishFile]:
    """`files` with each project's files before those of the projects that require it, otherwise in
    the order given (a cycle, which pip cannot satisfy from a half-uploaded release either, keeps it)."""
    by_project: dict[str, list[PublishFile]] = {}
    for f in files:
        by_project.setdefault(f.project, []).append(f)
    needs = {p: {n for f in group for n in _requires(f)} & set(by_project) - {p} for p, group in by_project.items()}
    ordered: list[str] = []
    entered: set[str] = set()

    def place(project: str) -> None:
        if project in entered:
            return  # placed already, or a cycle back to a project being placed
        entered.add(project)
        for needed in (p for p in by_project if p in needs[project]):  # in the order given
            place(needed)
        ordered.append(project)

    for project in by_project:
        place(project)
    return [f for p in ordered for f in by_project[p]]
