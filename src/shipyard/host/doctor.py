"""`shipyard doctor`: for each cell this host builds, ready or what is missing with the fix."""

from __future__ import annotations

from dataclasses import dataclass

from shipyard.host.toolchains.discover import Compiler, Inventory
from shipyard.host.toolchains.glibc import glibc_tuple, toolkit_glibc
from shipyard.host.toolchains.resolve import Missing, Toolchain, resolve
from shipyard.release.kinds import KINDS
from shipyard.release.matrix import Cell, expand, select
from shipyard.release.spec import Release


@dataclass(frozen=True)
class DoctorRow:
    cell: Cell
    ready: bool
    detail: str  # the toolchain used, or what is missing and the fix


def host_cells(release: Release, inventory: Inventory, variant: str | None = None) -> list[Cell]:
    """Cells of the platforms this host builds (its own, and another of the same OS and architecture
    with an older glibc promise) plus the mobile targets (cross-built from here) and pure wheels."""
    cells = select(expand(release), variant=variant)
    here = set(inventory.platforms_built_here(release))
    return [c for c in cells if here & {c.platform, *c.platforms} or KINDS[c.package_type].on_mobile_targets]


def diagnose(release: Release, inventory: Inventory, variant: str | None = None) -> list[DoctorRow]:
    rows = []
    for cell in host_cells(release, inventory, variant):
        result = resolve(cell, release, inventory)
        if isinstance(result, Missing):
            rows.append(DoctorRow(cell, False, str(result)))
        else:
            rows.append(DoctorRow(cell, True, describe(result)))
    return rows


def describe(toolchain: Toolchain) -> str:
    parts = []
    if toolchain.interpreter:
        parts.append(f"python {toolchain.interpreter.full_version}")
    if toolchain.compiler:
        compiler = toolchain.compiler
        parts.append(f"{compiler.origin} (clang {compiler.zig.clang_version})" if compiler.zig is not None
                     else f"g++ {compiler.version}" + _links(compiler))
    if toolchain.cuda:
        parts.append(f"nvcc {toolchain.cuda.version} ({toolchain.cuda.origin}{_toolkit_glibc(toolchain)})")
    if toolchain.cuda_host_compiler:
        parts.append(f"host g++-{toolchain.cuda_host_compiler.major}" + _links(toolchain.cuda_host_compiler))
    return ", ".join(parts) or "no tools needed"


def _links(compiler: Compiler) -> str:
    return f" ({compiler.origin}, glibc {compiler.glibc})" if compiler.sysroot is not None else ""


def _toolkit_glibc(toolchain: Toolchain) -> str:
    """For a build against a sysroot: whether the toolkit itself could run on that older system."""
    compiler = toolchain.cuda_host_compiler
    if toolchain.cuda is None or compiler is None or compiler.sysroot is None:
        return ""
    needs = toolkit_glibc(toolchain.cuda.root)
    if needs.tools and glibc_tuple(needs.tools) > glibc_tuple(compiler.glibc):
        return (f"; its {needs.tool} needs GLIBC_{needs.tools} and cannot run on {compiler.sysroot.name}: it runs "
                f"on this host and compiles against the sysroot, and a {compiler.sysroot.name} builder image "
                "could not hold it")
    return f"; runs on glibc {needs.tools or '?'} and newer, {needs.runtime_library} needs {needs.runtime or '?'}"
