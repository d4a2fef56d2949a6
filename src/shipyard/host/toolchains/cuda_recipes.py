"""How each CUDA version is obtained (resources/cuda_toolkits.toml, one recipe per version, its archs
from resources/cuda_archs.toml), the plan for one install (ToolkitPlan: the recipe, the archs to
prove, and whether the host's own toolkit is linked or registry packages are assembled: Debian's and
NVIDIA's, or NVIDIA's PyPI wheels alone), and what a proved toolkit in the cache is (InstalledCudaToolkit).
cuda_assembly.py assembles and proves a toolkit as the plan says; cuda_toolkit.py installs it into
the cache and finds it again."""

from __future__ import annotations

import os
import re
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Literal

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from shipyard.errors import SpecError, ToolchainMissing, ToolError
from shipyard.plumbing import command
from shipyard.release.cuda_archs import parse_arch_list
from shipyard.release.cuda_archs import supported_archs as arch_table


@dataclass(frozen=True)
class DebianSource:
    """The Debian .debs that carry a toolkit's compiler."""

    suite: str
    component: str
    packages: tuple[str, ...]
    upstream: str  # the .deb version must be "<upstream>~<debian revision>"


# Where a toolkit comes from: "debian" (the compiler from Debian's .debs, headers and libraries from
# PyPI wheels), "pypi" (every part from NVIDIA's PyPI wheels), "local" (a toolkit on the host).
ToolkitSource = Literal["debian", "pypi", "local"]
TOOLKIT_SOURCES: tuple[ToolkitSource, ...] = ("debian", "pypi", "local")


@dataclass(frozen=True)
class ToolkitRecipe:
    """How one CUDA version is obtained (one table of resources/cuda_toolkits.toml)."""

    version: str
    host_cxx: str
    host_gcc_max: int
    cxx_standard: int  # the newest C++ standard its nvcc compiles (14 for 10.2)
    source: ToolkitSource = "local"
    debian: DebianSource | None = None
    wheels: tuple[str, ...] = ()
    wheel_prefix: str | None = None  # source "pypi": the folder of the wheels that is the toolkit's tree
    home: Path | None = None
    cuobjdump_wheel: str | None = None
    cuobjdump_in_wheel: str | None = None
    unobtainable: str | None = None

    @property
    def from_registry(self) -> bool:
        """Whether the toolkit is assembled from registry packages, the same way on every host."""
        return self.source != "local"

    @property
    def archs(self) -> tuple[str, ...]:
        """What this version compiles SASS for: resources/cuda_archs.toml, the one list."""
        if self.version not in arch_table():
            raise ToolchainMissing(f"CUDA {self.version} has a recipe in cuda_toolkits.toml but no arch list "
                                   f"in shipyard/resources/cuda_archs.toml. Fix: add its archs there")
        return arch_table()[self.version]

    @property
    def arch_min(self) -> str:
        return self.archs[0]

    @property
    def arch_max(self) -> str:
        return self.archs[-1]

    def in_range(self, arch: str) -> bool:
        return arch_sort_key(self.arch_min) <= arch_sort_key(arch) <= arch_sort_key(self.arch_max)


@dataclass(frozen=True)
class InstalledCudaToolkit:
    """A proved toolkit in the cache; `root` can be used as CUDA_HOME."""

    version: str
    root: Path
    nvcc: Path
    cuobjdump: Path
    host_cxx: Path
    include_dir: Path
    lib_dir: Path
    supported_archs: tuple[str, ...]  # "major.minor", what this nvcc compiles SASS for
    verified_archs: tuple[str, ...]  # the archs a proof compiled, linked and found with cuobjdump
    identity: str  # sha256 of `nvcc --version` and the versions of every .deb/.whl it holds
    components: tuple[str, ...]  # "deb:nvidia-cuda-toolkit=11.8.89~11.8.0-5~deb12u1", ...


# --- the plan for one install -----------------------------------------------------------------

@dataclass(frozen=True)
class ToolkitPlan:
    """One CUDA toolkit to install: its recipe, the archs to prove it for, and where it comes from."""

    recipe: ToolkitRecipe
    archs: tuple[str, ...]  # "major.minor", what the proof compiles SASS for ("+PTX" dropped)
    home: Path | None  # the host's toolkit to link into the cache; None: assembled from registry packages

    @property
    def version(self) -> str:
        return self.recipe.version

    def refuse_unsupported(self, supported: Sequence[str]) -> None:
        """ToolchainMissing when an arch of the plan is not one the toolkit's own nvcc compiles SASS for."""
        _refuse_unsupported_archs(self.recipe, self.archs, supported)


