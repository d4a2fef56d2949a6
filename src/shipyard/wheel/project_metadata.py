"""What a project's own build backend says its metadata is, for what its static files leave to
code: the Requires-Python of a setup.py-only project (setup.py computes `python_requires`), and for
`shipyard init` its name, version, summary and extras (`prepared_metadata`).

The answer comes from the PEP 517 `prepare_metadata_for_build_wheel` hook (through `build`, the
frontend the builds use), run on a copy of the project in a throwaway environment that holds the
project's build requirements. It is cached in shipyard's cache, keyed by the project's files, so
the hook runs once per change of the project, in whichever command reads the release first
(validate, matrix, build ...; a second or two), and never again while the files stay the same.
A project whose pyproject.toml has a [project] table, or whose setup.cfg states python_requires,
never runs it: its static files already say. The backend's warnings are kept in a log beside the
cached answer (`backend_warnings_log`), never printed: its errors still are, in one line.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
import warnings
from email.parser import Parser
from pathlib import Path

from shipyard.errors import ToolError
from shipyard.host.source_tree import hash_tree
from shipyard.plumbing import command
from shipyard.plumbing.file_lock import exclusive
from shipyard.release.project_declaration import build_backend, pyproject_table, writes_into_sources
from shipyard.release.project_survey import ProjectMetadata

# Bump when what is read from the metadata (or how) changes: older cached answers are then stale.
HOOK_REVISION = "2"


def needs_metadata_hook(project: Path) -> bool:
    """Whether only the backend can say the project's Requires-Python: it builds (pyproject.toml or
    setup.py), and neither a [project] table (unless it lists requires-python as dynamic) nor
    setup.cfg's python_requires settles it. A [project] table without requires-python means none."""
    if not (project / "setup.py").is_file() and not (project / "pyproject.toml").is_file():
        return False
    table = pyproject_table(project).get("project")
    if isinstance(table, dict):
        return "requires-python" in (table.get("dynamic") or ())
    return True


def backend_requires_python(project: Path) -> str | None:
    """What release/validate.load_spec is handed to read the Requires-Python only the backend can
    say: the backend's answer when the project needs the hook, else None (its files settle it)."""
    return metadata_requires_python(project) if needs_metadata_hook(project) else None


def metadata_requires_python(project: Path) -> str | None:
    """The Requires-Python of the project's metadata as its backend prepares it (None when it has
    none), from the cache when the project's files are those it was read from."""
    return prepared_metadata(project).requires_python


def prepared_metadata(project: Path) -> ProjectMetadata:
    """The project's core metadata as its backend's hook prepares it, from the cache when the
    project's files are those it was read from. Raises ToolError when the hook fails."""
    entry = _cache_entry(project)
    with exclusive(entry.with_name(f".{entry.name}.lock")):
        if entry.is_file():
            cached = json.loads(entry.read_text())
            return ProjectMetadata(cached["name"], cached["version"], cached["requires_python"],
                                   cached["summary"], tuple(cached["requires_dist"]))
        log = warnings_log(entry)
        # The backend's warnings (setuptools prints some 20 lines of deprecations per project) would
        # read as a failure in validate's output: they go to a log that validate names instead.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            found = _run_metadata_hook(project)
        if caught:
            log.write_text("".join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno)
                                   for w in caught), encoding="utf-8")
        tmp = entry.with_name(f".{entry.name}.tmp")
        tmp.write_text(json.dumps({"project": project.name, "name": found.name, "version": found.version,
                                   "requires_python": found.requires_python, "summary": found.summary,
                                   "requires_dist": list(found.requires_dist)}))
        tmp.replace(entry)
        return found


def _cache_entry(project: Path) -> Path:
    from shipyard.host.toolchains.discover import cache_root  # host facts: imported only where needed

    key = hashlib.sha256(f"{HOOK_REVISION}\0{hash_tree(project)}".encode()).hexdigest()[:32]
    return cache_root() / "project-metadata" / f"{key}.json"


def warnings_log(entry: Path) -> Path:
    """Where the backend's warnings for the cached answer `entry` are kept (beside it, in the cache)."""
    return entry.with_suffix(".warnings.log")


def backend_warnings_log(project: Path) -> Path | None:
    """The log of the warnings the project's backend gave when its metadata was last read (the
    files as they are now), or None: it gave none, or the hook was not needed."""
    if not needs_metadata_hook(project):
        return None
    log = warnings_log(_cache_entry(project))
    return log if log.is_file() else None


def _run_metadata_hook(project: Path) -> ProjectMetadata:
    # Imported here: every command reads the release, and only a cache miss needs the frontend.
    from build import BuildBackendException, BuildException, ProjectBuilder

    from shipyard.testing.venv import uv_binary
    from shipyard.wheel.build_env import copy_project, hook_runner

    what = f"prepare_metadata_for_build_wheel of {project.name}"
    with tempfile.TemporaryDirectory(prefix="shipyard-metadata-") as tmp:
        # setuptools writes egg-info into the project it is asked about: ask a copy.
        where = (copy_project(project, Path(tmp) / project.name)
                 if writes_into_sources(build_backend(project)) else project)
        venv = Path(tmp) / "env"
        uv = uv_binary()
        try:
            command.run([uv, "venv", "--quiet", "--python", sys.executable, venv], what=f"environment for {what}")
            python = venv / "bin" / "python"
            builder = ProjectBuilder(where, python_executable=str(python), runner=hook_runner(what, timeout=600))
            command.run([uv, "pip", "install", "--quiet", "--python", python, *builder.build_system_requires],
                        timeout=600, what=f"build requirements of {project.name}")
            if extra := builder.get_requires_for_build("wheel"):
                command.run([uv, "pip", "install", "--quiet", "--python", python, *sorted(extra)], timeout=600,
                            what=f"build requirements of {project.name}")
            dist_info = Path(builder.metadata_path(Path(tmp) / "metadata"))
        except (BuildBackendException, BuildException, ToolError) as exc:
            cause = exc.exception if isinstance(exc, BuildBackendException) else exc
            last = (str(cause).strip().splitlines() or ["no output"])[-1].strip()
            raise ToolError(f"its build backend's {what} failed ({last})") from exc
        headers = Parser().parsestr((dist_info / "METADATA").read_text(encoding="utf-8"), headersonly=True)

        def one(field: str) -> str | None:
            value = headers.get(field)
            return value.strip() if value and value.strip() != "UNKNOWN" else None

        return ProjectMetadata(one("Name"), one("Version"), one("Requires-Python"), one("Summary"),
                               tuple(v.strip() for v in headers.get_all("Requires-Dist") or ()))
