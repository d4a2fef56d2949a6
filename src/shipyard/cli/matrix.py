"""`shipyard validate | matrix | schema`: the release description, its cells, its JSON schemas."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from rich.table import Table

from shipyard.cli.shared import console, err_console, load_release, not_applicable_summary
from shipyard.plumbing.wording import counted
from shipyard.release.cell_filters import check_filters
from shipyard.release.matrix import (
    ANY,
    Cell,
    NotApplicable,
    builder_platform,
    check_github_matrix_size,
    expand,
    not_applicable,
    select,
)
from shipyard.release.spec import Spec
from shipyard.release.validate import pipeline_notes
from shipyard.wheel.project_metadata import backend_warnings_log


def cmd_validate(args: argparse.Namespace) -> int:
    spec = load_release(args)
    cells = expand(spec.release)
    console.print(f"[green]ok[/]: release.yaml and feature_status.yaml are valid "
                  f"({counted(len(spec.release.components), 'component')}, "
                  f"{counted(len(spec.release.variants), 'variant')}, "
                  f"{counted(len(spec.features.features), 'feature')}, {counted(len(cells), 'cell')}"
                  + (f", {n} not applicable by requires-python" if (n := len(not_applicable(spec.release))) else "")
                  + ")")
    if spec.pending_tests:
        console.print(f"[yellow]pending[/]: {counted(len(spec.pending_tests), 'test id')} "
                      f"{'points at a test that does' if len(spec.pending_tests) == 1 else 'point at tests that do'} "
                      f"not exist yet:")
        for test_id in spec.pending_tests:
            console.print(f"  {test_id}")
    for name, component in spec.release.components.items():
        if component.is_python and (log := backend_warnings_log(component.source_dir(spec.root))):
            console.print(f"[yellow]note[/]: {name}'s build backend gave warnings while its metadata was read; "
                          f"kept in {log}", soft_wrap=True)
    for note in pipeline_notes(spec.release):
        console.print(f"[yellow]note[/]: {note}", soft_wrap=True)
    return 0


def github_include(spec: Spec, cells: list[Cell]) -> dict[str, list[dict[str, str]]]:
    """The GitHub Actions `strategy.matrix` object for these cells."""
    release = spec.release
    include = []
    for cell in cells:
        cuda = "" if cell.is_pure else release.variants[cell.variant].cuda or ""
        builder = builder_platform(release, cell)  # runner names live in release.yaml only
        include.append({
            "id": cell.id, "component": cell.component, "variant": cell.variant,
            "variant_tag": cell.variant_tag, "cuda": cuda, "platform": cell.platform,
            "os": builder.os, "runner": builder.github_runner, "python": cell.python or "",
            "package_type": cell.package_type,
            # The Pythons the job needs for the cell's tests: an abi3 cell's every one (its build's first).
            "test_pythons": " ".join(cell.test_pythons),
        })
    return {"include": include}


def matrix_table(spec: Spec, cells: list[Cell]) -> Table:
    """Counts of cells per platform (rows) and variant (columns), with totals."""
    release = spec.release
    variants = [v for v in [*release.variants, ANY] if any(c.variant == v for c in cells)]
    platforms = [p for p in [*release.platforms, *release.mobile_targets, ANY] if any(c.platform == p for c in cells)]
    counts = Counter((c.variant, c.platform) for c in cells)
    table = Table(title=f"{release.release.name} {release.release.version}: {len(cells)} cells")
    table.add_column("platform")
    for variant in variants:
        table.add_column(variant, justify="right")
    table.add_column("total", justify="right", style="bold")
    for platform in platforms:
        row = [counts[(v, platform)] for v in variants]
        table.add_row(platform, *map(str, row), str(sum(row)))
    per_variant = [sum(counts[(v, p)] for p in platforms) for v in variants]
    table.add_row("total", *map(str, per_variant), str(len(cells)), style="bold")
    return table


def _json_cells(cells: list[Cell], ruled_out: list[NotApplicable]) -> list[dict[str, str | None]]:
    """`matrix --format json`: every cell to build, then every cell its project rules out, each
    with its status ("build" or "not applicable") and, for the latter, the reason."""
    def entry(cell: Cell, status: str, reason: str | None) -> dict[str, str | None]:
        return {**cell.selector_fields(), "id": cell.id, "variant_tag": cell.variant_tag, "python": cell.python,
                "status": status, "reason": reason}
    return [*(entry(c, "build", None) for c in cells), *(entry(n.cell, "not applicable", n.reason) for n in ruled_out)]


def cmd_matrix(args: argparse.Namespace) -> int:
    spec = load_release(args)
    check_filters(spec.release, variant=args.variant, platform=args.platform, package_type=args.package_type,
                  component=args.component)
    filters = {"variant": args.variant, "platform": args.platform, "package_type": args.package_type,
               "component": args.component}
    cells = select(expand(spec.release), **filters)
    ruled_out = [n for n in not_applicable(spec.release) if select([n.cell], **filters)]
    if args.format == "github":
        check_github_matrix_size(cells)
    if args.format == "json":
        print(json.dumps(_json_cells(cells, ruled_out), indent=2))
    elif args.format == "github":
        # A job for a cell its project rules out could only say so: it is not scheduled. stdout
        # stays the matrix alone (a workflow reads it); the note goes to stderr.
        print(json.dumps(github_include(spec, cells), separators=(",", ":")))
        if ruled_out:
            err_console.print(f"not applicable, not scheduled: {not_applicable_summary(ruled_out)}; "
                              f"`shipyard matrix --cells` lists them")
    else:
        console.print(matrix_table(spec, cells))
        if args.cells:
            for cell in cells:
                console.print(f"  {cell.id}")
            for skipped in ruled_out:
                console.print(f"  {skipped.cell.id}: not applicable ({skipped.reason})", style="dim")
        elif ruled_out:
            console.print(f"not applicable, not counted: {not_applicable_summary(ruled_out)}; --cells lists them")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from shipyard.errors import UsageError
    from shipyard.release.json_schemas import feature_status_schema, release_schema

    out = Path(args.out)
    for name, schema in (("release.schema.json", release_schema), ("feature_status.schema.json",
                                                                    feature_status_schema)):
        try:
            out.mkdir(parents=True, exist_ok=True)
            (out / name).write_text(json.dumps(schema(), indent=2, sort_keys=True) + "\n")
        except OSError as exc:
            raise UsageError(f"--out {out}: cannot write {name} there ({exc.strerror or exc}); "
                             f"pass a folder shipyard may create or write to") from exc
        console.print(f"wrote {out / name}")
    return 0



def add_matrix_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("validate", help="check release.yaml and feature_status.yaml")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("matrix", help="print the build matrix")
    p.add_argument("--format", choices=["table", "json", "github"], default="table",
                   help="table: counts by component and variant (default); json: every cell with its status and, "
                        "for a cell its project rules out, the reason; github: a GitHub Actions matrix")
    p.add_argument("--variant", help="only this variant's cells (its name or tag: cpu, cuda11, cu118)")
    p.add_argument("--platform", help="only this platform's cells (a key of release.yaml's platforms)")
    p.add_argument("--package-type", help="only cells of this package type: wheel, conda, mobile or docker")
    p.add_argument("--component", help="only this component's cells (a key of release.yaml's components)")
    p.add_argument("--cells", action="store_true", help="with --format table, list every cell id")
    p.set_defaults(func=cmd_matrix)


def add_schema_command(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("schema", help="write JSON schemas for both YAML files")
    p.add_argument("--out", default="schemas", help="the folder the JSON schemas are written to (default: schemas)")
    p.set_defaults(func=cmd_schema)