def plan_cuda_toolkit(version: str, archs: Sequence[str] | str) -> ToolkitPlan:
    """The plan to install CUDA `version` ("11.8") proved for `archs` ("7.5;8.0" or a list).
    ToolchainMissing when this machine cannot have it (unknown version, no host toolkit where one is
    needed, an arch outside the version's range), SpecError for an arch not in major.minor form."""
    recipe = cuda_toolkit_recipe(version)
    wanted = _requested_archs(archs)
    home = None if recipe.from_registry else _local_home(recipe)
    _refuse_unsupported_archs(recipe, wanted, None)
    return ToolkitPlan(recipe, wanted, home)


# --- recipes ------------------------------------------------------------------------------------

@cache
def cuda_toolkit_recipes() -> tuple[ToolkitRecipe, ...]:
    """Every CUDA version resources/cuda_toolkits.toml knows, oldest first."""
    text = resources.files("shipyard.resources").joinpath("cuda_toolkits.toml").read_text()
    recipes = []
    for version, table in tomllib.loads(text)["toolkits"].items():
        source = table["source"]
        if source not in TOOLKIT_SOURCES:
            raise ToolchainMissing(f"shipyard/resources/cuda_toolkits.toml: toolkits.{version}.source: one of "
                                   f"{', '.join(TOOLKIT_SOURCES)}; fix the table (got {source!r})")
        if source == "pypi" and not table.get("wheel_prefix"):
            raise ToolchainMissing(f"shipyard/resources/cuda_toolkits.toml: toolkits.{version}.wheel_prefix: a "
                                   "toolkit from PyPI names the folder its wheels unpack into; add it (got none)")
        debian = None
        if source == "debian":
            debian = DebianSource(table["suite"], table["component"], tuple(table["debs"]),
                                  table["deb_upstream"])
        recipes.append(ToolkitRecipe(
            version=version,
            host_cxx=table["host_cxx"],
            host_gcc_max=int(table["host_gcc_max"]),
            cxx_standard=int(table["cxx_standard"]),
            source=source,
            debian=debian,
            wheels=tuple(table.get("wheels", ())),
            wheel_prefix=table.get("wheel_prefix"),
            home=Path(table["home"]) if table.get("home") else None,
            cuobjdump_wheel=table.get("cuobjdump_wheel"),
            cuobjdump_in_wheel=table.get("cuobjdump_in_wheel"),
            unobtainable=table.get("unobtainable"),
        ))
    return tuple(sorted(recipes, key=lambda r: arch_sort_key(r.version)))


def cuda_toolkit_recipe(version: str) -> ToolkitRecipe:
    """The recipe for `version` ("11.8"); ToolchainMissing when shipyard knows no such toolkit."""
    for recipe in cuda_toolkit_recipes():
        if recipe.version == version:
            return recipe
    known = ", ".join(r.version for r in cuda_toolkit_recipes())
    raise ToolchainMissing(f"shipyard knows no CUDA {version} toolkit (it knows {known}). Fix: use one of "
                           f"those, or add CUDA {version} to shipyard/resources/cuda_toolkits.toml")


def nvcc_cxx_standard(version: str) -> int:
    """The newest C++ standard nvcc `version` ("10.2") compiles: its recipe's, or for a toolkit
    shipyard has no recipe for (one found on the host) that of the newest recipe not newer."""
    def key(v: str) -> tuple[int, ...]:
        return tuple(int(part) for part in v.split(".") if part.isdigit())
    older = [r for r in cuda_toolkit_recipes() if key(r.version) <= key(version)]
    return max(older, key=lambda r: key(r.version)).cxx_standard if older else cuda_toolkit_recipes()[0].cxx_standard


