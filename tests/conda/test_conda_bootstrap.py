"""The bootstrap channel (#11 item 6): a local conda channel from which a real solver installs a
working python + numpy + pytest (and the CUDA runtime) on a machine that reaches no conda channel.

The channel is built once per machine into shipyard's real cache (a session fixture); what these
tests check is what a user of it sees: the index, what py-rattler installs, what the installed
Python runs, what a second call does, and the messages when something is missing.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest
import yaml
import zstandard

from shipyard.cli import main
from shipyard.conda.bootstrap import (
    BootstrapChannel,
    ensure_bootstrap_channel,
    release_requirements,
)
from shipyard.conda.bootstrap_plan import bootstrap_cuda_versions
from shipyard.conda.cuda_packages import cuda_conda_packages
from shipyard.conda.rattler_glue import index_channel
from shipyard.conda.solve_install import InstallRequest, InstallResult, solve_and_install
from shipyard.errors import BuildError, ToolchainMissing
from shipyard.host.toolchains.discover import cache_root
from shipyard.release.validate import load_spec

REPO = Path(__file__).resolve().parents[2]
PYTHON = "3.11"


@pytest.fixture(scope="session")
def cuda_versions(conda_cuda_versions: tuple[str, ...]) -> tuple[str, ...]:
    return conda_cuda_versions


@pytest.fixture(scope="session")
def bootstrap(conda_bootstrap: BootstrapChannel) -> BootstrapChannel:
    return conda_bootstrap


def _repodata(channel: Path) -> dict[str, dict[str, dict]]:
    return {subdir: json.loads((channel / subdir / "repodata.json").read_text())["packages.conda"]
            for subdir in ("linux-64", "noarch")}


def _about(conda: Path) -> dict:
    """info/about.json of a .conda archive, as `conda search --info` would show it."""
    with zipfile.ZipFile(conda) as archive:
        info = next(n for n in archive.namelist() if n.startswith("info-") and n.endswith(".tar.zst"))
        raw = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(archive.read(info))).read()
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        member = tar.extractfile("info/about.json")
        assert member is not None
        return json.loads(member.read())


def _solve(url: str, specs: list[str], tmp_path: Path, *, cuda: str | None = None) -> InstallResult:
    """Solve `specs` from the channel at `url` and install them into a fresh prefix under `tmp_path`."""
    prefix = tmp_path / f"env{len(list(tmp_path.glob('env*')))}"
    return solve_and_install(InstallRequest(channels=[url], specs=specs, prefix=str(prefix),
                                            cache_dir=str(tmp_path / "rattler-cache"), cuda_driver=cuda))


def _versions(result: InstallResult) -> dict[str, str]:
    assert result.error is None and result.unsatisfiable is None, result
    return {p.name: p.version for p in result.packages}


# --- the channel --------------------------------------------------------------------------

@pytest.mark.slow
def test_index_lists_sha256_and_size_of_every_package(bootstrap: BootstrapChannel,
                                                      cuda_versions: tuple[str, ...]) -> None:
    repodata = _repodata(bootstrap.path)
    for subdir, packages in repodata.items():
        on_disk = sorted(p.name for p in (bootstrap.path / subdir).glob("*.conda"))
        assert sorted(packages) == on_disk
        assert (bootstrap.path / subdir / "repodata.json.zst").is_file()
        for name, record in packages.items():
            data = (bootstrap.path / subdir / name).read_bytes()
            assert record["sha256"] == hashlib.sha256(data).hexdigest(), name
            assert record["size"] == len(data), name
    assert list(bootstrap.packages) == sorted(n for packages in repodata.values() for n in packages)
    names = {(r["name"], r["version"]) for packages in repodata.values() for r in packages.values()}
    by_name = {n for n, _ in names}
    assert {"python", "python_abi", "numpy", "pytest", "pip", "scikit-build-core", "libpng",
            "libjpeg-turbo", "python-installer"} <= by_name  # installer, named as conda-forge names it
    assert "installer" not in by_name
    assert ("python_abi", PYTHON) in names
    assert {v for n, v in names if n == "python"} == {v for n, v in names if n == "python" and v.startswith(PYTHON)}
    assert "11.8" in cuda_versions  # this machine assembles CUDA 11.8, so its runtime must be in the channel
    # Each CUDA's runtime as conda-forge names it: cudatoolkit up to 11, cuda-version (+ cuda-cudart) from 12.
    for cuda in cuda_versions:
        runtime = cuda_conda_packages(cuda).runtime_packages()[0]
        assert any(n == runtime and (v == cuda or v.startswith(f"{cuda}.")) for n, v in names), (cuda, runtime)


@pytest.mark.slow
def test_every_repack_says_where_its_bytes_came_from(bootstrap: BootstrapChannel) -> None:
    repodata = _repodata(bootstrap.path)
    for subdir, packages in repodata.items():
        for name, record in packages.items():
            about = _about(bootstrap.path / subdir / name)
            origin = about.get("extra", {}).get("shipyard", {})
            text = f"{about.get('summary', '')} {about.get('description', '')}"
            assert "bootstrap channel" in text, name
            if record["name"] == "python":
                assert "pyenv" in text and "/versions/3.11." in text and "Debian 12" in text, text
                assert "never publish" in text
                assert "__glibc >=2.36" in record["depends"]
            elif record["name"] in ("python_abi", "cuda-version"):
                continue  # metadata only: no bytes to come from anywhere
            elif "runs" in origin:  # a build tool or compiler stand-in: wrappers of this machine's program
                assert origin["publish"] == "never" and origin["runs"] in text and "never publish" in text, text
            elif record["name"] in ("libpng", "libjpeg-turbo"):
                assert origin["repacked_from"].startswith("debian:") and origin["repacked_from"].endswith(".deb")
                assert origin["sha256"] in text and origin["repacked_from"][len("debian:"):] in text
            else:
                wheel = origin["repacked_from"].removeprefix("pypi:")
                assert wheel.endswith(".whl") and wheel in text and origin["sha256"] in text, (name, text)


@pytest.mark.slow
def test_a_solver_installs_python_numpy_and_pytest_that_work(bootstrap: BootstrapChannel, tmp_path: Path) -> None:
    prefix = tmp_path / "env0"
    installed = _versions(_solve(bootstrap.url(), [f"python {PYTHON}.*", "numpy", "pytest", "pip",
                                                   "scikit-build-core"], tmp_path))
    assert installed["python"].startswith(PYTHON + ".")
    assert {"numpy", "pytest", "pluggy", "iniconfig", "packaging", "python_abi", "pip"} <= set(installed)
    python = prefix / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    check = subprocess.run([python, "-c", "import sys, numpy; print(sys.prefix); print(numpy.__version__); "
                            "print(int(numpy.arange(10).sum()))"], capture_output=True, text=True, env=env)
    assert check.returncode == 0, check.stderr
    assert check.stdout.split() == [str(prefix), installed["numpy"], "45"]
    (tmp_path / "test_tiny.py").write_text("import numpy\n\ndef test_sum():\n    assert numpy.ones(3).sum() == 3\n")
    tests = subprocess.run([prefix / "bin" / "pytest", "-q", "-p", "no:cacheprovider", "test_tiny.py"],
                           cwd=tmp_path, capture_output=True, text=True, env=env)
    assert tests.returncode == 0 and "1 passed" in tests.stdout, tests.stdout + tests.stderr
    # What a recipe's host environment runs: pip against scikit-build-core, no build isolation.
    host = subprocess.run([python, "-c", "import scikit_build_core.build, pip; print(pip.__version__)"],
                          capture_output=True, text=True, env=env)
    assert host.returncode == 0 and host.stdout.strip() == installed["pip"], host.stderr


@pytest.mark.slow
def test_cuda_runtime_comes_with_its_cuda_version(bootstrap: BootstrapChannel, tmp_path: Path) -> None:
    """conda-forge's names on each side of CUDA 12: cudatoolkit for 11.8, cuda-version + cuda-cudart after."""
    prefix = tmp_path / "env0"
    installed = _versions(_solve(bootstrap.url(), ["cudatoolkit 11.8.*"], tmp_path))
    assert installed["cudatoolkit"].startswith("11.8.") and "cuda-version" not in installed
    library = prefix / "lib" / "libcudart.so.11.0"
    assert library.is_file() and library.read_bytes()[:4] == b"\x7fELF"
    # it refuses a driver older than its CUDA release.
    refused = _solve(bootstrap.url(), ["cudatoolkit 11.8.*"], tmp_path, cuda="11.2")
    assert refused.unsatisfiable and "__cuda" in refused.unsatisfiable, refused
    split = _versions(_solve(bootstrap.url(), ["cuda-cudart 12.4.*"], tmp_path, cuda="12.4"))
    assert split["cuda-version"] == "12.4" and split["cuda-cudart"].startswith("12.4.")
    refused = _solve(bootstrap.url(), ["cuda-cudart 12.4.*"], tmp_path, cuda="11.8")
    assert refused.unsatisfiable and "__cuda" in refused.unsatisfiable, refused


