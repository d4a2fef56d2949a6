"""Obtaining what a build needs on this host when it is missing: the sysroot for the platform's glibc
promise, the variant's CUDA toolkit."""

from __future__ import annotations

from shipyard.release.validate import Spec


def install_toolchain_if_obtainable(spec: Spec, variant_name: str, progress) -> None:  # noqa: ANN001
    """Assemble the sysroot this host's wheels need to keep their glibc promise, and the variant's
    CUDA toolkit, unless present or not obtainable here (CUDA 10.2, a glibc older than any sysroot)."""
    from shipyard.errors import ToolchainMissing
    from shipyard.host.toolchains.cuda_toolkit import install_cuda_toolkit
    from shipyard.host.toolchains.discover import discover, toolchain_cache
    from shipyard.host.toolchains.sysroot import install_sysroot, recipe_for_glibc

    platform = spec.release.platforms.get(discover().host_platform)
    glibc = platform.promised_glibc if platform else None
    if glibc and discover().compiler_at_most(None, glibc=glibc) is None and (recipe := recipe_for_glibc(glibc)):
        install_sysroot(recipe.name, toolchain_cache(), progress=progress)
        discover.cache_clear()
    variant = spec.release.find_variant(variant_name)
    if variant is None or not variant.cuda:
        return
    present = discover().cuda_toolkit(variant.cuda)
    if present is not None and present.cuobjdump is not None:
        return  # usable as it is (a toolkit without cuobjdump cannot pass the arch check)
    try:
        install_cuda_toolkit(variant.cuda, variant.archs, toolchain_cache(), progress=progress)
    except ToolchainMissing as exc:
        progress(f"no toolkit installed: {exc}")
    discover.cache_clear()