def cuda_runtime_wheel(version: str) -> str:
    """The pin of NVIDIA's CUDA runtime wheel for `version` (nvidia-cuda-runtime-cu11==11.8.89): the
    one its toolkit is assembled with. ToolchainMissing when the recipe names none."""
    pins = [w for w in cuda_toolkit_recipe(version).wheels
            if canonicalize_name(Requirement(w).name).startswith("nvidia-cuda-runtime")]
    if not pins:
        raise ToolchainMissing(f"no PyPI wheel of the CUDA {version} runtime is known (shipyard/resources/"
                               f"cuda_toolkits.toml names none for {version}). Fix: add its "
                               "nvidia-cuda-runtime pin to that toolkit's `wheels`")
    return pins[0]


def arch_sort_key(arch: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)\.(\d+)", arch)
    if not match:
        raise SpecError(f"CUDA arch {arch!r} is not in major.minor form (for example '8.6')")
    return int(match.group(1)), int(match.group(2))


def _requested_archs(archs: Sequence[str] | str) -> tuple[str, ...]:
    # "+PTX" adds PTX to a build; the proof is about SASS, so it checks the arch itself.
    names = parse_arch_list(archs) if isinstance(archs, str) else tuple(archs)
    cleaned = tuple(dict.fromkeys(a.strip().removesuffix("+PTX") for a in names if a.strip()))
    if not cleaned:
        raise SpecError("no CUDA archs given: a toolkit is proved by compiling for a list such as '7.5;8.0'")
    for arch in cleaned:
        arch_sort_key(arch)
    return cleaned


def _refuse_unsupported_archs(recipe: ToolkitRecipe, archs: tuple[str, ...],
                              supported: Sequence[str] | None) -> None:
    """ToolchainMissing when an arch is outside what this toolkit compiles SASS for."""
    exact = tuple(supported) if supported is not None else arch_table().get(recipe.version)
    bad = [a for a in archs if not recipe.in_range(a) or (exact is not None and a not in exact)]
    if not bad:
        return
    others = []
    for other in cuda_toolkit_recipes():
        table = arch_table().get(other.version)
        if other.version != recipe.version and all(
                other.in_range(a) and (table is None or a in table) for a in bad):
            others.append(other.version)
    listed = f" ({';'.join(exact)})" if exact else ""
    raise ToolchainMissing(
        f"CUDA {recipe.version} cannot compile SASS for {';'.join(bad)}: it supports "
        f"{recipe.arch_min}-{recipe.arch_max}{listed}. Fix: drop {';'.join(bad)} from the arch list"
        + (f", or build it with CUDA {', '.join(others)}" if others else ""))


def toolkit_program(bin_dir: Path, name: str) -> Path:
    """A program of a toolkit's bin/ folder: `nvcc`, or `nvcc.exe` on Windows (NVIDIA's installer)."""
    return bin_dir / (f"{name}.exe" if sys.platform == "win32" else name)


def _local_home(recipe: ToolkitRecipe) -> Path:
    """The installed CUDA `recipe.version` to use: CUDA_HOME if it holds that version, else `home`."""
    tried = []
    candidates = [Path(os.environ["CUDA_HOME"])] if os.environ.get("CUDA_HOME") else []
    if recipe.home is not None:
        candidates.append(recipe.home)
    for home in candidates:
        nvcc = toolkit_program(home / "bin", "nvcc")
        if not nvcc.is_file():
            tried.append(f"{home} has no bin/nvcc")
            continue
        try:
            result = command.run([nvcc, "--version"], check=False, timeout=60, what="nvcc --version")
        except ToolError:
            tried.append(f"{home}/bin/nvcc does not run")
            continue
        release = re.search(r"release (\d+\.\d+)", result.stdout)
        if result.returncode == 0 and release and release.group(1) == recipe.version:
            return home
        tried.append(f"{home} holds CUDA {release.group(1) if release else '(nvcc does not run)'}")
    where = f" ({'; '.join(tried)})" if tried else ""
    if recipe.unobtainable:
        raise ToolchainMissing(
            f"no CUDA {recipe.version} toolkit here{where}, and it cannot be obtained on this machine: "
            f"{recipe.unobtainable}. Fix: build the CUDA {recipe.version} cells where the toolkit is "
            f"preinstalled (a CI runner or a builder image with /usr/local/cuda-{recipe.version}) "
            f"and set CUDA_HOME to it there")
    raise ToolchainMissing(f"no CUDA {recipe.version} toolkit here{where}. Fix: install CUDA "
                           f"{recipe.version} at {recipe.home or f'/usr/local/cuda-{recipe.version}'} "
                           "or set CUDA_HOME to it")
