"""The conda recipes as conda-forge can build them (#51 item 4): compilers, CMake and Ninja as build
requirements; conda-forge's CUDA packages on each side of CUDA 12 (cudatoolkit up to 11,
cuda-version + cuda-cudart + cuda-nvcc from 12); a Windows script beside each bash one; and a
bootstrap channel that holds every name those requirements use here. Rendering only, no build."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from rattler_build import RenderConfig, Stage0Recipe, VariantConfig

from shipyard.conda.bootstrap import release_requirements
from shipyard.conda.bootstrap_plan import bootstrap_cuda_versions, bootstrap_request
from shipyard.conda.build_plan import component_versions
from shipyard.conda.preflight import requirements_of, spec_name
from shipyard.conda.recipes import mirror_checkout, stage_recipe
from shipyard.conda.variants import variant_config
from shipyard.release.validate import load_spec

REPO = Path(__file__).resolve().parents[2]
NATIVE = ("ember", "embervision")  # the recipes that compile; the others are noarch


def _rendered(variant: str, recipe: str) -> dict[str, dict[str, Any]]:
    """package name -> its rendered recipe, for Python 3.11 of the variant."""
    spec = load_spec(REPO)
    config = variant_config(spec.release, spec.release.variants[variant], component_versions(spec))
    out = {}
    for rv in Stage0Recipe.from_file(REPO / "recipes" / recipe / "recipe.yaml").render(
            VariantConfig.from_yaml(json.dumps({**config, "python": ["3.11"]})), RenderConfig()):
        data = rv.recipe.to_dict()
        out[data["package"]["name"]] = data
    return out


def _needs(rendered: dict[str, Any], env: str) -> list[str]:
    return [s for s in requirements_of(rendered)[env] if isinstance(s, str)]


CUDA_NAMES = ("cudatoolkit", "cuda-version", "cuda-cudart")


@pytest.mark.parametrize("recipe", NATIVE)
def test_cpu_cores_build_with_compiler_packages_cmake_and_ninja(recipe: str) -> None:
    packages = _rendered("cpu", recipe)
    for name, data in packages.items():  # the core and the per-Python extensions compile both
        assert _needs(data, "build") == ["gcc_linux-64", "gxx_linux-64", "cmake", "ninja"], name
        assert not [s for s in _needs(data, "host") + _needs(data, "run") if spec_name(s) in CUDA_NAMES], name


@pytest.mark.parametrize(("variant", "cuda", "runtime", "compiler"), [
    ("cuda10.2", "10.2", ["cudatoolkit 10.2.*"], "nvcc_linux-64 10.2.*"),
    ("cuda11", "11.8", ["cudatoolkit 11.8.*"], "nvcc_linux-64 11.8.*"),
    ("cuda12", "12.4", ["cuda-version 12.4.*", "cuda-cudart 12.4.*"], "cuda-nvcc_linux-64 12.4.*"),
    ("cuda13", "13.0", ["cuda-version 13.0.*", "cuda-cudart 13.0.*"], "cuda-nvcc_linux-64 13.0.*"),
])
@pytest.mark.parametrize("recipe", NATIVE)
def test_cuda_cores_use_conda_forges_packages_of_their_cuda_major(recipe: str, variant: str, cuda: str,
                                                                   runtime: list[str], compiler: str) -> None:
    """conda-forge has no cuda-cudart 11.x and no cudatoolkit 12.x: the CUDA major decides."""
    packages = _rendered(variant, recipe)
    core = packages[f"lib{recipe}"]
    assert _needs(core, "build") == ["gcc_linux-64", "gxx_linux-64", compiler, "cmake", "ninja"]
    for env in ("host", "run"):
        assert [s for s in _needs(core, env) if spec_name(s) in CUDA_NAMES] == runtime, env
    # The per-Python extensions compile no device code: C and C++ only, the runtime through the core.
    extension = packages[recipe]
    assert _needs(extension, "build") == ["gcc_linux-64", "gxx_linux-64", "cmake", "ninja"]


# --- the Windows scripts --------------------------------------------------------------------

def _scripts() -> list[tuple[Path, dict[str, Any]]]:
    """(recipe folder / script file stem, the output's script section) of every scripted output."""
    found = []
    for recipe in NATIVE:
        for data in _rendered("cpu", recipe).values():
            script = data["build"]["script"]
            assert isinstance(script, dict) and "file" in script, (recipe, script)
            found.append((REPO / "recipes" / recipe / script["file"], script))
    return found


def _commands(text: str, comment: str) -> list[str]:
    """The cmake and Python invocations of a script, with every variable reference ($X, "${X:-1}",
    %X%) written `<var>`, a cmd `for` loop written as the command it runs, and quotes dropped: what
    both shells must run alike."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(comment):
            continue
        loop = re.match(r"for %%(\w) in \((.*?)\) do (.*)$", line)  # the glob bash expands itself
        if loop:
            line = loop.group(3).replace(f"%%~{loop.group(1)}", loop.group(2)).replace(f"%%{loop.group(1)}",
                                                                                       loop.group(2))
        line = re.sub(r"%%~?\w|%\w+%|\$\{\w+(:-[^}]*)?\}|\$\w+", "<var>", line).replace('"', "")
        if line.startswith(("cmake ", "<var> -")):
            out.append(line.replace("\\", "/"))
    return out


def test_every_script_has_a_windows_twin_that_runs_the_same_steps() -> None:
    scripts = _scripts()
    assert len(scripts) == 4
    for stem, section in scripts:
        bash, batch = stem.with_suffix(".sh").read_text(), stem.with_suffix(".bat").read_text()
        for name in section.get("env", {}):  # what the recipe hands the script, both read
            assert f"${name}" in bash and f"%{name}%" in batch, (stem, name)
        steps = _commands(bash, "#")
        assert steps and steps == _commands(batch, "::"), stem
        # cmd.exe goes on after a failed command: every step of the .bat checks it.
        lines = [line for line in batch.splitlines() if line.startswith(("cmake", '"%PYTHON%"', "for ", "if not"))]
        after = batch.splitlines()
        assert all(after[after.index(line) + 1] == "if errorlevel 1 exit 1" for line in lines), stem


def test_every_bash_script_passes_shellcheck() -> None:
    assert shutil.which("shellcheck"), "shellcheck is missing: run ci/bootstrap.sh --all"
    files = [str(stem.with_suffix(".sh")) for stem, _ in _scripts()]
    done = subprocess.run(["shellcheck", "--format", "gcc", *files], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


# --- the bootstrap channel ------------------------------------------------------------------

def _fake_pyenv(root: Path) -> Path:
    """A pyenv root whose Python 3.11 only answers the interpreter probe."""
    exe = root / "versions" / "3.11.7" / "bin" / "python3.11"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\necho 3.11.7\necho\n")
    exe.chmod(0o755)
    return root


def test_the_bootstrap_channel_holds_every_build_and_host_requirement_of_the_recipes(tmp_path: Path) -> None:
    """Every name a recipe's build and host environments need, for every variant whose CUDA the
    bootstrap channel can make here, is either built by the run or held by the channel."""
    spec = load_spec(REPO)
    release = spec.release
    cudas = bootstrap_cuda_versions(v.cuda for v in release.variants.values() if v.cuda)
    request = bootstrap_request(pythons=["3.11"], cuda_versions=cudas, requirements=release_requirements(spec),
                                pyenv=_fake_pyenv(tmp_path / "pyenv"))
    held = request.top_level_names()
    variants = [name for name, v in release.variants.items() if not v.cuda or v.cuda in cudas]
    assert variants == ["cpu", "cuda11", "cuda12", "cuda13"]
    for variant in variants:
        needed: dict[str, set[str]] = {}
        produced = set()
        for recipe in sorted(p.parent.name for p in (REPO / "recipes").glob("*/recipe.yaml")):
            for name, data in _rendered(variant, recipe).items():
                produced.add(name)
                for env in ("build", "host"):
                    for spec_text in _needs(data, env):
                        needed.setdefault(spec_name(spec_text), set()).add(f"{name} ({env})")
        missing = {n: sorted(users) for n, users in needed.items() if n not in held | produced}
        assert missing == {}, variant


def test_a_staged_recipe_holds_copies_of_its_scripts_not_links_to_the_checkout(tmp_path: Path) -> None:
    """rattler-build packs the staged recipe folder into info/recipe/: a link there would name this
    checkout's path (bytes that depend on where it lives) and hold no script."""
    mirror = tmp_path / "checkout"
    mirror_checkout(REPO, mirror)
    staged = stage_recipe(REPO, mirror, "ember", {"shipyard": {}})
    scripts = sorted(p.name for p in staged.path.parent.iterdir() if p.name != "recipe.yaml")
    assert scripts == ["build_ember.bat", "build_ember.sh", "build_libember.bat", "build_libember.sh"]
    for name in scripts:
        copy, original = staged.path.parent / name, REPO / "recipes" / "ember" / name
        assert not copy.is_symlink() and copy.read_bytes() == original.read_bytes(), name
        assert os.access(copy, os.X_OK) == os.access(original, os.X_OK), name
