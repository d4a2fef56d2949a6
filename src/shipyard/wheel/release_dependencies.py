"""Which components of the release a component depends on: its declared dependencies (the static
[project] dependencies of its pyproject.toml, else its build backend's Requires-Dist, cached:
project_metadata.prepared_metadata) matched by canonical name against the release's components.

A narrowed build (`--component`) builds these too: a selected component's tests install it from
the variant's index of this run's wheels, where a dependency nobody built cannot be found.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from shipyard.release.project_declaration import pyproject_table
from shipyard.release.project_survey import is_python_project
from shipyard.release.spec import Spec
from shipyard.wheel.project_metadata import prepared_metadata


def declared_requirements(project: Path) -> tuple[str, ...]:
    """The project's run-time requirements (PEP 508 strings): its [project] table's `dependencies`
    when they are static, else what its backend's metadata hook says (Requires-Dist). Raises
    ToolError when only the hook can say and it fails."""
    table = pyproject_table(project).get("project")
    if isinstance(table, dict) and "name" in table and "dependencies" not in (table.get("dynamic") or ()):
        return tuple(str(r) for r in table.get("dependencies") or ())
    if not is_python_project(project):
        return ()
    return prepared_metadata(project).requires_dist


def release_dependencies(spec: Spec, component: str) -> tuple[str, ...]:
    """The release's components that `component` needs to run (directly), in release.yaml's order.
    An optional dependency (an extra's) is not needed; one with an environment marker is, on
    whatever platform the marker names (building one more component is cheap, missing one is not)."""
    chosen = spec.release.components[component]
    if not chosen.is_python:
        return ()
    own = {canonicalize_name(name): name for name in spec.release.components}
    needed: set[str] = set()
    for text in declared_requirements(chosen.source_dir(spec.root)):
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue  # the build itself says what is wrong with it
        if requirement.marker is not None and "extra" in str(requirement.marker):
            continue
        if (name := own.get(canonicalize_name(requirement.name))) is not None and name != component:
            needed.add(name)
    return tuple(name for name in spec.release.components if name in needed)


def selection_dependencies(spec: Spec, selected: Iterable[str]) -> dict[str, str]:
    """Every component the `selected` ones depend on within the release, transitively, and not
    selected themselves: each with the component that depends on it (for "ember: emberaudio
    depends on it"), in the order they are found."""
    chosen = list(dict.fromkeys(selected))
    found: dict[str, str] = {}
    todo = list(chosen)
    while todo:
        dependent = todo.pop(0)
        for name in release_dependencies(spec, dependent):
            if name not in found and name not in chosen:
                found[name] = dependent
                todo.append(name)
    return found
