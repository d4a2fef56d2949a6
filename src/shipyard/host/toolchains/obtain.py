"""Obtaining what a build needs on this host when it is missing: the sysroot or the zig wrappers for the
platform's glibc promise, the variant's CUDA toolkit. Each installer here leaves this process's view of the host
(`discover`, cached) looking again, whether it assembled the toolchain or found it there: another
process (a parallel nox session, another test worker) may have put it there after this one looked."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shipyard.plumbing.progress import Progress
from shipyard.release.spec import Spec

if TYPE_CHECKING:
    from shipyard.host.toolchains.cuda_toolkit import InstalledCudaToolkit
    from shipyard.host.toolchains.sysroot import Sysroot
    from shipyard.host.toolchains.zig import ZigCompiler
    from shipyard.release.build_routes import ZigTarget
    from shipyard.release.spec import Variant


def obtain_sysroot(name: str, progress: Progress) -> Sysroot:
    """The sysroot `name` of resources/sysroots.toml, assembled in shipyard's cache unless there."""
    from shipyard.host.toolchains.discover import discover, toolchain_cache
    from shipyard.host.toolchains.sysroot import install_sysroot

    try:
        return install_sysroot(name, toolchain_cache(), progress=progress)
    finally:
        discover.cache_clear()


def obtain_zig_compiler(target: ZigTarget, progress: Progress) -> ZigCompiler:
    """zig's clang for `target`'s glibc, its wrappers written in shipyard's cache and proved unless there."""
    from shipyard.host.toolchains.discover import discover, toolchain_cache
    from shipyard.host.toolchains.zig import install_zig_compiler

    try:
        return install_zig_compiler(target, toolchain_cache(), progress=progress)
    finally:
        discover.cache_clear()


def obtain_cuda_toolkit(variant: Variant, progress: Progress) -> InstalledCudaToolkit:
    """The CUDA toolkit of `variant`, assembled in shipyard's cache and proved for its archs unless there."""
    from shipyard.host.toolchains.cuda_toolkit import install_cuda_toolkit
    from shipyard.host.toolchains.discover import discover, toolchain_cache

    assert variant.cuda is not None, variant.name
    try:
        return install_cuda_toolkit(variant.cuda, variant.archs, toolchain_cache(), progress=progress)
    finally:
        discover.cache_clear()


def install_toolchain_if_obtainable(spec: Spec, variant_name: str, progress: Progress) -> None:
    """Assemble the sysroot (or write the zig wrappers) that the wheels of every platform this host
    builds need to keep their glibc promise (linux-x86_64's bullseye sysroot, and zig for a second
    platform promising manylinux2014), and the variant's CUDA toolkit, unless present or not obtainable
    here (CUDA 10.2, a glibc older than manylinux2014's)."""
    from shipyard.errors import ToolchainMissing
    from shipyard.host.toolchains.discover import discover
    from shipyard.release.build_routes import SysrootRecipe, ZigTarget, route_for_glibc
    from shipyard.release.matrix import expand, select

    cells = select(expand(spec.release), variant=variant_name, package_type="wheel")
    for name in discover().platforms_built_here(spec.release):
        if not any(c.platform == name for c in cells):
            continue  # nothing of the variant builds there (a CUDA build: manylinux2014 is CPU only)
        glibc = spec.release.platforms[name].promised_glibc
        route = route_for_glibc(glibc) if glibc else None
        if isinstance(route, ZigTarget) and discover().zig_compiler(route.glibc) is None:
            obtain_zig_compiler(route, progress)
        elif isinstance(route, SysrootRecipe) and discover().compiler_at_most(None, glibc=glibc) is None:
            obtain_sysroot(route.name, progress)
    variant = spec.release.find_variant(variant_name)
    if variant is None or not variant.cuda:
        return
    present = discover().cuda_toolkit(variant.cuda)
    if present is not None and present.cuobjdump is not None:
        return  # usable as it is (a toolkit without cuobjdump cannot pass the arch check)
    try:
        obtain_cuda_toolkit(variant, progress)
    except ToolchainMissing as exc:
        progress(f"no toolkit installed: {exc}")
