"""What the bootstrap channel holds, decided before anything is built: this machine's pyenv
Pythons, the CUDA runtime pins, the Debian libraries, the wheels pip's resolver chooses for each
Python (downloaded into the cache), and from them one planned package per wheel, per Python, per
CUDA version, each with its recipe rendered from resources/conda_bootstrap/. conda/bootstrap.py
builds the plan into a channel and caches it.

One entry point, in two steps because the cache sits between them: `bootstrap_request` keys a
request without the network (a BootstrapRequest), and its `plan` resolves what the cache does not
already hold into a BootstrapPlan (the record to keep, the channel's key, the packages in build
order)."""

from __future__ import annotations

import configparser
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
import tomllib
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name, parse_wheel_filename

from shipyard.conda.cuda_packages import cuda_conda_packages
from shipyard.conda.names import conda_name
from shipyard.errors import BuildError, ToolchainMissing, ToolError
from shipyard.host.apt_sources import download_debs
from shipyard.host.toolchains.cuda_assembly import unpack_wheel
from shipyard.host.toolchains.cuda_recipes import cuda_runtime_wheel
from shipyard.host.toolchains.discover import probe_interpreter, pyenv_root
from shipyard.plumbing import command
from shipyard.plumbing.hashing import sha256_hex, sha256_of
from shipyard.plumbing.progress import Progress
from shipyard.plumbing.wheel_metadata import dist_info, read_metadata

# Bump when this module changes what a package holds without its recipe text changing.
REVISION = "1"

# The one conda platform the bootstrap channel builds for (and names compiler packages after).
SUBDIR = "linux-64"


# The wheel platform pip resolves for: the oldest manylinux every wheel here still ships.
WHEEL_PLATFORM = "manylinux2014_x86_64"


TEMPLATES = "conda_bootstrap"


# What any conda recipe's build and test environments need besides python (the closure follows);
# a release adds its components' build backends, dependencies and test requirements
# (conda/bootstrap.py `release_requirements`).
ROOT_REQUIREMENTS = ("numpy", "pytest", "pip", "scikit-build-core", "installer")


@dataclass(frozen=True)
class HostToolStandIn:
    """A package of conda-forge's that the recipes' build requirements name (cmake, ninja, and what
    `compiler('c')` / `compiler('cxx')` render to on linux-64), stood in for by this machine's
    program: wrappers in bin/, and for a compiler an activation that points CC or CXX at it."""

    name: str
    programs: tuple[str, ...]  # found on PATH; the first reports the version
    version_flag: str
    activates: str = ""  # the variable a compiler's activation sets to the first program


HOST_TOOLS = (
    HostToolStandIn("cmake", ("cmake", "ctest", "cpack"), "--version"),
    HostToolStandIn("ninja", ("ninja",), "--version"),
    # rattler-build's defaults on Linux: compiler('c') is gcc_<subdir>, compiler('cxx') gxx_<subdir>.
    HostToolStandIn(f"gcc_{SUBDIR}", ("gcc",), "-dumpfullversion", activates="CC"),
    HostToolStandIn(f"gxx_{SUBDIR}", ("g++",), "-dumpfullversion", activates="CXX"),
)


def stand_in_names(cuda_versions: Iterable[str]) -> tuple[str, ...]:
    """The names the channel holds for the recipes' build tools and CUDA packages (beside python,
    the Python packages and the Debian libraries): the host tools, then per CUDA version its
    runtime packages and its compiler package (conda/cuda_packages.py says which)."""
    names = [tool.name for tool in HOST_TOOLS]
    for cuda in _sorted_versions(cuda_versions):
        packages = cuda_conda_packages(cuda)
        names += [*packages.runtime_packages(), packages.compiler_package(SUBDIR)]
    return tuple(dict.fromkeys(names))


# --- the public entry point ---------------------------------------------------------------------

@dataclass(frozen=True)
class BootstrapPackage:
    name: str
    version: str
    label: str  # what progress lines and errors call it
    key: str  # everything that decides its bytes
    needs: tuple[str, ...]  # names of packages of this channel its build or test installs
    recipe: str | None  # the recipe.yaml text; None: python_abi, assembled without a recipe
    python: str | None = None


