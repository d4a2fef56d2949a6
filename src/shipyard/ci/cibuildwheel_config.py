"""The cibuildwheel configuration of a Windows or macOS wheel job, made from release.yaml.

Those lanes build with cibuildwheel, the tool those platforms' maintainers use: it knows the
runners' Pythons (python.org's installers, nuget) and repairs with delvewheel or delocate. What it
builds is release.yaml's: the job's cells as exact build identifiers, the platform's arch, the
deployment target its wheel tag promises, and the native core built once (`before-all`, `shipyard
ci native-core`) for every Python's build to link. shipyard then takes the wheelhouse (`shipyard
build --wheelhouse`) and labels, checks, tests, records and attests those wheels as it does the
ones it builds itself.

`shipyard ci cibuildwheel` writes the configuration as a TOML file (cibuildwheel's `--config-file`,
a `[tool.cibuildwheel]` table) on the runner, so its paths are the runner's and the workflow step
holds no logic of its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from shipyard.errors import UsageError
from shipyard.release.kinds import WHEEL
from shipyard.release.matrix import Cell, expand
from shipyard.release.spec import Spec
from shipyard.wheel.native_core import REPRODUCIBLE_CMAKE_DEFINES

# The cibuildwheel the Windows and macOS lanes run, exactly: a new one can change the Pythons it
# builds with and its defaults. Within shipyard's own requirement (wheel/container.py), the one
# tests/ci/test_cibuildwheel_config.py reads the configuration back with.
CIBUILDWHEEL_PIN = "cibuildwheel==4.3.5"


@dataclass(frozen=True)
class CibuildwheelPlatform:
    """How cibuildwheel names a release platform: its `--platform`, `archs` value and the tail of
    its build identifiers (cp311-<suffix>)."""

    platform: str
    arch: str
    suffix: str


# (os, arch) of release.yaml's platforms -> cibuildwheel's names for them.
CIBUILDWHEEL_PLATFORMS: dict[tuple[str, str], CibuildwheelPlatform] = {
    ("windows", "amd64"): CibuildwheelPlatform("windows", "AMD64", "win_amd64"),
    ("windows", "arm64"): CibuildwheelPlatform("windows", "ARM64", "win_arm64"),
    ("macos", "arm64"): CibuildwheelPlatform("macos", "arm64", "macosx_arm64"),
    ("macos", "x86_64"): CibuildwheelPlatform("macos", "x86_64", "macosx_x86_64"),
}

# delvewheel and delocate vendor what the wheel links, as auditwheel does on Linux (wheel/repair.py).
# delvewheel leaves the system's DLLs out by itself; the CUDA driver (nvcuda.dll, as libcuda.so.1 on
# Linux) comes with the GPU's driver and is named anyway. delocate holds every library to the
# deployment target (MACOSX_DEPLOYMENT_TARGET): a Homebrew bottle built for a newer macOS fails the
# repair instead of being vendored into a wheel whose tag promises an older one.
REPAIR_COMMANDS = {
    "windows": "delvewheel repair --no-dll nvcuda.dll -w {dest_dir} {wheel}",
    "macos": "delocate-wheel --require-archs {delocate_archs} --require-target-macos-version "
             "{deployment_target} -w {dest_dir} -v {wheel}",
}


@dataclass(frozen=True)
class CibuildwheelConfig:
    """One job's cibuildwheel options (a component, a variant, a platform; some of its Pythons)."""

    platform: str  # cibuildwheel's --platform
    project: Path  # the component's folder: cibuildwheel's package dir
    build: tuple[str, ...]  # exact build identifiers, one per cell
    archs: tuple[str, ...]
    environment: Mapping[str, str] = field(default_factory=dict)
    before_all: str = ""
    repair_wheel_command: str = ""
    test_command: str = ""
    config_settings: Mapping[str, str] = field(default_factory=dict)

    def options(self) -> dict[str, object]:
        """The `[tool.cibuildwheel]` table, by cibuildwheel's option names."""
        return {
            "build": list(self.build),
            "archs": list(self.archs),
            # pypa/build, as shipyard's own builds (wheel/pep517.py), not pip's wheel command.
            "build-frontend": "build",
            "build-verbosity": 1,
            "environment": dict(self.environment),
            "before-all": self.before_all,
            "repair-wheel-command": self.repair_wheel_command,
            "test-command": self.test_command,
            "config-settings": dict(self.config_settings),
        }

    def toml(self) -> str:
        """The options as a config file for `cibuildwheel --config-file`."""
        return "[tool.cibuildwheel]\n" + "".join(f"{key} = {_toml_value(value)}\n"
                                                 for key, value in self.options().items())


def _toml_value(value: object) -> str:
    # A TOML basic string takes JSON's escapes (\" \\ \n \uXXXX), so json.dumps writes one.
    if isinstance(value, bool) or not isinstance(value, (str, int, list, dict)):
        raise TypeError(f"no TOML for {value!r}")
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"


def cibuildwheel_platform(spec: Spec, platform: str) -> CibuildwheelPlatform:
    """cibuildwheel's names for release.yaml's `platform`; one line (exit 2) for a platform it does
    not build on (Linux wheels build in the builder container, `shipyard build`)."""
    found = spec.release.platforms.get(platform)
    choices = [name for name, p in spec.release.platforms.items() if (p.os, p.arch) in CIBUILDWHEEL_PLATFORMS]
    if found is None or (found.os, found.arch) not in CIBUILDWHEEL_PLATFORMS:
        raise UsageError(f"--platform {platform}: not a Windows or macOS platform of release.yaml that the "
                         f"cibuildwheel lanes build; use one of {', '.join(choices) or '(none in release.yaml)'}")
    return CIBUILDWHEEL_PLATFORMS[(found.os, found.arch)]


