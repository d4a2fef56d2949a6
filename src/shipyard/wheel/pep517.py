"""Build one wheel on the host through the PEP 517 frontend library `build`."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from build import BuildBackendException, ProjectBuilder

from shipyard.errors import BuildError, ToolError
from shipyard.wheel.build_env import BuildEnv, hook_runner


def build_wheel(project: Path, env: BuildEnv, out_dir: Path, *, cmake_defines: dict[str, str],
                extra_env: dict[str, str], build_dir: Path | None, jobs: int) -> Path:
    """The backend's build_wheel hook, run by `env`'s Python without isolation; returns the
    wheel. `env` already holds every build requirement (ensure_build_env checked them), so
    there is no per-build dependency check."""
    settings: dict[str, str | list[str]] = {f"cmake.define.{k}": v for k, v in cmake_defines.items()}
    if build_dir is not None:
        settings["build-dir"] = str(build_dir)
    what = f"build {project.name} wheel for Python {env.interpreter.version}"
    runner = hook_runner(what, {**env.path_env(), **extra_env, "CMAKE_BUILD_PARALLEL_LEVEL": str(jobs)})
    builder = ProjectBuilder(project, python_executable=str(env.python), runner=runner)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="shipyard-wheel-") as tmp:
        try:
            made = Path(builder.build("wheel", tmp, config_settings=settings))
        except BuildBackendException as exc:
            cause = exc.exception
            if isinstance(cause, ToolError):
                raise cause from None
            raise BuildError(f"{what} failed: {exc}") from exc
        target = out_dir / made.name
        shutil.move(made, target)
        return target