@dataclass(frozen=True)
class BootstrapPlan:
    """What a request resolved to and the channel that holds it, ready to build."""

    request: str  # the request's key: the cache keeps `record` as requests/<request>.json
    record: dict[str, Any]  # JSON: the wheels, the CUDA runtime wheels and the .debs chosen, and `channel`
    channel: str  # the channel's key: a digest of every package's key
    packages: tuple[BootstrapPackage, ...]  # each after the packages it needs


@dataclass(frozen=True)
class BootstrapRequest:
    """The Pythons, CUDA runtimes and requirements asked for, keyed without the network: the
    same inputs give the same `key`, which is how a machine finds the channel it built before."""

    key: str
    interpreters: dict[str, _Pyenv]  # "3.11": its pyenv build
    roots: tuple[str, ...]  # the requirements whose closures the channel holds
    cudart_pins: dict[str, str]  # "11.8": the NVIDIA runtime wheel pin
    rattler_build: str  # py-rattler-build's version: it decides every package's bytes

    def plan(self, previous: Mapping[str, Any] | None, downloads: Path, say: Progress) -> BootstrapPlan:
        """The channel for this request. `previous` is the record it resolved to before: reused
        when its files are still in `downloads`, else pip and apt are asked again (ToolError when
        they fail) and what they choose is downloaded there."""
        if previous is not None and _downloads_present(previous, downloads):
            record = dict(previous)
        else:
            record = _resolve(self.interpreters, self.roots, self.cudart_pins, downloads, say)
        packages = _planned_packages(record, self.interpreters, downloads, self.rattler_build)
        channel = _json_digest({"revision": REVISION, "packages": [p.key for p in packages]})
        return BootstrapPlan(request=self.key, record={**record, "channel": channel}, channel=channel,
                             packages=tuple(packages))

    def top_level_names(self) -> frozenset[str]:
        """The names the channel holds whatever pip resolves (the roots' closures add more): python
        and python_abi, each root requirement, the Debian libraries and the stand-ins for the
        recipes' build tools and CUDA packages."""
        return frozenset({"python", "python_abi", *(conda_name(Requirement(r).name) for r in self.roots),
                          *_debian_libraries()["libraries"], *stand_in_names(self.cudart_pins)})


def bootstrap_request(*, pythons: Sequence[str], cuda_versions: Sequence[str], requirements: Sequence[str] = (),
                      pyenv: Path | None = None) -> BootstrapRequest:
    """A request for `pythons` ("3.11") and `cuda_versions` ("11.8"), `requirements` (PEP 508) added
    to ROOT_REQUIREMENTS; `pyenv` is pyenv's root (default $PYENV_ROOT or ~/.pyenv).
    ToolchainMissing when a Python or a CUDA runtime cannot be had here, with the fix."""
    root = pyenv or pyenv_root()
    interpreters = {py: _pyenv_python(py, root) for py in _sorted_versions(pythons)}
    cudart_pins = {cuda: _cudart_requirement(cuda) for cuda in _sorted_versions(cuda_versions)}
    roots = tuple(dict.fromkeys((*ROOT_REQUIREMENTS, *sorted(requirements))))
    rattler_build = _rattler_build_version()
    # The request's key: change nothing here without meaning every machine to rebuild its channel
    # (tests/conda/test_bootstrap_cache_key.py pins it).
    key = _json_digest({
        "revision": REVISION, "rattler_build": rattler_build, "templates": _templates_digest(),
        "roots": roots, "platform": WHEEL_PLATFORM,
        "pythons": {py: f"{i.full_version}/{i.identity}" for py, i in interpreters.items()},
        "cuda": cudart_pins, "debian": _debian_libraries(),
    })
    return BootstrapRequest(key, interpreters, roots, cudart_pins, rattler_build)


