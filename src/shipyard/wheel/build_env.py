"""Per-interpreter build environments with a project's PEP 517 build requirements installed.

Builds run with `--no-isolation` semantics inside these, so the backend is installed once per
Python instead of once per build, and the environment's exact contents (`uv pip freeze`) are
part of the cache key. uv makes them (no pip inside: nothing runs it there). Both the static
requirements ([build-system].requires) and the ones the backend asks for at run time (its
get_requires_for_build_wheel hook: scikit-build-core asks for cmake or ninja when the system
has none new enough) are installed when the environment is made, so each build can skip the
frontend's per-build dependency check.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from build import ProjectBuilder
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from shipyard.host.toolchains.discover import Interpreter
from shipyard.plumbing import command
from shipyard.plumbing.file_lock import exclusive
from shipyard.plumbing.hashing import sha256_hex, sha256_of
from shipyard.release.project_declaration import build_backend, declaration_hash, writes_into_sources
from shipyard.testing.venv import uv_binary

# Always present: the frontend itself and the backends ember's components use.
BASE_REQUIREMENTS = ("build>=1.2", "scikit-build-core>=0.10", "hatchling>=1.25",
                     "setuptools>=70", "wheel>=0.43")


@dataclass(frozen=True)
class BuildEnv:
    interpreter: Interpreter
    root: Path
    requirements: tuple[str, ...]
    identity: str  # hash of `pip freeze`: the exact backend versions

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def path_env(self) -> dict[str, str]:
        """PATH with the environment's bin first: backends run tools installed beside them
        (meson-python runs `meson` and `ninja`), as they would in an isolated build."""
        return {"PATH": os.pathsep.join([str(self.root / "bin"), os.environ.get("PATH", "")])}


def build_requirements(project: Path) -> tuple[str, ...]:
    """[build-system].requires of the project; PEP 517's setuptools fallback for a setup.py-only
    project (as read by `build`, the frontend that runs the build)."""
    return tuple(sorted(ProjectBuilder(project).build_system_requires))


def combined_requirements(project_requires: Sequence[str]) -> tuple[str, ...]:
    """The project's build requirements and the base ones it does not name: where a project pins
    its backend (setuptools<70, say), its pin is the one installed."""
    named = {canonicalize_name(Requirement(r).name) for r in project_requires}
    base = [r for r in BASE_REQUIREMENTS if canonicalize_name(Requirement(r).name) not in named]
    return tuple(sorted(set(base) | set(project_requires)))


def hook_runner(what: str, extra_env: Mapping[str, str] | None = None, timeout: float = 3600,  # noqa: ANN201
                prestarted: command.PrestartedPython | None = None):
    """A pyproject_hooks runner that runs backend hooks through shipyard's command wrapper; the
    first hook in `prestarted` when it fits (the hook caller's own variables, which name the
    backend to the in-process script, are the only ones it adds), else in a process of its own."""
    def run(cmd: Sequence[str], cwd: str | None = None, extra_environ: Mapping[str, str] | None = None) -> None:
        if prestarted is not None:
            if prestarted.fits(cmd, cwd, extra_env or {}):
                prestarted.run(cmd, late_env=extra_environ or {}, timeout=timeout, what=what)
                return
            command.log.debug("%s: the prestarted Python does not fit, a new one runs the hook", what)
            prestarted.close()
        command.run(cmd, cwd=cwd, extra_env={**(extra_env or {}), **(extra_environ or {})}, timeout=timeout,
                    what=what)
    return run


def ensure_build_env(interpreter: Interpreter, project: Path, state: Path) -> BuildEnv:
    """A venv of `interpreter` holding everything `project` needs to build a wheel (made once,
    reused after; a project with other requirements gets its own)."""
    wanted = combined_requirements(build_requirements(project))
    tag = sha256_hex("\n".join(wanted).encode())[:12]
    root = state / "envs" / f"build-{interpreter.full_version}-{interpreter.binary_sha256[:8]}-{tag}"
    python = root / "bin" / "python"
    marker = root / "shipyard-freeze.txt"
    # Parallel runs (nox sessions, pytest-xdist workers, the CPU and a CUDA build) share the
    # venv of an interpreter: one makes or extends it, the others wait and reuse it.
    with exclusive(root.with_name(f".{root.name}.lock")):
        if not marker.is_file():
            if root.exists():
                shutil.rmtree(root)
            # uv, not `python -m venv` and pip: ensurepip and pip's resolver took about a minute
            # per Python on a cold machine, uv takes seconds (and Pythons make theirs side by side).
            command.run([uv_binary(), "venv", "--quiet", "--python", interpreter.path, root],
                        what=f"venv for Python {interpreter.version}")
            _install(python, wanted, interpreter)
        dynamic = root / "shipyard-dynamic" / declaration_hash(project)
        if not dynamic.is_file():
            path = BuildEnv(interpreter, root, wanted, "").path_env()
            with tempfile.TemporaryDirectory(prefix="shipyard-requires-") as tmp:
                # setuptools answers this hook by writing egg-info into the project: ask a copy,
                # so the sources (and their hash, the build's cache key) stay as they are.
                where = (copy_project(project, Path(tmp) / project.name)
                         if writes_into_sources(build_backend(project)) else project)
                builder = ProjectBuilder(where, python_executable=str(python),
                                         runner=hook_runner(f"build requirements of {project.name}", path))
                extra = sorted(builder.get_requires_for_build("wheel"))
            if extra:
                _install(python, extra, interpreter)
            dynamic.parent.mkdir(exist_ok=True)
            dynamic.write_text("\n".join(extra) + "\n")
            marker.unlink(missing_ok=True)  # the environment changed: freeze it again
            (root / COMPILED_MARKER).unlink(missing_ok=True)
        if not marker.is_file():
            marker.write_text(command.run([uv_binary(), "pip", "freeze", "--python", python]).stdout)
        _compile_bytecode(root, python, interpreter)
        identity = sha256_of(marker)[:16]
        return BuildEnv(interpreter, root, wanted, identity)


def copy_project(project: Path, dest: Path) -> Path:
    """A copy of `project` at `dest` to build in, git metadata included (setuptools_scm reads it),
    without what earlier builds left behind."""
    leftovers = shutil.ignore_patterns("*.egg-info", "__pycache__", ".mesonpy-*")

    def ignore(folder: str, names: list[str]) -> set[str]:
        top = {"build", "dist"} & set(names) if Path(folder) == project else set()
        return set(leftovers(folder, names)) | top

    shutil.copytree(project, dest, symlinks=True, ignore=ignore)
    return dest


# Every build starts a fresh interpreter that imports the backend (scikit-build-core, about 300
# modules). uv installs sources only, and builds run with PYTHONDONTWRITEBYTECODE where CI sets it,
# so without this each build compiled the same modules again: about 0.3 s of CPU per Python.
COMPILED_MARKER = "shipyard-bytecode"


def _compile_bytecode(root: Path, python: Path, interpreter: Interpreter) -> None:
    """Byte-compile the environment's packages once (again after it changed); the bytecode is
    the interpreter's own (compileall), so imports read it and never write."""
    marker = root / COMPILED_MARKER
    if marker.is_file():
        return
    for site in sorted(root.glob("lib/python*/site-packages")):
        # Not checked: a file this Python cannot compile (another version's syntax, test data)
        # is imported from source, as before.
        command.run([python, "-m", "compileall", "-q", "-j", "0", site], timeout=600, check=False,
                    what=f"byte-compile the build environment of Python {interpreter.version}")
    marker.write_text("")


def _install(python: Path, requirements: Sequence[str], interpreter: Interpreter) -> None:
    command.run([uv_binary(), "pip", "install", "--quiet", "--python", python, *requirements],
                timeout=1200, what=f"build requirements for Python {interpreter.version}")