@pytest.mark.slow
def test_a_second_call_is_cached_and_touches_nothing(bootstrap: BootstrapChannel,
                                                     cuda_versions: tuple[str, ...]) -> None:
    before = {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in bootstrap.path.rglob("*")}
    lines: list[str] = []
    again = ensure_bootstrap_channel(pythons=[PYTHON], cuda_versions=cuda_versions,
                                     requirements=release_requirements(load_spec(REPO)),
                                     cache_root=cache_root() / "conda-bootstrap", progress=lines.append)
    assert again.cached and again.path == bootstrap.path and again.packages == bootstrap.packages
    assert not any(line.startswith("built ") for line in lines) and any("cached" in line for line in lines)
    assert {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in bootstrap.path.rglob("*")} == before


@pytest.mark.slow
def test_cli_prints_the_channel_its_size_and_cached(bootstrap: BootstrapChannel,
                                                    capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHIPYARD_CACHE", str(cache_root()))
    assert main(["--root", str(REPO), "conda", "bootstrap", "--python", PYTHON]) == 0
    out = capsys.readouterr().out
    assert str(bootstrap.path) in out
    assert f"{len(bootstrap.packages)} packages" in out and " MB, cached" in out


# --- errors (fast) ------------------------------------------------------------------------

def test_a_missing_pyenv_python_names_the_version_and_the_fix(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "pyenv"
    (fake / "versions" / "3.12.1" / "bin").mkdir(parents=True)
    monkeypatch.setenv("PYENV_ROOT", str(fake))
    with pytest.raises(ToolchainMissing) as caught:
        ensure_bootstrap_channel(pythons=["3.11"], cuda_versions=[], cache_root=tmp_path / "cache")
    message = str(caught.value)
    assert "Python 3.11 has no pyenv build" in message and str(fake / "versions") in message
    assert "found 3.12.1" in message
    assert "pyenv install 3.11" in message and "release.yaml" in message and "pythons" in message
    assert not (tmp_path / "cache").exists()  # refused before anything was resolved or built


def test_a_cuda_version_without_a_runtime_wheel_is_left_out_or_named(tmp_path: Path) -> None:
    assert bootstrap_cuda_versions(["10.2", "11.8", "12.4", "13.0"]) == ("11.8", "12.4", "13.0")
    with pytest.raises(ToolchainMissing, match=r"CUDA 10\.2 runtime.*cuda_toolkits\.toml"):
        ensure_bootstrap_channel(pythons=[], cuda_versions=["10.2"], cache_root=tmp_path / "cache")


def test_a_failed_build_quotes_rattler_builds_log(tmp_path: Path) -> None:
    from shipyard.conda import bootstrap

    recipe = textwrap.dedent("""\
        package: {name: doomed, version: "1.0"}
        build:
          noarch: generic
          script:
            - 'echo "shipyard-marker: the step before the failure"'
            - exit 3
        """)
    package = bootstrap.BootstrapPackage("doomed", "1.0", "doomed 1.0", "0" * 64, (), recipe)
    out = tmp_path / "out"
    for subdir in bootstrap.SUBDIRS:
        (out / subdir).mkdir(parents=True)
    index_channel(out)
    with pytest.raises(BuildError) as caught:
        bootstrap._build_package(package, out, tmp_path / "work")
    message = str(caught.value)
    assert "building doomed 1.0 failed" in message and "rattler-build log" in message
    assert "shipyard-marker: the step before the failure" in message


def test_noarch_dependencies_keep_the_markers_of_any_python_they_serve() -> None:
    """pip judges markers by the Python it runs under, not --python-version; the channel judges
    them for each Python a noarch package serves."""
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    from shipyard.conda import bootstrap_plan as bootstrap

    wheel = bootstrap._Wheel("pytest-9.2.0-py3-none-any.whl", "0" * 64, "pytest", "9.2.0", True,
                             SpecifierSet(">=3.10"), (Requirement('tomli>=1; python_version < "3.11"'),
                                                      Requirement('colorama; sys_platform == "win32"'),
                                                      Requirement('pygments; extra == "dev"'),
                                                      Requirement("pluggy<2,>=1.5")),
                             (), "pytest")
    py = {v: bootstrap._Pyenv(v, f"{v}.1", Path("/x"), "id") for v in ("3.9", "3.10", "3.11")}
    assert [r.name for r in bootstrap._dependencies(wheel, [py["3.10"], py["3.11"]])] == ["tomli", "pluggy"]
    assert [r.name for r in bootstrap._dependencies(wheel, [py["3.11"]])] == ["pluggy"]
    assert bootstrap._marker_pythons(wheel, "3.11", py) == [py["3.10"], py["3.11"]]


def test_every_recipe_script_quotes_its_paths() -> None:
    """The recipes' build scripts pass rattler-build's paths ($PREFIX, $PYTHON, $SP_DIR) and the
    machine's (the pyenv prefix) quoted: the channel builds under a cache folder whose path holds a
    space ($SHIPYARD_CACHE, a home folder). shellcheck reads each script with every `${{ … }}`
    taken as one word; a whole build under such a path took 52 s (27 packages) when this was fixed."""
    assert shutil.which("shellcheck"), "shellcheck is missing: run ci/bootstrap.sh --all"
    templates = REPO / "src" / "shipyard" / "resources" / "conda_bootstrap"
    findings = {}
    for recipe in sorted(templates.glob("*/recipe.yaml")):
        script = yaml.safe_load(recipe.read_text())["build"].get("script", [])
        text = "#!/bin/bash\n" + "".join(re.sub(r"\$\{\{.*?\}\}", "jinja", line) + "\n" for line in script)
        done = subprocess.run(["shellcheck", "--format", "json", "-"], input=text, capture_output=True, text=True,
                              timeout=60)
        found = [f"SC{c['code']} line {c['line'] - 1}: {c['message']}" for c in json.loads(done.stdout or "[]")]
        if found or done.returncode not in (0, 1):
            findings[recipe.parent.name] = found or [done.stderr]
    assert findings == {}, findings