def bootstrap_cuda_versions(cuda_versions: Iterable[str]) -> tuple[str, ...]:
    """Of the release's CUDA versions, those whose runtime this machine can repack: the ones whose
    toolkit resources/cuda_toolkits.toml assembles from NVIDIA's wheels (11.8, 12.4, 13.0), not
    those it cannot obtain (10.2, 11.0), which name no runtime wheel."""
    usable = []
    for version in _sorted_versions(cuda_versions):
        try:
            _cudart_requirement(version)
        except ToolchainMissing:
            continue
        usable.append(version)
    return tuple(usable)


# --- inputs: pyenv Pythons, the CUDA runtime pin, the Debian libraries ----------------------------

@dataclass(frozen=True)
class _Pyenv:
    version: str  # "3.11"
    full_version: str  # "3.11.7"
    prefix: Path  # /root/.pyenv/versions/3.11.7
    identity: str  # the executable's and libpython's bytes


def _pyenv_python(version: str, root: Path) -> _Pyenv:
    """The newest pyenv build of `version` under `root`; ToolchainMissing names the fix."""
    if not re.fullmatch(r"3\.\d+", version):
        raise ToolchainMissing(f"conda bootstrap channel: {version!r} is not a Python version such as "
                               "'3.11'. Fix: name Pythons by major.minor, as release.yaml's `pythons` does")
    builds = []
    for candidate in (root / "versions").glob(f"{version}.*"):
        match = re.fullmatch(re.escape(version) + r"\.(\d+)", candidate.name)
        if match and (candidate / "bin" / f"python{version}").is_file():
            builds.append((int(match.group(1)), candidate))
    if not builds:
        others = sorted(p.name for p in (root / "versions").glob("3.*")) if (root / "versions").is_dir() else []
        raise ToolchainMissing(
            f"conda bootstrap channel: Python {version} has no pyenv build in {root / 'versions'} "
            f"(looked for {version}.*; found {', '.join(others) or 'none'}); the channel's python {version} "
            f"is repacked from it. Fix: `pyenv install {version}`, or remove \"{version}\" from `pythons` "
            "in release.yaml")
    prefix = max(builds)[1]
    interpreter = probe_interpreter(prefix / "bin" / f"python{version}")
    if interpreter is None or interpreter.version != version:
        raise ToolchainMissing(f"conda bootstrap channel: {prefix}/bin/python{version} does not run. "
                               f"Fix: reinstall it (`pyenv install --force {prefix.name}`)")
    return _Pyenv(version, interpreter.full_version, prefix, interpreter.identity)


def _cudart_requirement(cuda: str) -> str:
    """The NVIDIA runtime wheel pin for CUDA `cuda`: the one its toolkit recipe is assembled with."""
    try:
        return cuda_runtime_wheel(cuda)
    except ToolchainMissing as exc:
        raise ToolchainMissing(f"conda bootstrap channel: cuda-cudart {cuda} cannot be repacked here: {exc}, "
                               f"or leave CUDA {cuda} out of the bootstrap channel") from exc


def _debian_libraries() -> dict[str, Any]:
    text = resources.files("shipyard.resources").joinpath(TEMPLATES, "debian_libraries.toml").read_text()
    return tomllib.loads(text)


# --- resolving: which wheels and .debs --------------------------------------------------------

@dataclass(frozen=True)
class _Wheel:
    file: str
    sha256: str
    name: str  # canonical: scikit-build-core
    version: str
    pure: bool
    requires_python: SpecifierSet
    requires: tuple[Requirement, ...]
    console_scripts: tuple[str, ...]  # "pytest = pytest:console_main"
    import_name: str


