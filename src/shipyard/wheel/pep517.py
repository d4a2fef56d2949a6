"""Build one wheel on the host through the PEP 517 frontend library `build`."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Literal

from build import BuildBackendException, ProjectBuilder

from shipyard.errors import BuildError, ToolError
from shipyard.plumbing.command import PrestartedPython
from shipyard.release.project_declaration import SCIKIT_BUILD_CORE, build_backend
from shipyard.wheel.build_env import BuildEnv, hook_runner

# What a backend's build_wheel imports on its first call: most of the hook's own time (about
# 0.2 s of CPU for scikit-build-core), which a Python started ahead spends while it waits.
HOOK_IMPORTS = {SCIKIT_BUILD_CORE: ("scikit_build_core.build.wheel",)}  # (its package comes with it)


def _hook_process_environment(env: BuildEnv, extra_env: dict[str, str], jobs: int) -> dict[str, str]:
    """What the hook's process gets over this one's environment: the build's variables, the venv's
    PATH and the build's parallelism."""
    return {**env.path_env(), **extra_env, "CMAKE_BUILD_PARALLEL_LEVEL": str(jobs)}


def prestart_build_hook(project: Path, env: BuildEnv, *, extra_env: dict[str, str],
                        jobs: int) -> PrestartedPython | None:
    """`env`'s Python, started now for `build_wheel` of `project` with the same `extra_env` and
    `jobs`, importing its backend while the build waits for something else (a native core);
    None for a backend with nothing worth importing ahead."""
    imports = HOOK_IMPORTS.get(build_backend(project))
    if imports is None:
        return None
    return PrestartedPython(env.python, imports=imports, cwd=os.path.abspath(project),
                            env=_hook_process_environment(env, extra_env, jobs))


def build_wheel(project: Path, env: BuildEnv, out_dir: Path, *, cmake_defines: dict[str, str],
                extra_env: dict[str, str], build_dir: Path | None, jobs: int,
                prestarted: PrestartedPython | None = None,
                config_settings: dict[str, str] | None = None) -> Path:
    """The backend's build_wheel hook, run by `env`'s Python without isolation (in `prestarted`
    when it was started for this build); returns the wheel. `env` already holds every build
    requirement (ensure_build_env checked them), so there is no per-build dependency check.
    `config_settings`: further settings for the backend (an abi3 wheel's tag, limited_api.py)."""
    settings: dict[str, str | list[str]] = {f"cmake.define.{k}": v for k, v in cmake_defines.items()}
    settings |= config_settings or {}
    if build_dir is not None:
        settings["build-dir"] = str(build_dir)
    what = f"build {project.name} wheel for Python {env.interpreter.version}"
    runner = hook_runner(what, _hook_process_environment(env, extra_env, jobs), prestarted=prestarted)
    builder = ProjectBuilder(project, python_executable=str(env.python), runner=runner)
    return run_backend(builder, "wheel", out_dir, what, config_settings=settings)


def run_backend(builder: ProjectBuilder, distribution: Literal["wheel", "sdist"], out_dir: Path, what: str, *,
                config_settings: dict[str, str | list[str]] | None = None) -> Path:
    """Build `distribution` ("wheel" or "sdist") with the project's backend into `out_dir`; the
    backend's failure is a BuildError naming `what` (a ToolError from the hook runner as it is)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"shipyard-{distribution}-") as tmp:
        try:
            made = Path(builder.build(distribution, tmp, config_settings=config_settings))
        except BuildBackendException as exc:
            cause = exc.exception
            if isinstance(cause, ToolError):
                raise cause from None
            raise BuildError(f"{what} failed: {exc}") from exc
        target = out_dir / made.name
        shutil.move(made, target)
        return target
