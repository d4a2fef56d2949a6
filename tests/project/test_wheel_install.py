"""shipyard installed from its wheel, as CI's `uv pip install .` installs it: the data files it
reads (the images' Dockerfile, the manylinux image's recipe) come with the package, not from
a checkout beside it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "src" / "shipyard" / "resources" / "docker"
# uv comes with shipyard (a dependency): beside this interpreter in the test environment.
UV = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")


def _run(argv: list[str | Path], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{argv}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.slow
def test_a_wheel_install_plans_an_image_build_from_its_own_dockerfile(spec_copy, tmp_path):
    assert UV, "uv is a dependency of shipyard and must be installed beside it"
    # Out of a copy of the sources, so that nothing in the checkout can be what the install finds.
    source = tmp_path / "source"
    shutil.copytree(REPO / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    wheels = tmp_path / "wheels"
    _run([UV, "build", "--wheel", "--out-dir", wheels, source], cwd=tmp_path)
    (wheel,) = wheels.glob("shipyard-*.whl")
    shutil.rmtree(source)  # the install must stand on its own
    venv = tmp_path / "venv"
    _run([UV, "venv", "--python", sys.executable, venv], cwd=tmp_path)
    python = venv / "bin" / "python"
    _run([UV, "pip", "install", "--python", python, wheel], cwd=tmp_path)

    env = {**os.environ, "COLUMNS": "400"}
    env.pop("PYTHONPATH", None)
    where = Path(_run([python, "-c", "import shipyard; print(shipyard.__file__)"], cwd=tmp_path, env=env).strip())
    assert where.is_relative_to(venv), where

    out = _run([venv / "bin" / "shipyard", "--root", spec_copy.root, "image", "build", "--variant", "cpu", "--plan"],
               cwd=tmp_path, env=env)
    assert "ember:1.7.0-cpu-runtime" in out and "ember:nightly-cpu-devel" in out
    recipe = (DATA / "Dockerfile").read_bytes()
    installed = where.parent / "resources" / "docker" / "Dockerfile"
    assert (f"Dockerfile: {installed} (sha256 {hashlib.sha256(recipe).hexdigest()}, {len(recipe)} bytes)"
            in out), out

    # The build context the engine would get holds those bytes.
    staged = tmp_path / "staged"
    (staged / "deps").mkdir(parents=True)
    context = _run([python, "-c", "import sys; from pathlib import Path; from shipyard.image import build, deps; "
                                  "print(build.stage_context(Path(sys.argv[1]), [], deps.Wheelhouse(Path(sys.argv[1]) "
                                  "/ 'deps', ()), build.DOCKERFILE, 0))", staged], cwd=tmp_path, env=env).strip()
    assert (Path(context) / "Dockerfile").read_bytes() == recipe

    # The manylinux image's recipe too: its inputs hash the files the wheel carries.
    inputs = json.loads(_run([python, "-c", "import json; from shipyard.host import docker_base; "
                                            "print(json.dumps(docker_base.manylinux_inputs([], 'base')))"],
                             cwd=tmp_path, env=env))
    for name in ("Dockerfile.manylinux", "setup-pythons.sh", "constraints.txt"):
        assert inputs[f"recipe/{name}"] == hashlib.sha256((DATA / "base" / name).read_bytes()).hexdigest()
