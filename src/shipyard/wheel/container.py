"""The `--container` build path: cibuildwheel runs the PEP 517 build inside a local
manylinux-style image (see shipyard.host.docker_base); repair, relabel and tests stay on the host.

cibuildwheel uses a local image without pulling when `docker image inspect` shows it for the
requested platform (linux/amd64): it then passes `--pull=never` to `docker create`. Only
the build step runs in the container: repair and tests are switched off here because
shipyard does both afterwards, the same way for host-built wheels.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from shipyard.errors import BuildError, ToolchainMissing
from shipyard.host.docker_base import ensure_docker_engine
from shipyard.plumbing import command
from shipyard.plumbing.progress import Progress

CIBUILDWHEEL_REQUIREMENT = "cibuildwheel>=3.0,<5"
# cibuildwheel mounts the host's root here in every build container; host paths handed to a
# build (a prebuilt native core, a toolkit) must be given as host_path(...) in `environment`.
CONTAINER_HOST_ROOT = PurePosixPath("/host")
PLATFORM = "linux/amd64"
# cibuildwheel's exit status for "the build produced a pure-Python wheel" (NonPlatformWheelError).
_PURE_WHEEL_EXIT = 5
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Variables that steer the host process running cibuildwheel, so never passed through it.
_HOST_PROCESS_VARIABLES = frozenset({"PATH", "HOME", "PYTHONPATH", "PYTHONHOME", "LD_LIBRARY_PATH",
                                     "LD_PRELOAD", "DOCKER_HOST", "DOCKER_CONFIG", "SSL_CERT_FILE"})
_STEPS = ("Starting container image", "Copying project into container", "Setting up build environment",
          "Building wheel", "Copying wheels back to host")


def host_path(path: Path) -> str:
    """Where a host path appears inside a cibuildwheel build container."""
    return str(CONTAINER_HOST_ROOT / Path(path).resolve().relative_to("/"))


def build_identifier(python: str) -> str:
    """cibuildwheel's identifier for a CPython minor version: "3.11" -> "cp311-manylinux_x86_64"."""
    if not re.fullmatch(r"3\.\d+", python):
        raise BuildError(f"not a CPython minor version: {python!r} (expected e.g. '3.11')")
    return f"cp{python.replace('.', '')}-manylinux_x86_64"


