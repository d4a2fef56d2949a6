"""Decide, for one cell, which tools build it here, or what is missing and the exact fix."""

from __future__ import annotations

from dataclasses import dataclass

from shipyard.host.toolchains.discover import Compiler, CudaToolkit, Interpreter, Inventory
from shipyard.host.toolchains.glibc import glibc_tuple, toolkit_glibc
from shipyard.plumbing.hashing import sha256_hex
from shipyard.release.build_routes import SysrootRecipe, ZigTarget, route_for_glibc, unbuildable
from shipyard.release.kinds import KINDS
from shipyard.release.matrix import Cell
from shipyard.release.spec import Platform, Release


@dataclass(frozen=True)
class Toolchain:
    """The tools that build one cell, and an identity string for the build cache key."""

    interpreter: Interpreter | None
    compiler: Compiler | None
    cuda: CudaToolkit | None
    cuda_host_compiler: Compiler | None

    @property
    def identity(self) -> str:
        parts = [
            f"python={self.interpreter.identity}" if self.interpreter else "python=none",
            f"gcc={self.compiler.identity}" if self.compiler else "gcc=none",
            f"cuda={self.cuda.identity}" if self.cuda else "cuda=none",
            f"cuda-host={self.cuda_host_compiler.identity}" if self.cuda_host_compiler else "",
        ]
        return sha256_hex("\n".join(parts).encode())[:16]


@dataclass(frozen=True)
class Missing:
    """Why a cell cannot build here, and what to do about it."""

    what: str
    fix: str

    def __str__(self) -> str:
        return f"{self.what}. Fix: {self.fix}"


def resolve(cell: Cell, release: Release, inventory: Inventory) -> Toolchain | Missing:
    """The toolchain for `cell` on this host, or the first thing missing with its fix."""
    kind = KINDS[cell.package_type]
    if kind.on_mobile_targets:
        return _resolve_mobile(cell, release, inventory)
    if cell.is_pure:
        return _resolve_pure(release, inventory)
    platform = release.platforms[cell.platform]
    if cell.platform not in inventory.platforms_built_here(release):
        # The runner's name lives in release.yaml only.
        return Missing(f"{cell.platform} cells do not build on this {inventory.host_platform} host",
                       f"they build on GitHub's {platform.github_runner} runners in the release pipeline (ci/)")
    # A conda package's Python comes from its channels, not from this host.
    interpreter = inventory.interpreter(cell.python) if cell.python and kind.host_interpreter else None
    if cell.python and interpreter is None and kind.host_interpreter:
        return Missing(f"no Python {cell.python} interpreter",
                       f"install it (pyenv install {cell.python}) or put python{cell.python} on PATH")
    component = release.components[cell.component]
    variant = release.variants[cell.variant]
    if component.kind == "python-pure":
        return Toolchain(interpreter, None, None, None)
    # A wheel keeps its platform tag's glibc promise only when compiled against that glibc or older.
    glibc = platform.promised_glibc if kind.keeps_glibc_promise else None
    route = route_for_glibc(glibc) if glibc else None
    compiler = inventory.zig_compiler(route.glibc) if isinstance(route, ZigTarget) else \
        inventory.compiler_at_most(None, glibc=glibc)
    if compiler is None:
        return _missing_compiler(inventory, platform, glibc)
    if compiler.zig is not None and component.vendored_libraries:
        # The host's libpng needs the host's glibc, and zig carries no system libraries of its own.
        return Missing(f"{component.name} links and vendors {', '.join(component.vendored_libraries)}, and "
                       f"{compiler.origin} has no build of them for that glibc",
                       f"promise manylinux_2_31_x86_64 for {cell.platform} (the bullseye sysroot carries them), "
                       f"or vendor no system library in this component")
    if not variant.is_cuda:
        return Toolchain(interpreter, compiler, None, None)
    return _resolve_cuda(cell, release, inventory, interpreter, compiler, glibc)


def _missing_compiler(inventory: Inventory, platform: Platform, glibc: str | None) -> Missing:
    refused = unbuildable(platform) if glibc is not None else None
    if refused is not None:  # validate refuses it too: the fix is what would build, never the value itself
        return Missing(refused.reason, refused.needed)
    route = route_for_glibc(glibc) if glibc is not None else None
    if isinstance(route, ZigTarget):
        from shipyard.host.toolchains.zig import find_zig, ziglang_requirement

        zig = find_zig()
        what = f"no compiler targets glibc {glibc}'s symbol versions, as {platform.wheel_platform_tag} promises"
        if zig is None:
            return Missing(f"{what} (the zig route needs the ziglang package, which is not installed)",
                           f"pip install '{ziglang_requirement()}' (a dependency of shipyard), then shipyard "
                           f"toolchain install {route.name}")
        return Missing(what, f"shipyard toolchain install {route.name}   (zig {zig.version}'s clang from the "
                             f"ziglang package, targeting {route.triple}; no download)")
    if glibc is None or not inventory.compilers:
        return Missing("no C++ compiler (g++-N)", "apt-get install -y g++")
    host = inventory.compilers[0].glibc or "?"
    what = (f"no C++ compiler links against glibc {glibc} or older, as {platform.wheel_platform_tag} promises "
            f"(this host's gcc links its glibc {host})")
    assert isinstance(route, SysrootRecipe)  # a promise no route keeps is unbuildable
    return Missing(what, f"shipyard toolchain install {route.name}   (Debian {route.suite}'s gcc "
                         f"{route.gcc} and glibc {route.glibc} as a sysroot, from this machine's mirror)")