def deployment_target(wheel_platform_tag: str) -> str | None:
    """The macOS a wheel tag promises: macosx_11_0_arm64 -> "11.0"; None for another tag."""
    match = re.fullmatch(r"macosx_(\d+)_(\d+)_\w+", wheel_platform_tag)
    return f"{match[1]}.{match[2]}" if match else None


def platform_cells(spec: Spec, platform: str, variant: str, component: str,
                   pythons: tuple[str, ...] = ()) -> list[Cell]:
    """The wheel cells of one component and variant on `platform` (only `pythons`, when given), in
    matrix order: what the job's cibuildwheel builds."""
    return [cell for cell in expand(spec.release)
            if cell.package_type == WHEEL.name and cell.platform == platform and cell.variant == variant
            and cell.component == component and cell.python and (not pythons or cell.python in pythons)]


def build_identifier(cell: Cell, names: CibuildwheelPlatform) -> str:
    """cibuildwheel's identifier of a wheel cell: cp311-win_amd64."""
    assert cell.python_tag is not None
    return f"{cell.python_tag}-{names.suffix}"


def _quoted(text: str) -> str:
    # Both cmd.exe (Windows' before-all and test-command run there) and sh take "…" around a path.
    if '"' in text:
        raise UsageError(f"{text}: a path with a double quote cannot go into cibuildwheel's commands; "
                         f"check out the repository into another folder")
    return f'"{text}"'


def cibuildwheel_config(spec: Spec, *, platform: str, variant: str, component: str,
                        pythons: tuple[str, ...] = (), core_prefix: Path | None = None) -> CibuildwheelConfig:
    """The cibuildwheel options that build release.yaml's cells of `component` and `variant` on
    `platform` (a release platform name, e.g. windows-amd64). `core_prefix`: where `before-all`
    installs the native core (default: <root>/.shipyard/cibuildwheel/<component>-<tag>-core)."""
    names = cibuildwheel_platform(spec, platform)
    release = spec.release
    found = release.find_variant(variant)
    if found is None:
        raise UsageError(f"--variant {variant}: not a variant of release.yaml; use one of "
                         f"{', '.join(release.variants)}")
    if component not in release.components:
        raise UsageError(f"--component {component}: not a component of release.yaml; use one of "
                         f"{', '.join(release.components)}")
    cells = platform_cells(spec, platform, found.name, component, pythons)
    if not cells:
        raise UsageError(f"--component {component} --variant {found.name} --platform {platform}: release.yaml has no "
                         f"wheel cell of a Python there (a pure component, an exclusion, or other --python); "
                         f"`shipyard matrix` lists the cells")
    described = release.components[component]
    root = spec.root.resolve()
    environment: dict[str, str] = {}
    target = deployment_target(release.platforms[platform].wheel_platform_tag)
    if names.platform == "macos":
        if target is None:
            raise UsageError(f"--platform {platform}: its wheel_platform_tag "
                             f"{release.platforms[platform].wheel_platform_tag} names no macOS version "
                             f"(macosx_<major>_<minor>_<arch>); fix it in release.yaml")
        # The compilers, cibuildwheel and delocate all read it: binaries, tag and check agree.
        environment["MACOSX_DEPLOYMENT_TARGET"] = target
    # shipyard's CMake definitions (library/README.md), as in its own builds (wheel/native_core.py);
    # scikit-build-core takes them as config settings.
    settings = {f"cmake.define.{k}": v for k, v in
                {"SHIPYARD_VARIANT": found.tag, "SHIPYARD_CUDA": "ON" if found.is_cuda else "OFF",
                 **REPRODUCIBLE_CMAKE_DEFINES}.items()}
    before_all = ""
    core_libraries = ""
    if described.native_core is not None:
        prefix = (core_prefix or root / ".shipyard" / "cibuildwheel" / f"{component}-{found.tag}-core").resolve()
        # Forward slashes: CMake takes them on Windows too, and no shell reads a backslash as an escape.
        settings[f"cmake.define.{described.native_core.prefix_define}"] = prefix.as_posix()
        before_all = (f"shipyard --root {_quoted(root.as_posix())} ci native-core --platform {platform} "
                      f"--variant {found.name} --component {component} --prefix {_quoted(prefix.as_posix())}")
        core_libraries = (prefix / "lib").as_posix()
    repair = REPAIR_COMMANDS[names.platform].replace("{deployment_target}", target or "")
    if names.platform == "windows" and core_libraries:
        # The extensions load the core's DLL, which Windows finds on no rpath: delvewheel vendors it
        # from the prefix `before-all` installed (its lib/: the core installs RUNTIME there) and
        # patches the package to load it, as it does every other DLL.
        repair = repair.replace(" -w {dest_dir}", f" --add-path {_quoted(core_libraries)} -w {{dest_dir}}")
    # The wheel loads, its vendored libraries with it, in each Python's own venv: a broken repair
    # stops here. The cell tests (feature gate, recorded in the manifest) run once, in `shipyard build
    # --wheelhouse` after cibuildwheel, whose exit status the job judges as on Linux.
    test = f"python -c \"import {described.import_name}\"" if described.import_name else ""
    return CibuildwheelConfig(
        platform=names.platform, project=described.source_dir(root),
        build=tuple(build_identifier(cell, names) for cell in cells), archs=(names.arch,),
        environment=environment, before_all=before_all, repair_wheel_command=repair, test_command=test,
        config_settings=settings)
