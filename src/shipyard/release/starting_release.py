"""`shipyard init`: a starting release.yaml and feature_status.yaml from the projects' own metadata
and sources (release/project_survey.py), with comments saying what is left to decide.

What needs a build backend (the metadata hook) or the host (its Pythons) lives on floors above
this one, so the caller hands both in. The files are written from one small template per section
(a YAML emitter would drop the comments), checked by the loader `shipyard validate` uses, and only
then put in place, each whole (plumbing/atomic_files.py).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from shipyard.errors import ToolError, UsageError
from shipyard.plumbing.atomic_files import write_atomic
from shipyard.plumbing.input_files import input_error
from shipyard.plumbing.pinned_sdists import fetch_sdist
from shipyard.plumbing.progress import Progress
from shipyard.release.fields import supported_pythons
from shipyard.release.project_survey import (
    ProjectMetadata,
    ProjectSurvey,
    is_python_project,
    static_metadata,
    survey,
)
from shipyard.release.validate import BackendRequiresPython, load_spec

RELEASE_FILE = "release.yaml"
FEATURE_FILE = "feature_status.yaml"
# What a release whose first project computes its version at build time starts from.
PLACEHOLDER_VERSION = "0.1.0"
# Reads a project's metadata through its build backend's hook (wheel/project_metadata.py).
MetadataReader = Callable[[Path], ProjectMetadata]


@dataclass(frozen=True)
class StartingProject:
    """One project as init writes it: its component name, path (from the release folder, or absolute),
    facts, and whether it lies outside the release folder / outside the repository CI checks out."""

    name: str
    path: str
    metadata: ProjectMetadata
    survey: ProjectSurvey
    outside_release: bool = False
    outside_repository: bool = False
    sdist: PinnedSdistProject | None = None  # its sources are this sdist, not a folder


@dataclass(frozen=True)
class PinnedSdistProject:
    """A project given as its released sdist, pinned: `URL#sha256=HEX` on init's command line."""

    url: str
    sha256: str

    @classmethod
    def parse(cls, argument: str) -> PinnedSdistProject | None:
        """`URL#sha256=HEX` as a pinned sdist; None for anything else (a folder)."""
        url, sep, digest = argument.partition("#sha256=")
        if not sep:
            return None
        if not url or not re.fullmatch(r"[0-9a-fA-F]{64}", digest):
            raise input_error(Path(argument), "(sdist)", "is no pinned sdist: the form is URL#sha256=<64 hex digits>",
                              "give the sdist's URL and its sha256 as its index lists it")
        return cls(url, digest.lower())


def write_starting_release(root: Path, projects: Sequence[Path | PinnedSdistProject], host_pythons: Sequence[str], *,
                           read_metadata: MetadataReader, backend_reader: BackendRequiresPython | None = None,
                           force: bool = False, repository: Path | None = None,
                           progress: Progress = lambda _: None) -> tuple[Path, Path]:
    """Write release.yaml and feature_status.yaml into `root` for `projects` (folders of Python
    projects, inside `root` or anywhere, or pinned sdists, fetched into shipyard's cache as validate
    fetches them), building for those of `host_pythons` some project supports.
    `repository`: what the generated workflows check out (default `root`); a project outside it gets
    a comment that no CI job can build it. Refuses to replace existing files unless `force`. Returns
    the two files written."""
    targets = (root / RELEASE_FILE, root / FEATURE_FILE)
    if not force:
        for target in targets:
            if target.exists():
                raise input_error(target, "(file)", "already exists; init writes a new release",
                                  "pass --force to replace it, or edit it yourself")
    started = _start_all(root, projects, read_metadata, repository or root, progress)
    release_text = release_yaml(root, started, host_pythons)
    feature_text = feature_status_yaml(root, started)
    _check_then_write(root, targets, (release_text, feature_text), backend_reader)
    ignore_outputs(root)
    return targets


# What the commands write beside release.yaml: dist/ (the artifacts) and .shipyard/ (work, caches,
# keys). Committed, a CI job would find last week's wheels in its dist/ and refuse them.
OUTPUT_FOLDERS = ("/dist/", "/.shipyard/")


