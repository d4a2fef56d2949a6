"""The build matrix: component x variant x platform x Python x package type, minus exclusions."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from shipyard.errors import UsageError
from shipyard.spec import Exclusion, Release


@dataclass(frozen=True)
class Cell:
    """One thing to build and test. `python` is None for non-Python artifacts."""

    component: str
    variant: str
    variant_tag: str
    platform: str
    python: str | None
    package_type: str

    @property
    def python_tag(self) -> str | None:
        return "cp" + self.python.replace(".", "") if self.python else None

    @property
    def id(self) -> str:
        parts = [self.component, self.variant_tag, self.platform]
        if self.python_tag:
            parts.append(self.python_tag)
        parts.append(self.package_type)
        return "-".join(parts)

    def selector_fields(self) -> dict[str, str]:
        return {"component": self.component, "variant": self.variant, "platform": self.platform,
                "python": self.python or "", "package_type": self.package_type}


def _all_cells(release: Release) -> Iterator[Cell]:
    for component in release.components.values():
        for package_type in component.package_types:
            for variant in release.variants.values():
                if package_type == "mobile":
                    for target in release.mobile_targets:
                        yield Cell(component.name, variant.name, variant.tag, target, None,
                                   package_type)
                    continue
                for platform in release.platforms:
                    pythons = release.pythons if component.is_python else (None,)
                    for python in pythons:
                        yield Cell(component.name, variant.name, variant.tag, platform, python,
                                   package_type)


def _excluded_by(cell: Cell, exclusions: tuple[Exclusion, ...]) -> Exclusion | None:
    fields = cell.selector_fields()
    for exclusion in exclusions:
        if exclusion.matches(**fields):
            return exclusion
    return None


def expand(release: Release) -> list[Cell]:
    """Every cell of the release, in release.yaml order, exclusions removed."""
    return [cell for cell in _all_cells(release) if _excluded_by(cell, release.exclusions) is None]


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


def select(cells: list[Cell], *, variant: str | None = None, platform: str | None = None,
           package_type: str | None = None, component: str | None = None,
           python: str | None = None) -> list[Cell]:
    """The cells matching every given filter (variant by name or tag)."""
    out = []
    for cell in cells:
        if variant and variant not in (cell.variant, cell.variant_tag):
            continue
        if platform and cell.platform != platform:
            continue
        if package_type and cell.package_type != package_type:
            continue
        if component and cell.component != component:
            continue
        if python and cell.python != python:
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

