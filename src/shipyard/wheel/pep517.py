"""Build one wheel on the host with the PEP 517 frontend `build`."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from shipyard import command
from shipyard.errors import BuildError
from shipyard.wheel.build_env import BuildEnv


def build_wheel(project: Path, env: BuildEnv, out_dir: Path, *, cmake_defines: dict[str, str],
                extra_env: dict[str, str], build_dir: Path | None, jobs: int) -> Path:
    """`python -m build --wheel --no-isolation` in `env`; returns the one wheel it made."""
    settings = [f"-Ccmake.define.{k}={v}" for k, v in cmake_defines.items()]
    if build_dir is not None:
        settings.append(f"-Cbuild-dir={build_dir}")
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="shipyard-wheel-") as tmp:
        command.run(
            [env.python, "-m", "build", "--wheel", "--no-isolation", "--outdir", tmp, *settings, project],
            extra_env={**extra_env, "CMAKE_BUILD_PARALLEL_LEVEL": str(jobs)},
            timeout=3600, what=f"build {project.name} wheel for Python {env.interpreter.version}")
        wheels = list(Path(tmp).glob("*.whl"))
        if len(wheels) != 1:
            raise BuildError(f"{project}: the build made {len(wheels)} wheels, expected one")
        target = out_dir / wheels[0].name
        shutil.move(wheels[0], target)
        return target
