"""The build matrix: component x variant x platform x Python x package type, minus exclusions."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from shipyard.errors import SpecError, UsageError
from shipyard.release.kinds import KINDS, WHEEL
from shipyard.release.spec import Exclusion, Platform, Release

# Variant, variant tag and platform of a pure cell: one py3-none-any wheel for every variant and platform.
ANY = "any"


@dataclass(frozen=True)
class Cell:
    """One thing to build and test. `python` is None for non-Python artifacts, pure wheels,
    noarch conda packages and the Python-independent conda package of a native core
    (`libember`: a conda cell of a component with a native core and no Python).

    A pure cell (`is_pure`) is one build per release: it stands for the variants and
    platforms its component is released for, listed in `variants`, `variant_tags` and
    `platforms` (empty for every other cell)."""

    component: str
    variant: str
    variant_tag: str
    platform: str
    python: str | None
    package_type: str
    variants: tuple[str, ...] = ()
    variant_tags: tuple[str, ...] = ()
    platforms: tuple[str, ...] = ()
    # The package's name when it is not the component's: the conda core package (libember).
    package: str = ""
    # An abi3 cell (its component's limited_api, e.g. "3.9"): one wheel built with `python` (the
    # lowest Python of the release its project admits), tested on each of `pythons`.
    limited_api: str = ""
    pythons: tuple[str, ...] = ()

    @property
    def is_pure(self) -> bool:
        return self.platform == ANY

    @property
    def is_abi3(self) -> bool:
        return bool(self.limited_api)

    @property
    def python_tag(self) -> str | None:
        return "cp" + self.python.replace(".", "") if self.python else None

    @property
    def interpreter_tags(self) -> str | None:
        """The python and abi tags of the cell's wheel: 'cp311-cp311', or 'cp39-abi3' for an abi3
        cell (its limited-API floor, whichever Python built it); None without a Python."""
        if self.is_abi3:
            return f"cp{self.limited_api.replace('.', '')}-abi3"
        return f"{self.python_tag}-{self.python_tag}" if self.python_tag else None

    @property
    def test_pythons(self) -> tuple[str, ...]:
        """The Pythons the cell's artifact is tested on: an abi3 cell's every Python, else its own."""
        return self.pythons or ((self.python,) if self.python else ())

    @property
    def id(self) -> str:
        if self.is_pure:
            return f"{self.component}-{ANY}-{self.package_type}"
        parts = [self.package or self.component, self.variant_tag, self.platform]
        if self.is_abi3:
            parts.append(f"cp{self.limited_api.replace('.', '')}-abi3")
        elif self.python_tag:
            parts.append(self.python_tag)
        parts.append(self.package_type)
        return "-".join(parts)

    def selector_fields(self) -> dict[str, str]:
        return {"component": self.component, "variant": self.variant, "platform": self.platform,
                "python": self.python or "", "package_type": self.package_type}


def _all_cells(release: Release) -> Iterator[Cell]:
    for component in release.components.values():
        for package_type in component.package_types:
            kind = KINDS[package_type]
            for variant in release.variants.values():
                if kind.on_mobile_targets:
                    for target in release.mobile_targets:
                        yield Cell(component.name, variant.name, variant.tag, target, None,
                                   package_type)
                    continue
                for platform in release.platforms:
                    pythons: tuple[str | None, ...] = release.pythons if component.is_python else (None,)
                    if kind.once_per_component:  # made from the sources, for no Python in particular
                        pythons = (None,)
                    if kind.splits_native_core and component.native_core is not None:
                        # conda splits the core out (libember: once per platform and variant),
                        # as conda-forge splits libtorch from pytorch.
                        pythons = (None, *pythons)
                    for python in pythons:
                        core = kind.splits_native_core and component.is_python and python is None
                        yield Cell(component.name, variant.name, variant.tag, platform, python,
                                   package_type, package=f"lib{component.name}" if core else "")


def _excluded_by(cell: Cell, exclusions: tuple[Exclusion, ...]) -> Exclusion | None:
    fields = cell.selector_fields()
    for exclusion in exclusions:
        if exclusion.matches(**fields):
            return exclusion
    return None


def expand(release: Release) -> list[Cell]:
    """Every cell of the release, in release.yaml order, exclusions removed; the wheel cells
    of a pure component collapse into one pure cell, at the place of its first, and so do its
    conda cells (one `noarch: python` package), and the sdist cells of any component (one sdist)."""
    kept = [cell for cell in _all_cells(release) if _excluded_by(cell, release.exclusions) is None
            and not not_applicable_reason(release, cell)]
    pure = {c.name for c in release.components.values() if c.kind == "python-pure"}
    abi3 = {c.name: c.limited_api for c in release.components.values() if c.limited_api}
    out: list[Cell] = []
    collapsed: set[tuple[str, ...]] = set()
    for cell in kept:
        group = (cell.component, cell.package_type)
        kind = KINDS[cell.package_type]
        if cell.component in abi3 and cell.package_type == WHEEL.name:
            # One abi3 wheel per variant and platform serves every Python: its Pythons become test cells.
            build = (*group, cell.variant, cell.platform)
            if build not in collapsed:
                collapsed.add(build)
                same = [c for c in kept if (c.component, c.package_type, c.variant, c.platform) == build]
                out.append(_abi3_cell(cell, abi3[cell.component], same))
        # A pure component builds a py3-none-any wheel, a `noarch: python` conda package: once;
        # any component one sdist.
        elif not (kind.once_per_component or (cell.component in pure and kind.pure_once)):
            out.append(cell)
        elif group not in collapsed:
            collapsed.add(group)
            out.append(_pure_cell(cell.component, cell.package_type,
                                  [c for c in kept if (c.component, c.package_type) == group]))
    return out


def _python_order(python: str) -> tuple[int, ...]:
    return tuple(int(n) for n in python.split("."))


def _abi3_cell(first: Cell, limited_api: str, covered: list[Cell]) -> Cell:
    """The one abi3 wheel cell of `covered` (one variant and platform, a cell per Python): built
    with the lowest of their Pythons, tested on all of them, in order."""
    pythons = tuple(sorted((c.python for c in covered if c.python), key=_python_order))
    return replace(first, python=pythons[0], limited_api=limited_api, pythons=pythons)


@dataclass(frozen=True)
class NotApplicable:
    """A cell the project itself rules out (its requires-python excludes the cell's Python): never
    built, never a failure, shown as "not applicable (requires-python >=3.11)"."""

    cell: Cell
    reason: str


def not_applicable_reason(release: Release, cell: Cell) -> str:
    """Why the component's own project rules `cell` out ('requires-python >=3.11'), or ''."""
    component = release.components[cell.component]
    if cell.python is None or component.admits_python(cell.python):
        return ""
    return f"requires-python {component.requires_python}"


def not_applicable(release: Release) -> list[NotApplicable]:
    """The cells of the release (exclusions removed) that their projects rule out, in release.yaml
    order. A pure component has none: its one wheel is built with a Python it admits."""
    pure = {c.name for c in release.components.values() if c.kind == "python-pure"}
    return [NotApplicable(cell, reason) for cell in _all_cells(release)
            if cell.component not in pure and _excluded_by(cell, release.exclusions) is None
            and (reason := not_applicable_reason(release, cell))]


def _pure_cell(component: str, package_type: str, covered: list[Cell]) -> Cell:
    unique = lambda values: tuple(dict.fromkeys(values))  # noqa: E731 - release.yaml order, once each
    return Cell(component, ANY, ANY, ANY, None, package_type, variants=unique(c.variant for c in covered),
                variant_tags=unique(c.variant_tag for c in covered), platforms=unique(c.platform for c in covered))


def builder_platform(release: Release, cell: Cell) -> Platform:
    """The platform whose runner builds `cell`: its own; the first it stands for when pure;
    for mobile targets, the Linux x86_64 platform they are cross-built from."""
    if KINDS[cell.package_type].on_mobile_targets:
        linux = [p for p in release.platforms.values() if p.os == "linux" and p.arch == "x86_64"]
        if not linux:
            raise SpecError("release.yaml: mobile targets cross-build on a linux x86_64 platform; "
                                "add one under platforms (os: linux, arch: x86_64)")
        return linux[0]
    return release.platforms[cell.platforms[0] if cell.is_pure else cell.platform]


def exclusion_hits(release: Release) -> list[int]:
    """How many cells each exclusion removes (same order as release.exclusions)."""
    hits = [0] * len(release.exclusions)
    for cell in _all_cells(release):
        fields = cell.selector_fields()
        for i, exclusion in enumerate(release.exclusions):
            if exclusion.matches(**fields):
                hits[i] += 1
    return hits


def exclusion_cells(release: Release) -> list[set[str]]:
    """The ids of the cells each exclusion matches (same order as release.exclusions)."""
    matched: list[set[str]] = [set() for _ in release.exclusions]
    for cell in _all_cells(release):
        fields = cell.selector_fields()
        for i, exclusion in enumerate(release.exclusions):
            if exclusion.matches(**fields):
                matched[i].add(cell.id)
    return matched


def surviving_platforms(release: Release) -> dict[str, set[str]]:
    """Each component's platforms and mobile targets on which some cell of it survives the
    exclusions (a component with none is absent), from one pass over the matrix."""
    out: dict[str, set[str]] = {}
    for cell in _all_cells(release):
        if _excluded_by(cell, release.exclusions) is None:
            out.setdefault(cell.component, set()).add(cell.platform)
    return out


def excluded_cells(release: Release) -> list[tuple[Cell, Exclusion]]:
    """Every cell an exclusion removes, with the first exclusion that removes it (release.yaml order)."""
    out = []
    for cell in _all_cells(release):
        exclusion = _excluded_by(cell, release.exclusions)
        if exclusion is not None:
            out.append((cell, exclusion))
    return out


def excluded_builds(release: Release) -> dict[tuple[str, str, str, str], Exclusion]:
    """(component, variant, platform, package type) of every build an exclusion removes any cell of,
    with the first exclusion that does (excluded_cells' order): one pass, for callers that ask per
    build. By package type: an exclusion of a platform's conda packages leaves its wheels."""
    out: dict[tuple[str, str, str, str], Exclusion] = {}
    for cell, exclusion in excluded_cells(release):
        out.setdefault((cell.component, cell.variant, cell.platform, cell.package_type), exclusion)
    return out


def select(cells: list[Cell], *, variant: str | None = None, platform: str | None = None,
           package_type: str | None = None, component: str | None = None,
           python: str | None = None) -> list[Cell]:
    """The cells matching every given filter (variant by name or tag). A pure cell matches
    every variant and platform it stands for."""
    out = []
    for cell in cells:
        if variant and variant not in (cell.variant, cell.variant_tag, *cell.variants, *cell.variant_tags):
            continue
        if platform and platform not in (cell.platform, *cell.platforms):
            continue
        if package_type and cell.package_type != package_type:
            continue
        if component and cell.component != component:
            continue
        if python and cell.python != python and python not in cell.pythons:  # an abi3 cell's test Pythons
            continue
        out.append(cell)
    return out


# GitHub Actions runs at most this many jobs from one matrix; a bigger one fails the workflow.
GITHUB_MATRIX_LIMIT = 256


def check_github_matrix_size(cells: list[Cell]) -> None:
    """Raise UsageError when `cells` are more jobs than one GitHub Actions matrix may hold."""
    if len(cells) <= GITHUB_MATRIX_LIMIT:
        return
    per_variant: dict[str, int] = {}
    for cell in cells:
        per_variant[cell.variant] = per_variant.get(cell.variant, 0) + 1
    largest = max(per_variant, key=lambda v: per_variant[v])
    split = ("one matrix per --variant" if per_variant[largest] <= GITHUB_MATRIX_LIMIT
             else "one matrix per --variant and --platform")
    raise UsageError(f"the matrix has {len(cells)} cells but GitHub Actions runs at most {GITHUB_MATRIX_LIMIT} "
                     f"jobs per matrix; generate {split} (largest variant: {largest}, "
                     f"{per_variant[largest]} cells)")

