"""Which wheel cells one `shipyard build` builds: those its selection (--variant, --component,
--python) names on this host, and for a narrowed selection the cells of the components it depends on
within the release (release_dependencies) that the variant's index does not hold yet."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from shipyard.errors import UsageError
from shipyard.host.toolchains.discover import Inventory
from shipyard.plumbing.progress import Progress
from shipyard.release.matrix import Cell, NotApplicable, expand, not_applicable, select
from shipyard.release.spec import Release, Spec
from shipyard.wheel.build_request import BuildRequest
from shipyard.wheel.release_dependencies import selection_dependencies


def _matching(cells: list[Cell], request: BuildRequest, inventory: Inventory, release: Release) -> list[Cell]:
    # A pure cell builds once for every variant, on any platform it stands for: each variant's build makes it.
    cells = select(cells, variant=request.variant, package_type="wheel")
    # Every platform this host builds (a second Linux x86_64 platform with an older glibc promise too),
    # or those the request names.
    here = [p for p in inventory.platforms_built_here(release) if not request.platforms or p in request.platforms]
    cells = [c for c in cells if c.platform in here or set(c.platforms) & set(here)]
    if request.components:
        cells = [c for c in cells if c.component in request.components]
    if request.pythons:
        # An abi3 cell is one build for every Python: any of its Pythons selects it (and is tested).
        cells = [c for c in cells if c.python in request.pythons or c.is_pure
                 or set(c.pythons) & set(request.pythons)]
    return cells


def selected_cells(spec: Spec, request: BuildRequest, inventory: Inventory) -> tuple[list[Cell], list[NotApplicable]]:
    """The wheel cells to build, and those of the selection that their projects rule out."""
    if request.components:
        unknown = set(request.components) - set(spec.release.components)
        if unknown:
            raise UsageError(f"unknown component(s) {', '.join(sorted(unknown))}; release.yaml has "
                                f"{', '.join(spec.release.components)}")
    ruled_out = not_applicable(spec.release)
    kept = {c.id for c in _matching([n.cell for n in ruled_out], request, inventory, spec.release)}
    return (_matching(expand(spec.release), request, inventory, spec.release),
            [n for n in ruled_out if n.cell.id in kept])


def dependency_cells(spec: Spec, request: BuildRequest, inventory: Inventory,
                     progress: Progress) -> tuple[list[Cell], dict[str, str]]:
    """The cells a narrowed build (--component) adds: those of the components its selection depends
    on within the release (release_dependencies), which its tests install from the variant's index,
    less those the index already holds (an earlier run's, or the fragments a CI lane merged); and
    each component added with the one that depends on it."""
    if not request.components:
        return [], {}
    needed = selection_dependencies(spec, request.components)
    if not needed:
        return [], {}
    variant_dir = request.dist / "whl" / spec.release.variants[request.variant].tag
    cells = [c for c in _matching(expand(spec.release), replace(request, components=tuple(needed)), inventory,
                                spec.release)
             if not _indexed(spec, c, variant_dir)]
    added = {name: needed[name] for name in dict.fromkeys(c.component for c in cells)}
    for name, dependent in added.items():
        progress(f"also building {name}: {dependent} depends on it")
    for name in (n for n in needed if n not in added):
        progress(f"{name}: taken from {variant_dir} ({needed[name]} depends on it)")
    return cells, added


def _indexed(spec: Spec, cell: Cell, variant_dir: Path) -> bool:
    """Whether the variant's index holds a wheel of `cell` (its Python and platform, or a pure one)."""
    wanted = ("py3-none-any" if cell.is_pure else
              f"{cell.interpreter_tags}-{spec.release.platforms[cell.platform].wheel_platform_tag}")
    for wheel in (variant_dir / canonicalize_name(cell.component)).glob("*.whl"):
        try:
            tags = parse_wheel_filename(wheel.name)[3]
        except InvalidWheelFilename:
            continue
        if wanted in {str(t) for t in tags}:
            return True
    return False
