"""`shipyard doctor`: for each cell this host builds, ready or what is missing with the fix."""

from __future__ import annotations

from dataclasses import dataclass

from shipyard.matrix import Cell, expand, select
from shipyard.spec import Release
from shipyard.toolchains.discover import Inventory
from shipyard.toolchains.resolve import Missing, Toolchain, resolve


@dataclass(frozen=True)
class DoctorRow:
    cell: Cell
    ready: bool
    detail: str  # the toolchain used, or what is missing and the fix


def host_cells(release: Release, inventory: Inventory, variant: str | None = None) -> list[Cell]:
    """Cells of this host's platform plus the mobile targets (cross-built from here) and pure wheels."""
    cells = select(expand(release), variant=variant)
    return [c for c in cells if inventory.host_platform in (c.platform, *c.platforms) or c.package_type == "mobile"]


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
        parts.append(f"g++ {toolchain.compiler.version}")
    if toolchain.cuda:
        parts.append(f"nvcc {toolchain.cuda.version} ({toolchain.cuda.origin})")
    if toolchain.cuda_host_compiler:
        parts.append(f"host g++-{toolchain.cuda_host_compiler.major}")
    return ", ".join(parts) or "no tools needed"