def ignore_outputs(root: Path) -> list[str]:
    """Add the output folders .gitignore lacks to `root`/.gitignore; returns the lines added."""
    ignore = root / ".gitignore"
    text = ignore.read_text() if ignore.is_file() else ""
    present = {line.strip().strip("/") for line in text.splitlines()}  # dist, dist/ and /dist/ alike
    missing = [line for line in OUTPUT_FOLDERS if line.strip("/") not in present]
    if missing:
        lead = "" if not text or text.endswith("\n") else "\n"
        added = "# shipyard's outputs (shipyard init)\n" + "".join(f"{m}\n" for m in missing)
        write_atomic(ignore, text + lead + added)
    return missing


def _start_all(root: Path, projects: Sequence[Path | PinnedSdistProject], read_metadata: MetadataReader,
               repository: Path, progress: Progress) -> list[StartingProject]:
    """Each project read: refused when it is no Python project or repeats a name."""
    started: list[StartingProject] = []
    for given in projects:
        pinned = given if isinstance(given, PinnedSdistProject) else None
        if isinstance(given, PinnedSdistProject):
            try:
                project = fetch_sdist(given.url, given.sha256, base=root, progress=progress)
            except ValueError as exc:  # one line already: the url, what is wrong and the fix
                raise UsageError(f"init: {exc}") from exc
        else:
            project = given
        if not project.is_dir() or not is_python_project(project):
            raise input_error(project, "(folder)", "is no Python project (no pyproject.toml, no setup.py)",
                              "give the folder that holds the project's pyproject.toml or setup.py")
        metadata = _metadata(project, read_metadata)
        name = canonicalize_name(metadata.name or project.resolve().name)
        if any(s.name == name for s in started):
            raise input_error(project, "(folder)", f"is a second project named {name}",
                              "give each project once")
        folder = project.resolve()
        if pinned is not None:  # fetched by every command and CI job: never outside what they reach
            started.append(StartingProject(name, "", metadata, survey(project, metadata), outside_release=True,
                                           sdist=pinned))
            continue
        started.append(StartingProject(name, project_path(folder, root), metadata, survey(project, metadata),
                                       outside_release=not folder.is_relative_to(root.resolve()),
                                       outside_repository=not folder.is_relative_to(repository.resolve())))
    return started


def project_path(project: Path, root: Path) -> str:
    """How release.yaml names the folder `project` (absolute): relative to the release folder `root`
    when the two share a folder below the file system's root, else absolute (another tree or drive:
    a relative path would climb to / and break when either moves)."""
    base = root.resolve()
    try:
        common = Path(os.path.commonpath([project, base]))
    except ValueError:  # on different drives
        return project.as_posix()
    if common == Path(common.anchor):
        return project.as_posix()
    return Path(os.path.relpath(project, base)).as_posix()


def _metadata(project: Path, read_metadata: MetadataReader) -> ProjectMetadata:
    """The project's metadata from its [project] table, else from its backend's hook. Every
    project's version is needed, not the first one's alone: the first's is the release's, and any
    other whose version differs gets its own `version:` (its tags, its features' `since:`), so a
    version the table leaves dynamic (setuptools_scm's, in a released sdist too) is asked of the
    hook. When the hook fails, the table's other facts still serve (the version is then left to
    decide)."""
    if (static := static_metadata(project, need_version=True)) is not None:
        return static
    try:
        return read_metadata(project)
    except ToolError as exc:
        if (fallback := static_metadata(project, need_version=False)) is not None:
            return fallback
        raise input_error(project, "(metadata)", str(exc),
                          "fix the project so that its build backend prepares its metadata") from exc


def _scalar(value: str) -> str:
    """`value` as a YAML scalar: bare when YAML reads it back as that string, else double-quoted."""
    if re.fullmatch(r"[A-Za-z_/][A-Za-z0-9_./-]*", value) and value.lower() not in (
            "true", "false", "yes", "no", "on", "off", "null", "y", "n"):
        return value
    return json.dumps(value)  # a JSON string is a YAML double-quoted scalar