def _resolve(interpreters: Mapping[str, _Pyenv], roots: Sequence[str], cudart_pins: Mapping[str, str],
             downloads: Path, say: Progress) -> dict[str, Any]:
    """Ask pip (per Python) and apt which files make the channel; download them into `downloads`."""
    wheels_dir = downloads / "wheels"
    chosen: dict[str, set[str]] = {}
    for py in interpreters:
        say(f"resolve: pip picks {', '.join(roots)} and their dependencies for Python {py}")
        chosen[py] = set(_pip_download(list(roots), py, wheels_dir, deps=True))
    # pip evaluates environment markers for the Python it runs under, not for --python-version, and
    # a noarch package carries its marker dependencies unconditionally (as conda-forge's do): add
    # what is missing until every Python's set is closed.
    changed = True
    while changed:
        changed = False
        for py in interpreters:
            have = {_read_wheel(wheels_dir / f).name for f in chosen[py]}
            for file in sorted(chosen[py]):
                wheel = _read_wheel(wheels_dir / file)
                for requirement in _dependencies(wheel, _marker_pythons(wheel, py, interpreters)):
                    name = canonicalize_name(requirement.name)
                    if name in have:
                        continue
                    spec = f"{name}{requirement.specifier}"
                    say(f"resolve: {wheel.name} {wheel.version} needs {spec} (Python {py})")
                    chosen[py] |= set(_pip_download([spec], py, wheels_dir, deps=False))
                    have.add(name)
                    changed = True
    newest = max(interpreters, key=_version_key) if interpreters else "3.11"
    cudart = {}
    for cuda, pin in cudart_pins.items():
        say(f"resolve: {pin} (CUDA {cuda} runtime)")
        files = _pip_download([pin], newest, wheels_dir, deps=False)
        if len(files) != 1:
            raise ToolError(f"conda bootstrap channel: pip download {pin} gave {files}, expected one wheel")
        cudart[cuda] = files[0]
    return {"schema": 1, "wheels": {py: sorted(files) for py, files in chosen.items()}, "cudart": cudart,
            "debs": _download_debian_libraries(downloads / "debs", say)}