def cibw_environment(environment: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """`environment` as (CIBW_ENVIRONMENT, names for CIBW_ENVIRONMENT_PASS_LINUX).

    Values go single-quoted into CIBW_ENVIRONMENT, which cibuildwheel then takes literally
    (no `$` expansion, spaces and `;` kept). cibuildwheel's evaluator mangles a single quote
    inside a value, so such a value is passed through from cibuildwheel's own environment
    instead, which carries it byte for byte.
    """
    assignments, passed = [], []
    for name, value in environment.items():
        if not _ENV_NAME.fullmatch(name):
            raise BuildError(f"not an environment variable name: {name!r}")
        if "'" not in value:
            assignments.append(f"{name}='{value}'")
        elif name in _HOST_PROCESS_VARIABLES:
            raise BuildError(f"{name} cannot hold a single quote in a container build "
                             "(it would change the host process that runs cibuildwheel)")
        else:
            passed.append(name)
    return " ".join(assignments), tuple(passed)


def build_wheels_in_container(project_dir: Path, out_dir: Path, *, pythons: Sequence[str], image: str,
                              environment: Mapping[str, str],
                              config_settings: Mapping[str, str] | None = None,
                              progress: Progress | None = None, pure: bool | None = None,
                              timeout: float = 7200) -> list[Path]:
    """Build one wheel per Python of `project_dir` inside the local `image` with cibuildwheel;
    returns the unrepaired wheels, moved into `out_dir`.

    A pure-Python project yields one py3-none-any wheel, built with `python -m build` in the same
    image (cibuildwheel refuses pure wheels); `pure=True` goes there directly, `None` finds out.
    """
    project_dir = Path(project_dir).resolve()
    out_dir = Path(out_dir).resolve()
    if not pythons:
        raise BuildError("no Python versions given for the container build")
    identifiers = [build_identifier(p) for p in pythons]
    _check_prerequisites(image)
    out_dir.mkdir(parents=True, exist_ok=True)

    with tempfile.TemporaryDirectory(prefix="shipyard-cibw-") as work:
        staging = Path(work) / "wheelhouse"
        staging.mkdir()
        if pure:
            _build_pure(project_dir, staging, pythons, image, environment, config_settings, progress)
        else:
            pure_wheel = _run_cibuildwheel(project_dir, staging, identifiers, image, environment,
                                           config_settings, progress, timeout)
            if pure_wheel:
                if pure is False:
                    raise BuildError(f"{project_dir.name} built a pure-Python wheel in {image}, "
                                     "but a platform wheel was expected (check its build backend)")
                shutil.rmtree(staging)
                staging.mkdir()
                _build_pure(project_dir, staging, pythons, image, environment, config_settings, progress)
        wheels = sorted(staging.glob("*.whl"))
        if not wheels:
            raise BuildError(f"the container build of {project_dir.name} produced no wheel in {image}")
        moved = []
        for wheel in wheels:
            target = out_dir / wheel.name
            if target.exists():
                target.unlink()
            shutil.move(wheel, target)
            moved.append(target)
    return moved


def _check_prerequisites(image: str) -> None:
    ensure_docker_engine(required=True)
    if importlib.util.find_spec("cibuildwheel") is None:
        raise ToolchainMissing(f"cibuildwheel is not installed in {sys.executable}: "
                               f"pip install '{CIBUILDWHEEL_REQUIREMENT}'")
    done = command.run(["docker", "image", "inspect", "--format", "{{.Os}}/{{.Architecture}}", image],
                       check=False, timeout=60, what="docker image inspect")
    if done.returncode != 0:
        raise ToolchainMissing(f"image {image} is not in the local engine and no registry can be pulled "
                               "from; build it with shipyard.host.docker_base.build_manylinux_image()")
    if done.stdout.strip() != PLATFORM:
        # cibuildwheel would fall back to `--pull=always` for an image of another platform.
        raise ToolchainMissing(f"image {image} is {done.stdout.strip()}, not {PLATFORM}; rebuild it here")


def _run_cibuildwheel(project_dir: Path, wheelhouse: Path, identifiers: Sequence[str], image: str,
                      environment: Mapping[str, str], config_settings: Mapping[str, str] | None,
                      progress: Progress | None, timeout: float) -> bool:
    """Run cibuildwheel; True when it stopped because the project is pure Python."""
    settings = shlex.join(f"{k}={v}" for k, v in (config_settings or {}).items())
    assignments, passed = cibw_environment(environment)
    cibw = {
        "CIBW_BUILD": " ".join(identifiers),
        "CIBW_ARCHS": "x86_64",
        "CIBW_MANYLINUX_X86_64_IMAGE": image,
        "CIBW_CONTAINER_ENGINE": "docker",
        "CIBW_BUILD_FRONTEND": "build",
        "CIBW_CONFIG_SETTINGS": settings,
        "CIBW_ENVIRONMENT": assignments,
        "CIBW_ENVIRONMENT_PASS_LINUX": " ".join(passed),
        # The host path runs no hooks either: the same sources give the same wheel both ways.
        "CIBW_BEFORE_ALL": "",
        "CIBW_BEFORE_BUILD": "",
        "CIBW_REPAIR_WHEEL_COMMAND": "",
        "CIBW_TEST_COMMAND": "",
        "CIBW_TEST_SKIP": "*",
        "CIBW_BUILD_VERBOSITY": "1",
    }
    extra = {**{name: environment[name] for name in passed}, **cibw}
    if "SOURCE_DATE_EPOCH" in environment:
        # cibuildwheel hands this one variable to `docker create` from its own environment.
        extra["SOURCE_DATE_EPOCH"] = environment["SOURCE_DATE_EPOCH"]
    if not os.environ.get("SSL_CERT_FILE") and Path("/etc/ssl/certs/ca-certificates.crt").exists():
        # cibuildwheel copies this bundle into the container for pip on Python 3.9; the system
        # one carries the host's local CAs (a TLS-intercepting proxy), certifi's does not.
        extra["SSL_CERT_FILE"] = "/etc/ssl/certs/ca-certificates.crt"
    if progress:
        progress(f"cibuildwheel {' '.join(identifiers)} of {project_dir.name} in {image}")
    done = command.run([sys.executable, "-m", "cibuildwheel", "--platform", "linux",
                        "--output-dir", wheelhouse, "."],
                       cwd=project_dir, extra_env=extra, timeout=timeout, check=False,
                       what="cibuildwheel")
    if done.returncode == _PURE_WHEEL_EXIT and "pure Python wheel" in done.output:
        if progress:
            progress(f"{project_dir.name} is pure Python: building it with `python -m build` in {image}")
        return True
    if done.returncode != 0:
        raise BuildError(f"cibuildwheel failed at step '{_last_step(done.stdout)}' building "
                         f"{' '.join(identifiers)} of {project_dir} in {image} (exit {done.returncode}):\n    "
                         + "\n    ".join(_tail(done.stdout, 30) + _tail(done.stderr, 15)))
    return False


def _build_pure(project_dir: Path, wheelhouse: Path, pythons: Sequence[str], image: str,
                environment: Mapping[str, str], config_settings: Mapping[str, str] | None,
                progress: Progress | None) -> None:
    """`python -m build --wheel` in `image`, on a copy of the project, with the first Python
    whose wheel fits every other one (a py3-none-any wheel needs no second build)."""
    for name in environment:
        if not _ENV_NAME.fullmatch(name):
            raise BuildError(f"not an environment variable name: {name!r}")
    for python in sorted(pythons, key=lambda v: tuple(map(int, v.split(".")))):
        tag = build_identifier(python).split("-")[0]
        with tempfile.TemporaryDirectory(prefix="shipyard-pure-") as work:
            source = Path(work) / "project"
            # A copy: setuptools writes build/ and *.egg-info next to the sources.
            shutil.copytree(project_dir, source, symlinks=True)
            args = ["docker", "run", "--rm", f"--platform={PLATFORM}", "--pull=never",
                    "--volume=/:/host", f"--volume={source}:/project", f"--volume={wheelhouse}:/output",
                    "--workdir=/project", "--env=SOURCE_DATE_EPOCH",
                    *[f"--env={name}" for name in environment],
                    image, f"/opt/python/{tag}-{tag}/bin/python", "-m", "build", "--wheel",
                    "--outdir=/output",
                    *[f"--config-setting={k}={v}" for k, v in (config_settings or {}).items()], "/project"]
            if progress:
                progress(f"python -m build --wheel with {python} in {image}")
            # Values travel in the docker client's environment (`--env NAME`), not on its
            # command line, so the command log shows no secret.
            done = command.run(args, extra_env=dict(environment), timeout=3600, check=False,
                               what="docker run (python -m build)")
            if done.returncode != 0:
                raise BuildError(f"python -m build --wheel failed for {project_dir} with Python {python} "
                                 f"in {image} (exit {done.returncode}):\n    "
                                 + "\n    ".join(_tail(done.stdout, 30) + _tail(done.stderr, 15)))
        built = sorted(wheelhouse.glob("*.whl"))
        if built and all(_fits_every_python(w.name) for w in built):
            return


def _fits_every_python(wheel_name: str) -> bool:
    python_tags = wheel_name[:-4].split("-")[-3].split(".")
    return all(re.fullmatch(r"py\d?", t) for t in python_tags)


def _last_step(stdout: str) -> str:
    last = "starting cibuildwheel"
    for line in stdout.splitlines():
        for step in _STEPS:
            if step in line:
                last = step
    return last


def _tail(text: str, lines: int) -> list[str]:
    return text.strip().splitlines()[-lines:] if text.strip() else []