def _flow(values: Sequence[str]) -> str:
    return "[" + ", ".join(_scalar(v) for v in values) + "]"


def _admits(requires_python: str | None, python: str) -> bool:
    if not requires_python:
        return True
    try:
        spec = SpecifierSet(requires_python)
    except InvalidSpecifier:
        return True  # validate reports it on the project's own terms
    return any(spec.contains(f"{python}.{patch}", prereleases=True) for patch in (0, 99))


def release_pythons(started: Sequence[StartingProject], host_pythons: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the release's Pythons, comment lines): those found on the host that shipyard supports and
    some project admits; each left out is named with why."""
    notes: list[str] = []
    supported = [p for p in host_pythons if p in supported_pythons()]
    for python in host_pythons:
        if python not in supported:
            notes.append(f"Python {python} (found on this host) is not one shipyard builds for: left out.")
    kept = [p for p in supported if any(_admits(s.metadata.requires_python, p) for s in started)]
    for python in supported:
        if python not in kept:
            notes.append(f"Python {python} (found on this host) is left out: no project supports it "
                         f"(Requires-Python {', '.join(sorted({s.metadata.requires_python or '' for s in started}))}).")
    for s in started:
        ruled_out = [p for p in kept if not _admits(s.metadata.requires_python, p)]
        if ruled_out:
            notes.append(f"{s.name} requires Python {s.metadata.requires_python}: its {', '.join(ruled_out)} "
                         f"cells are not applicable.")
    return kept, notes


def release_yaml(root: Path, started: Sequence[StartingProject], host_pythons: Sequence[str]) -> str:
    """release.yaml's text for the projects, with comments saying what to decide."""
    first = started[0]
    version = first.metadata.version
    pythons, python_notes = release_pythons(started, host_pythons)
    if not pythons:
        raise input_error(root / RELEASE_FILE, "pythons", "no Python found on this host is one every project "
                          "and shipyard support", f"install a Python that {first.name} supports",
                          value=", ".join(host_pythons) or "none found")
    lines = [
        "# Written by `shipyard init` from the projects' own metadata and sources. Check every line marked",
        "# DECIDE, then run `shipyard validate` and `shipyard build`. docs/release-yaml.md explains each key.",
        "schema_version: 1",
        "release:",
        f"  name: {_scalar(first.name)}",
    ]
    if version:
        lines.append(f"  # The first project's version ({first.name}); a tag v<version> releases it.")
        lines.append(f"  version: {_scalar(version)}")
    else:
        lines.append(f"  # DECIDE: {first.name} computes its version when it builds; this is a placeholder.")
        lines.append(f"  version: {PLACEHOLDER_VERSION}")
    lines += [
        "  # No size budget: wheel sizes are not checked. To fail a cell whose wheel is bigger than N MiB,",
        "  # add `wheel_size_budget_mb: N` here (or under a variant, for its wheels).",
        "components:",
    ]
    for s in started:
        facts = s.survey
        lines.append(f"  {_scalar(s.name)}:")
        if s.outside_repository:
            lines.append("    # DECIDE: this folder lies outside the repository, so the generated workflows cannot")
            lines.append("    # build it on GitHub (`shipyard ci generate` refuses it); local builds work. For CI, pin")
            lines.append("    # its released sdist instead: `sdist: {url: ..., sha256: ...}` (docs/release-yaml.md).")
        if s.sdist is not None:
            lines.append("    # Its released sdist, fetched and checked against its sha256 by every command.")
            lines.append(f"    sdist: {{url: {_scalar(s.sdist.url)}, sha256: {s.sdist.sha256}}}")
        else:
            lines.append(f"    path: {_scalar(s.path)}")
        if (own := _own_version(s, started)) is not None:
            lines.append("    # Its own version (the release's is the first project's): its tags are "
                         f"{s.name}-v{own}.")
            lines.append(f"    version: {_scalar(own)}")
        lines.append(f"    # {'native' if facts.native else 'pure'}: {facts.kind_reason}.")
        lines.append(f"    kind: {'python-native' if facts.native else 'python-pure'}")
        if facts.import_name:
            if facts.other_import_names:
                lines.append(f"    # DECIDE: it also has {', '.join(facts.other_import_names)}; the wheel is checked "
                             f"by importing this one.")
            lines.append(f"    import_name: {facts.import_name}")
        else:
            lines.append("    # DECIDE: no package found beside pyproject.toml or under src/; this is its name.")
            lines.append(f"    import_name: {s.name.replace('-', '_').replace('.', '_')}")
        lines.append("    package_types: [wheel]")
        if facts.tests:
            lines.append(f"    # From {facts.tests_reason}.")
            lines.append(f"    tests: {_scalar(facts.tests)}")
        else:
            lines.append(f"    # DECIDE: {facts.tests_reason}; add `tests: <folder>` relative to path.")
        if facts.test_requires:
            lines.append(f"    # From {facts.test_requires_reason}.")
            lines.append(f"    test_requires: {_flow(facts.test_requires)}")
    lines += [
        "variants:",
        "  # CPU builds; a CUDA variant adds `cuda:` and `arch_list:` (docs/release-yaml.md).",
        "  cpu:",
        "    tag: cpu",
        "platforms:",
        "  # os, arch, wheel_platform_tag and github_runner follow from the name (manylinux_2_31_x86_64 on",
        "  # ubuntu-22.04 here); give any of them to change it. DECIDE: add windows-amd64, macos-arm64.",
        "  linux-x86_64: {}",
        *(f"# {note}" for note in python_notes),
        f"pythons: {_flow(pythons)}",
    ]
    return "\n".join(lines) + "\n"


def _own_version(project: StartingProject, started: Sequence[StartingProject]) -> str | None:
    """The project's version when it is not the release's (the first project's), else None."""
    family = started[0].metadata.version or PLACEHOLDER_VERSION
    version = project.metadata.version
    return version if version and version != family and project is not started[0] else None


def feature_status_yaml(root: Path, started: Sequence[StartingProject]) -> str:
    """feature_status.yaml's text: one feature per project, proved by its tests folder."""
    version = started[0].metadata.version or PLACEHOLDER_VERSION
    lines = [
        "# Written by `shipyard init`: one feature per project, proved by all its tests. Split it into the",
        "# features you promise, each with the tests that prove it (docs/release-yaml.md). A feature is beta",
        "# until its tests pass in a build: then make it stable, and a failing test blocks the release.",
        "schema_version: 1",
        "features:",
    ]
    for s in started:
        folder = s.survey.tests or "tests"
        # Test ids are the release's for a project inside it, else the project's own (Component.test_id_root).
        tests = os.path.normpath(folder if s.outside_release else os.path.join(s.path, folder)).replace(os.sep, "/")
        title = s.metadata.summary or f"{s.name} as its tests describe it"
        feature_id = re.sub(r"[^a-z0-9-]", "-", s.name) + ".tests"
        lines += [
            f"  - id: {feature_id}",
            f"    title: {json.dumps(title if len(title) >= 3 else f'{s.name} works')}",
            f"    component: {_scalar(s.name)}",
            f"    since: {_scalar(_own_version(s, started) or version)}",
            "    status: beta",
        ]
        if not s.survey.tests:
            lines.append("    # DECIDE: no tests folder was found; name the tests that prove this feature.")
        lines.append(f"    tests: [{_scalar(tests + '/')}]")
    return "\n".join(lines) + "\n"


def _check_then_write(root: Path, targets: tuple[Path, Path], texts: tuple[str, str],
                      backend_reader: BackendRequiresPython | None) -> None:
    """Validate the two texts as `shipyard validate` would (staged beside their place under names of
    their own), then put each in place whole; nothing is left behind when they do not validate."""
    staged = [target.with_name(f".{target.name}.init") for target in targets]
    try:
        for path, text in zip(staged, texts, strict=True):
            write_atomic(path, text)
        load_spec(root, staged[0].name, staged[1].name, backend_reader=backend_reader)
    except BaseException:
        for path in staged:
            path.unlink(missing_ok=True)
        raise
    for path, target in zip(staged, targets, strict=True):
        os.replace(path, target)