def _pip_download(requirements: list[str], python: str, dest: Path, *, deps: bool) -> list[str]:
    """Binary wheels of `requirements` for `python` into `dest`, as pip's resolver picks them;
    returns their file names."""
    dest.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".pip-", dir=dest.parent))
    try:
        try:
            command.run([sys.executable, "-m", "pip", "download", *requirements, *([] if deps else ["--no-deps"]),
                         "--only-binary", ":all:", "--python-version", python, "--platform", WHEEL_PLATFORM,
                         "--dest", work, "--disable-pip-version-check", "--no-input", "--progress-bar", "off"],
                        timeout=1800, what=f"pip download {' '.join(requirements)} for Python {python}")
        except ToolError as exc:
            raise ToolError(f"conda bootstrap channel: pip could not download {' '.join(requirements)} for "
                            f"Python {python} ({WHEEL_PLATFORM} wheels only). Fix: check that PyPI is "
                            "reachable (pip's index settings) and that these projects publish such wheels "
                            f"for Python {python}", cmd=exc.cmd, returncode=exc.returncode,
                            output=exc.output) from exc
        files = []
        for wheel in sorted(work.glob("*.whl")):
            if not (dest / wheel.name).exists():  # a file on PyPI never changes: keep the first copy
                os.replace(wheel, dest / wheel.name)
            files.append(wheel.name)
        return files
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _download_debian_libraries(dest: Path, say: Progress) -> dict[str, str]:
    table = _debian_libraries()
    names = {conda: spec["deb"] for conda, spec in table["libraries"].items()}
    dest.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".apt-", dir=dest.parent))
    try:
        debs = download_debs(table["suite"], table["component"], list(names.values()), work, say)
        for deb in debs:
            if not (dest / deb.name).exists():
                os.replace(deb, dest / deb.name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {conda: deb.name for conda, deb in zip(names, debs, strict=True)}


def _downloads_present(record: Mapping[str, Any], downloads: Path) -> bool:
    try:
        files = [downloads / "wheels" / f for fs in record["wheels"].values() for f in fs]
        files += [downloads / "wheels" / f for f in record["cudart"].values()]
        files += [downloads / "debs" / f for f in record["debs"].values()]
    except (KeyError, AttributeError, TypeError):
        return False
    return all(f.is_file() for f in files)


def _read_wheel(path: Path) -> _Wheel:
    return _read_wheel_cached(path, path.stat().st_mtime_ns)


_wheel_cache: dict[tuple[Path, int], _Wheel] = {}


def _read_wheel_cached(path: Path, mtime: int) -> _Wheel:
    if (path, mtime) in _wheel_cache:
        return _wheel_cache[(path, mtime)]
    name, version, _build, tags = parse_wheel_filename(path.name)
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        metadata = read_metadata(archive)
        points = f"{dist_info(archive)}/entry_points.txt"
        entry_points = archive.read(points).decode() if points in names else ""
    scripts: tuple[str, ...] = ()
    if entry_points:
        parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
        parser.optionxform = str  # type: ignore[assignment,method-assign]  # script names keep their case
        parser.read_string(entry_points)
        if parser.has_section("console_scripts"):
            scripts = tuple(f"{k.strip()} = {v.strip()}" for k, v in parser.items("console_scripts"))
    tops = sorted({n.split("/")[0].removesuffix(".py") for n in names
                   if not n.split("/")[0].endswith((".dist-info", ".data", ".libs"))})
    own = name.replace("-", "_")
    import_name = own if own in tops else next((t for t in tops if not t.startswith("_")), tops[0])
    wheel = _Wheel(
        file=path.name, sha256=sha256_of(path), name=canonicalize_name(name), version=str(version),
        pure=all(t.abi == "none" and t.platform == "any" for t in tags),
        requires_python=SpecifierSet(metadata.get("Requires-Python") or ""),
        requires=tuple(Requirement(r) for r in metadata.get_all("Requires-Dist") or []),
        console_scripts=scripts, import_name=import_name)
    _wheel_cache[(path, mtime)] = wheel
    return wheel


def _marker_pythons(wheel: _Wheel, python: str, interpreters: Mapping[str, _Pyenv]) -> list[_Pyenv]:
    """The Pythons a wheel's environment markers are judged for: every requested Python it runs
    on for a noarch (pure) wheel, the one it was built for otherwise."""
    if not wheel.pure:
        return [interpreters[python]]
    return [i for i in interpreters.values() if wheel.requires_python.contains(i.full_version, prereleases=True)]


def _dependencies(wheel: _Wheel, pythons: Sequence[_Pyenv]) -> list[Requirement]:
    """The wheel's Requires-Dist that hold on Linux x86_64 CPython for any of `pythons`, without extras."""
    kept = []
    for requirement in wheel.requires:
        marker = requirement.marker
        if marker is None or any(marker.evaluate(_marker_environment(p)) for p in pythons):
            kept.append(requirement)
    return kept


def _marker_environment(python: _Pyenv) -> dict[str, str]:
    return {"python_version": python.version, "python_full_version": python.full_version,
            "implementation_name": "cpython", "implementation_version": python.full_version,
            "platform_python_implementation": "CPython", "sys_platform": "linux", "platform_system": "Linux",
            "platform_machine": "x86_64", "os_name": "posix", "extra": ""}


# --- planning: one package per wheel, per Python, per CUDA version ---------------------------------

def _planned_packages(record: Mapping[str, Any], interpreters: Mapping[str, _Pyenv], downloads: Path,
                      rattler_build: str) -> list[BootstrapPackage]:
    """Every package of the channel, in an order where each one's requirements come before it."""

    def package(name: str, version: str, label: str, needs: Iterable[str], recipe: str | None,
                inputs: dict[str, Any], python: str | None = None) -> BootstrapPackage:
        key = _json_digest({"revision": REVISION, "rattler_build": rattler_build, "name": name, "version": version,
                       "recipe": recipe, "inputs": inputs})
        return BootstrapPackage(name, version, label, key, tuple(needs), recipe, python)

    plan = []
    for py, interpreter in interpreters.items():
        plan.append(package("python_abi", py, f"python_abi {py}", (), None, {"python": py}, python=py))
        recipe = _render("python", {"version": interpreter.full_version, "src": str(interpreter.prefix)})
        plan.append(package("python", interpreter.full_version, f"python {interpreter.full_version}", (),
                            recipe, {"pyenv": interpreter.identity}))

    wheels_dir = downloads / "wheels"
    users: dict[str, list[str]] = {}
    for py, files in record["wheels"].items():
        for file in files:
            users.setdefault(file, []).append(py)
    for file in sorted(users):
        wheel = _read_wheel(wheels_dir / file)
        # A pure wheel makes one noarch package whichever Pythons chose it; a binary one, one per Python.
        builds = users[file][:1] if wheel.pure else sorted(users[file], key=_version_key)
        for build_python in builds:
            marker_pythons = _marker_pythons(wheel, build_python, interpreters)
            if not marker_pythons:
                continue  # a pure wheel pip chose for no Python that can run it: cannot happen, but harmless
            host = max(marker_pythons, key=lambda i: _version_key(i.version))
            deps = _dependencies(wheel, marker_pythons)
            installer = wheels_dir / _installer_wheel(record["wheels"][host.version], host.version)
            recipe = _wheel_recipe(wheel, wheels_dir / file, host.version, deps, installer)
            label = f"{wheel.name} {wheel.version}" + ("" if wheel.pure else f" (Python {build_python})")
            plan.append(package(conda_name(wheel.name), wheel.version, label,
                                ("python", "python_abi", *(conda_name(d.name) for d in deps)), recipe,
                                {"host_python": host.identity}))

    for cuda, file in sorted(record["cudart"].items(), key=lambda item: _version_key(item[0])):
        packages = cuda_conda_packages(cuda)
        wheel = _read_wheel(wheels_dir / file)
        lib_dir = _cudart_folder(_unpacked_wheel(wheels_dir / file, downloads / "unpacked"), file)
        runtime = {"version": wheel.version, "cuda_version": cuda, "wheel": file, "wheel_sha256": wheel.sha256,
                   "lib_dir": str(lib_dir)}
        if packages.split:
            plan.append(package("cuda-version", cuda, f"cuda-version {cuda}", (),
                                _render("cuda-version", {"cuda_version": cuda}), {}))
            plan.append(package("cuda-cudart", wheel.version, f"cuda-cudart {wheel.version}", ("cuda-version",),
                                _render("cuda-cudart", runtime), {}))
        else:
            plan.append(package("cudatoolkit", wheel.version, f"cudatoolkit {wheel.version}", (),
                                _render("cudatoolkit", runtime), {}))
        compiler = packages.compiler_package(SUBDIR)
        plan.append(package(compiler, cuda, f"{compiler} {cuda}", (),
                            _host_tool_recipe(compiler, cuda, {}, ""), {}))

    for tool in HOST_TOOLS:
        found = _host_programs(tool)
        version = _tool_version(tool, found[tool.programs[0]])
        activation = f"{tool.activates}={found[tool.programs[0]]}" if tool.activates else ""
        plan.append(package(tool.name, version, f"{tool.name} {version} (stand-in: {found[tool.programs[0]]})", (),
                            _host_tool_recipe(tool.name, version, found, activation), {}))

    libraries = _debian_libraries()["libraries"]
    for conda, file in sorted(record["debs"].items()):
        deb = downloads / "debs" / file
        spec = libraries[conda]
        version = _upstream_version(deb)
        lib_dir = _unpacked_deb(deb, downloads / "unpacked") / "usr" / "lib" / "x86_64-linux-gnu"
        recipe = _render("deb-library", {"name": conda, "version": version, "deb": file, "deb_sha256": sha256_of(deb),
                                         "lib_dir": str(lib_dir), "libraries": spec["libraries"]},
                         _setter(("tests", 0, "package_contents", "files"), list(spec["files"])))
        plan.append(package(conda, version, f"{conda} {version}", (), recipe, {}))
    missing = set(stand_in_names(record["cudart"])) - {p.name for p in plan}
    if missing:  # stand_in_names answers without planning: it must name what the plan builds
        raise BuildError(f"conda bootstrap channel: the plan lacks the stand-ins {sorted(missing)} that "
                         "stand_in_names promises (conda/bootstrap_plan.py)")
    return _ordered(plan)


def _host_programs(tool: HostToolStandIn) -> dict[str, Path]:
    """Where this machine's programs of `tool` are; ToolchainMissing names the one it lacks."""
    found = {}
    for program in tool.programs:
        where = shutil.which(program)
        if where is None:
            raise ToolchainMissing(f"conda bootstrap channel: {tool.name} stands in with this machine's "
                                   f"{program}, which is not on PATH. Fix: install it (Debian: apt-get install "
                                   f"{'g++' if tool.activates else tool.name}), or build with a channel that has "
                                   f"conda-forge's {tool.name} (--channel)")
        found[program] = Path(where)
    return found


def _tool_version(tool: HostToolStandIn, program: Path) -> str:
    """`cmake version 3.25.1` -> 3.25.1: the first dotted number the program prints."""
    out = command.run([program, tool.version_flag], timeout=60, what=f"{program} {tool.version_flag}").stdout
    match = re.search(r"\d+(?:\.\d+)+", out)
    if match is None:
        raise ToolError(f"conda bootstrap channel: {program} {tool.version_flag} printed no version "
                        f"({out.strip()[:80]!r}); {tool.name} cannot stand in with it")
    return match.group(0)


def _host_tool_recipe(name: str, version: str, programs: Mapping[str, Path], activation: str) -> str:
    """The stand-in's recipe: one wrapper per program, and its activation script (if any)."""
    def fill(recipe: dict[str, Any]) -> None:
        script = ['mkdir -p "$PREFIX/bin" "$PREFIX/etc/conda/activate.d"']
        for program, path in programs.items():
            target = shlex.quote(str(path))
            script.append(f"printf '#!/bin/sh\\nexec %s \"$@\"\\n' {target} > \"$PREFIX/bin/{program}\"")
            script.append(f'chmod 755 "$PREFIX/bin/{program}"')
        line = f"export {activation}" if activation else "# nothing to activate: shipyard hands the build its toolkit"
        script.append(f"printf '%s\\n' {shlex.quote(line)} > \"$PREFIX/etc/conda/activate.d/shipyard-{name}.sh\"")
        recipe["build"]["script"] = script

    shown = " ".join(str(p) for p in programs.values()) or "nothing (metadata only)"
    return _render("host-tool", {"name": name, "version": version, "programs": shown,
                                 "activation": activation or "nothing"}, fill)


def _installer_wheel(files: Iterable[str], python: str) -> str:
    """The wheel of pypa's installer pip chose for `python` (ROOT_REQUIREMENTS holds it): the
    repacking recipes run it from that file, with the host Python."""
    found = [f for f in files if parse_wheel_filename(f)[0] == "installer"]
    if len(found) != 1:
        raise BuildError(f"conda bootstrap channel: pip chose {found or 'no'} installer wheels for Python "
                         f"{python}; the repacking recipes need exactly one "
                         "(conda/bootstrap_plan.py ROOT_REQUIREMENTS)")
    return found[0]


def _wheel_recipe(wheel: _Wheel, path: Path, python: str, deps: Sequence[Requirement], installer: Path) -> str:
    conda_deps = [f"{conda_name(d.name)} {d.specifier}".strip() for d in deps]

    def fill(recipe: dict[str, Any]) -> None:
        recipe["tests"][0]["python"]["imports"] = [wheel.import_name]
        if wheel.pure:
            requires_python = str(wheel.requires_python)
            recipe["requirements"]["run"] = [f"python {requires_python}".strip(), *conda_deps]
            recipe["build"]["python"]["entry_points"] = list(wheel.console_scripts)
        else:
            recipe["requirements"]["run"] += conda_deps

    context = {"name": conda_name(wheel.name), "version": wheel.version, "wheel": wheel.file, "wheel_path": str(path),
               "wheel_sha256": wheel.sha256, "installer_wheel": str(installer)}
    if wheel.pure:
        return _render("wheel-noarch", {**context, "host_python": python}, fill)
    return _render("wheel-python", {**context, "python": python}, fill)


def _render(template: str, context: dict[str, str], fill: Callable[[dict[str, Any]], None] | None = None) -> str:
    """A recipe from a template: its `context` values set, then `fill` sets the lists a context
    value cannot carry (requirements, entry points, the imports to test)."""
    recipe = yaml.safe_load(_template_text(template))
    unknown = set(context) - set(recipe["context"])
    if unknown:
        raise KeyError(f"{template}/recipe.yaml has no context keys {sorted(unknown)}")
    recipe["context"].update(context)
    if fill is not None:
        fill(recipe)
    header = f"# Generated by shipyard from shipyard/resources/{TEMPLATES}/{template}/recipe.yaml\n"
    return header + yaml.safe_dump(recipe, sort_keys=False, width=1000)


def _setter(path: tuple[str | int, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    """A `fill` for _render that sets one nested value."""
    def fill(recipe: dict[str, Any]) -> None:
        node: Any = recipe
        for step in path[:-1]:
            node = node[step]
        node[path[-1]] = value
    return fill


def _ordered(plan: list[BootstrapPackage]) -> list[BootstrapPackage]:
    """`plan` with every package after the packages of the names it needs (stable otherwise)."""
    remaining = list(plan)
    ordered: list[BootstrapPackage] = []
    while remaining:
        pending = {p.name for p in remaining}
        ready = [p for p in remaining if not any(n in pending and n != p.name for n in p.needs)]
        if not ready:
            cycle = ", ".join(sorted(pending))
            raise BuildError(f"conda bootstrap channel: the requirements of {cycle} form a cycle; "
                             "no build order exists")
        ordered += ready
        remaining = [p for p in remaining if p not in ready]
    return ordered


# --- unpacked downloads -----------------------------------------------------------------------

def _cudart_folder(unpacked: Path, wheel: str) -> Path:
    """The folder of an unpacked runtime wheel that holds libcudart.so.*: nvidia/cuda_runtime/lib up to
    CUDA 12, nvidia/cu13/lib from CUDA 13 (whose wheels share one folder)."""
    found = sorted({library.parent for library in unpacked.glob("nvidia/*/lib/libcudart.so.*")})
    if len(found) != 1:
        raise ToolError(f"conda bootstrap channel: {wheel} holds libcudart.so.* in {len(found)} folders, "
                        "expected one under nvidia/*/lib; update the cuda-cudart repack (conda/bootstrap_plan.py)")
    return found[0]


def _unpacked_wheel(wheel: Path, root: Path) -> Path:
    return _unpacked(wheel, root, lambda target: unpack_wheel(wheel, target))


def _unpacked_deb(deb: Path, root: Path) -> Path:
    return _unpacked(deb, root, lambda target: command.run(["dpkg-deb", "-x", deb, target], timeout=300,
                                                           what=f"dpkg-deb -x {deb.name}"))


def _unpacked(archive: Path, root: Path, unpack: Callable[[Path], Any]) -> Path:
    """`archive` unpacked once into `root`/<its sha256>, whole or not at all."""
    target = root / sha256_of(archive)[:24]
    if target.is_dir():
        return target
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=root))
    try:
        unpack(staging / "tree")
        os.rename(staging / "tree", target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _upstream_version(deb: Path) -> str:
    """A .deb's upstream version: `1:2.1.5-2` is 2.1.5."""
    version = command.run(["dpkg-deb", "-f", deb, "Version"], timeout=60, what="dpkg-deb -f").stdout.strip()
    return version.split(":", 1)[-1].rsplit("-", 1)[0]


# --- small helpers ----------------------------------------------------------------------------

def _templates_digest() -> str:
    """Every recipe template and data table of resources/conda_bootstrap/: they decide what the
    channel holds, so they key the request."""
    texts = {}
    for entry in sorted(resources.files("shipyard.resources").joinpath(TEMPLATES).iterdir(), key=lambda e: e.name):
        if entry.is_dir() and entry.joinpath("recipe.yaml").is_file():
            texts[entry.name] = entry.joinpath("recipe.yaml").read_text()
        elif entry.is_file() and entry.name.endswith(".toml"):
            texts[entry.name] = entry.read_text()
    return _json_digest(texts)


def _template_text(template: str) -> str:
    return resources.files("shipyard.resources").joinpath(TEMPLATES, template, "recipe.yaml").read_text()


def _rattler_build_version() -> str:
    return importlib.metadata.version("py-rattler-build")


def _sorted_versions(versions: Iterable[str]) -> list[str]:
    return sorted(dict.fromkeys(str(v) for v in versions), key=_version_key)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else -1 for part in version.split("."))


def _json_digest(data: Any) -> str:
    return sha256_hex(json.dumps(data, sort_keys=True, separators=(",", ":")).encode())