def _resolve_pure(release: Release, inventory: Inventory) -> Toolchain | Missing:
    """A pure wheel builds (and is tested) with the oldest of the release's Pythons found here."""
    interpreter = next((i for p in release.pythons if (i := inventory.interpreter(p))), None)
    if interpreter is None:
        return Missing(f"no Python of the release ({', '.join(release.pythons)}) on this host",
                       f"install one (pyenv install {release.pythons[0]}) or put python{release.pythons[0]} on PATH")
    return Toolchain(interpreter, None, None, None)


def _resolve_cuda(cell: Cell, release: Release, inventory: Inventory, interpreter: Interpreter | None,
                  compiler: Compiler, glibc: str | None) -> Toolchain | Missing:
    variant = release.variants[cell.variant]
    assert variant.cuda is not None
    toolkit = inventory.cuda_toolkit(variant.cuda)
    if toolkit is None:
        from shipyard.host.toolchains.cuda_recipes import cuda_toolkit_recipes

        # Which versions cannot be had here is cuda_toolkits.toml's to say (`unobtainable`).
        recipe = next((r for r in cuda_toolkit_recipes() if r.version == variant.cuda), None)
        if recipe is not None and recipe.unobtainable:
            return Missing(
                f"no CUDA {variant.cuda} toolkit, and none can be obtained on this machine "
                f"({recipe.unobtainable})",
                f"build the {variant.name} cells where the toolkit is preinstalled: the release "
                f"pipeline's CUDA {variant.cuda} builder image or a runner with CUDA_HOME="
                f"/usr/local/cuda-{variant.cuda}")
        return Missing(f"no CUDA {variant.cuda} toolkit",
                       f"shipyard toolchain install {variant.name}   (or set CUDA_HOME to a CUDA "
                       f"{variant.cuda} toolkit)")
    if toolkit.cuobjdump is None:
        return Missing(f"CUDA {variant.cuda} toolkit at {toolkit.root} has no cuobjdump for the arch check",
                       f"shipyard toolchain install {variant.name}")
    if compiler.zig is not None:
        # nvcc takes gcc (or its own list of host compilers) as -ccbin, never zig's clang.
        return Missing(f"CUDA {variant.cuda} needs a host gcc that links glibc {glibc} or older for nvcc, and "
                       f"the promise's compiler is {compiler.origin}, which nvcc does not take",
                       "exclude this variant from the platform in release.yaml (exclusions), or promise "
                       "manylinux_2_31_x86_64 for it (the bullseye sysroot's gcc 10 is nvcc's host compiler there)")
    host = inventory.compiler_at_most(variant.host_gcc_max, glibc=glibc)
    if host is None:
        if glibc is None:
            return Missing(f"CUDA {variant.cuda} needs a host gcc at most {variant.host_gcc_max}",
                           f"apt-get install -y g++-{variant.host_gcc_max}")
        return Missing(f"CUDA {variant.cuda} needs a host gcc at most {variant.host_gcc_max} that links glibc "
                       f"{glibc} or older; the {compiler.origin}'s gcc is {compiler.major}",
                       "build this variant in an older builder image on the CI runners, one whose gcc nvcc "
                       f"{variant.cuda} accepts (as CUDA 10.2 builds in its own builder image, docs/glibc.md)")
    if glibc is not None:
        needs = toolkit_glibc(toolkit.root)
        if needs.runtime and glibc_tuple(needs.runtime) > glibc_tuple(glibc):
            return Missing(f"CUDA {variant.cuda}'s runtime {needs.runtime_library} needs GLIBC_{needs.runtime}, "
                           f"newer than the promised glibc {glibc}: its wheels cannot run there",
                           "promise a newer glibc for this platform in release.yaml, or build the variant "
                           "with a toolkit whose runtime supports it")
    return Toolchain(interpreter, compiler, toolkit, host)


def _resolve_mobile(cell: Cell, release: Release, inventory: Inventory) -> Toolchain | Missing:
    target = release.mobile_targets[cell.platform]
    if target.toolchain == "android-ndk":
        if inventory.android_ndk is None:
            return Missing(f"{cell.platform} needs the Android NDK",
                           "install the Android NDK and set ANDROID_NDK_HOME (GitHub's Ubuntu "
                           "runners have it)")
        return Toolchain(None, inventory.compiler_at_most(None), None, None)
    if target.toolchain == "cross-gcc":
        # discover_for looks for the compiler and emulator this target names (release.yaml).
        install = f"apt-get install -y {' '.join(target.apt_packages)}"
        if target.triple not in inventory.cross_compilers:
            return Missing(f"no {target.triple} cross compiler ({target.compiler})", install)
        if target.emulator and target.emulator[0] not in inventory.emulators:
            return Missing(f"no {target.emulator[0]} to run the {cell.platform} tests", install)
    return Toolchain(None, inventory.compiler_at_most(None), None, None)
