"""Whether every component's sources reach a CI job: a generated workflow checks out only the
repository, so a project folder outside it builds on this machine and nowhere else."""

from __future__ import annotations

from pathlib import Path

from shipyard.errors import ToolError
from shipyard.plumbing import command
from shipyard.plumbing.confined_paths import resolves_inside
from shipyard.plumbing.input_files import input_error
from shipyard.release.spec import Spec
from shipyard.release.yaml_source import load_yaml

OUTSIDE_FIX = ("pin a released sdist instead (sdist: {url: …, sha256: …}, docs/release-yaml.md) or a commit of "
               "its repository (git: {url: …, commit: …}), or move the project into the repository")


def repository_root(root: Path) -> Path:
    """The git checkout that holds the release folder `root` (its top level), else `root` itself."""
    try:
        top = command.run(["git", "-C", root, "rev-parse", "--show-toplevel"], timeout=30).stdout.strip()
    except ToolError:
        return root.resolve()
    return Path(top).resolve() if top else root.resolve()


def check_sources_in_repository(spec: Spec, release_file: str = "release.yaml") -> None:
    """InputError (one line, exit 2) for the first component whose `path` lies outside the repository
    the workflows check out (a symlink counts where it leads); an sdist or a git commit is fetched by
    the job itself (its validate), into the job's cache."""
    repository = repository_root(spec.root)
    for name, component in spec.release.components.items():
        if component.path is None or resolves_inside(component.source_dir(spec.root), repository):
            continue
        key = ("components", name, "path")
        line = load_yaml(spec.root / release_file).line_of(key)
        raise input_error(spec.root / release_file, ".".join(key),
                          f"{component.source_dir(spec.root)} lies outside the repository ({repository}) that "
                          f"the generated workflows check out, so no CI job can build component {name}",
                          OUTSIDE_FIX, line=line, value=component.path)
