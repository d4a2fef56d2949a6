"""The matrix grid: rows are component x Python, columns variant x platform; a slot holds the
cells of one row and column (one per package type, or several images of one variant)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from shipyard.release.kinds import kind_of
from shipyard.release.matrix import ANY
from shipyard.release.spec import Release
from shipyard.report.cells import ReportCell


@dataclass(frozen=True)
class Row:
    component: str
    python: str | None
    # A kind made once per component (an sdist) has a row of its own, named after it: it is no
    # Python's and no variant's, and beside a pure wheel it would hide in that wheel's slot.
    package_type: str = ""

    @property
    def label(self) -> str:
        if self.package_type:
            return f"{self.component} · {self.package_type}"
        return f"{self.component} · py{self.python}" if self.python else f"{self.component} · no Python"


def row_of(cell: ReportCell) -> Row:
    """The grid row `cell` sits in."""
    own = kind_of(cell.package_type).once_per_component
    return Row(cell.component, None if own else cell.python, cell.package_type if own else "")


@dataclass(frozen=True)
class Column:
    variant: str
    platform: str

    @property
    def label(self) -> str:
        variant = "any variant" if self.variant == ANY else self.variant  # the conda mutex is one per variant
        return f"{variant} · {'any platform' if self.platform == ANY else self.platform}"


@dataclass(frozen=True)
class GridSection:
    """One table of the grid: the release's platforms, or its mobile targets."""

    title: str
    rows: tuple[Row, ...]
    columns: tuple[Column, ...]
    slots: dict[tuple[Row, Column], tuple[ReportCell, ...]]
    # Columns whose cells come in several package types show the type on every cell.
    mixed_types: frozenset[Column]

    def slot(self, row: Row, column: Column) -> tuple[ReportCell, ...]:
        return self.slots.get((row, column), ())

    @property
    def active_columns(self) -> tuple[Column, ...]:
        """The columns where something was built, tested or failed here: what the page shows first."""
        return tuple(c for c in self.columns
                     if any(cell.artifact is not None or cell.state == "failed"
                            for row in self.rows for cell in self.slot(row, c)))

    @property
    def quiet_columns(self) -> tuple[Column, ...]:
        """The columns of cells not built here (unavailable, on a runner, excluded, pending, ruled out)."""
        active = set(self.active_columns)
        return tuple(c for c in self.columns if c not in active)

    def rows_of(self, columns: tuple[Column, ...]) -> tuple[Row, ...]:
        """The rows with a cell in any of `columns`."""
        return tuple(r for r in self.rows if any(self.slot(r, c) for c in columns))


def grid_sections(release: Release, cells: list[ReportCell]) -> list[GridSection]:
    """The platforms' table, then the mobile targets' one; sections without cells are left out."""
    mobile = [c for c in cells if kind_of(c.package_type).on_mobile_targets]
    other = [c for c in cells if not kind_of(c.package_type).on_mobile_targets]
    sections = [_section("Platforms", release, other), _section("Mobile targets", release, mobile)]
    return [s for s in sections if s.slots]


def _section(title: str, release: Release, cells: list[ReportCell]) -> GridSection:
    components = {name: i for i, name in enumerate(release.components)}
    pythons = {p: i for i, p in enumerate(release.pythons)}
    variants = {name: i for i, name in enumerate(release.variants)}
    platforms = {name: i for i, name in enumerate([*release.platforms, *release.mobile_targets])}
    last = len(components) + len(pythons) + len(variants) + len(platforms)  # unknown names sort after known ones

    def row_key(row: Row) -> tuple[int, str, str, int, str]:
        # A component's own-kind rows (its sdist) after its Python rows.
        return (components.get(row.component, last), row.component, row.package_type,
                -1 if row.python is None else pythons.get(row.python, last), row.python or "")

    def column_key(column: Column) -> tuple[int, int, str, str]:
        # The pure column (any x any) comes last: it stands for every other one.
        return (column.platform == ANY, variants.get(column.variant, last), column.variant,
                f"{platforms.get(column.platform, last):04d}{column.platform}")

    slots: dict[tuple[Row, Column], list[ReportCell]] = {}
    for cell in cells:
        key = (row_of(cell), Column(cell.variant, cell.platform))
        slots.setdefault(key, []).append(cell)
    types = Counter((column, c.package_type) for (_, column), held in slots.items() for c in held)
    kinds = Counter(column for column, _ in types)
    return GridSection(
        title=title,
        rows=tuple(sorted({row for row, _ in slots}, key=row_key)),
        columns=tuple(sorted({column for _, column in slots}, key=column_key)),
        slots={key: tuple(sorted(held, key=lambda c: (c.package_type, c.id))) for key, held in slots.items()},
        mixed_types=frozenset(column for column, n in kinds.items() if n > 1))
