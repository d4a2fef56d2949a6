"""The `shipyard` command line: a thin layer over functions that tests call directly."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table

from shipyard.cell_filters import check_filters
from shipyard.errors import ShipyardError
from shipyard.matrix import (
    ANY,
    Cell,
    NotApplicable,
    builder_platform,
    check_github_matrix_size,
    expand,
    not_applicable,
    select,
)
from shipyard.validate import Spec, load_spec

# Without a terminal rich assumes 80 columns, which folds cell ids; logs and CI get more room.
_WIDTH = None if sys.stdout.isatty() else 160
console = Console(highlight=False, width=_WIDTH)
err_console = Console(stderr=True, highlight=False, width=_WIDTH)


def _spec(args: argparse.Namespace) -> Spec:
    return load_spec(Path(args.root))


# --- validate -----------------------------------------------------------------------------

def cmd_validate(args: argparse.Namespace) -> int:
    spec = _spec(args)
    cells = expand(spec.release)
    console.print(f"[green]ok[/]: release.yaml and feature_status.yaml are valid "
                  f"({len(spec.release.components)} components, {len(spec.release.variants)} variants, "
                  f"{len(spec.features.features)} features, {len(cells)} cells"
                  + (f", {n} not applicable by requires-python" if (n := len(not_applicable(spec.release))) else "")
                  + ")")
    if spec.pending_tests:
        console.print(f"[yellow]pending[/]: {len(spec.pending_tests)} test ids point at tests that do "
                      f"not exist yet:")
        for test_id in spec.pending_tests:
            console.print(f"  {test_id}")
    return 0


# --- matrix -------------------------------------------------------------------------------

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


def not_applicable_summary(ruled_out: list[NotApplicable]) -> str:
    """'3 cells (newpy: requires-python >=3.11, 3)': how many, per component and reason."""
    reasons = Counter(f"{n.cell.component}: {n.reason}" for n in ruled_out)
    return (f"{len(ruled_out)} cell{'' if len(ruled_out) == 1 else 's'} ("
            + "; ".join(f"{r}, {k}" for r, k in reasons.items()) + ")")


def cmd_matrix(args: argparse.Namespace) -> int:
    spec = _spec(args)
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


# --- doctor & toolchains ---------------------------------------------------------------------

def cmd_doctor(args: argparse.Namespace) -> int:
    from shipyard.doctor import diagnose
    from shipyard.toolchains.discover import discover_for

    spec = _spec(args)
    check_filters(spec.release, variant=args.variant)
    inventory = discover_for(spec.release)
    rows = diagnose(spec.release, inventory, args.variant)
    table = Table(title=f"doctor: host {inventory.host_platform}")
    table.add_column("cell")
    table.add_column("state")
    table.add_column("toolchain, or what is missing and the fix", overflow="fold")
    for row in rows:
        state = "[green]ready[/]" if row.ready else "[red]missing[/]"
        table.add_row(row.cell.id, state, row.detail)
    console.print(table)
    ready = sum(r.ready for r in rows)
    console.print(f"{ready} of {len(rows)} cells ready on this host")
    ruled_out = [n for n in not_applicable(spec.release)
                 if select([n.cell], variant=args.variant, platform=inventory.host_platform)]
    if ruled_out:  # their Pythons need no interpreter here
        console.print(f"not applicable, not checked: {not_applicable_summary(ruled_out)}")
    others = [c for c in select(expand(spec.release), variant=args.variant)
              if c.platform != inventory.host_platform and c.package_type != "mobile" and not c.is_pure]
    if others:
        by_platform = Counter(c.platform for c in others)
        console.print("not built on this host: " + ", ".join(
            f"{n} {p} cells (GitHub {spec.release.platforms[p].github_runner} runners)"
            for p, n in by_platform.items()))
    return 0


def cmd_toolchain_install(args: argparse.Namespace) -> int:
    from shipyard.errors import UsageError, nearest
    from shipyard.toolchains.cuda_toolkit import install_cuda_toolkit
    from shipyard.toolchains.discover import toolchain_cache
    from shipyard.toolchains.sysroot import install_sysroot, sysroot_recipes

    say = lambda step: console.print(f"  [cyan]•[/] {step}")  # noqa: E731
    sysroots = [r.name for r in sysroot_recipes()]
    if args.name in sysroots:
        sysroot = install_sysroot(args.name, toolchain_cache(), progress=say)
        console.print(f"[green]ready[/]: the {sysroot.name} sysroot at {sysroot.root} (g++ {sysroot.gcc_version}, "
                      f"glibc {sysroot.glibc}; CC={sysroot.cc} CXX={sysroot.cxx})")
        return 0
    spec = _spec(args)
    variant = spec.release.variants.get(args.name)
    if variant is None:
        cuda_variants = [n for n, v in spec.release.variants.items() if v.cuda]
        hint = nearest(args.name, cuda_variants + sysroots)
        raise UsageError(f"no variant named {args.name!r} in release.yaml"
                            + (f"; did you mean {hint!r}?" if hint else "")
                            + f" (CUDA variants: {', '.join(cuda_variants)}; sysroots: {', '.join(sysroots)})")
    if not variant.cuda:
        raise ShipyardError(f"variant {args.name!r} needs no toolkit (it has no cuda version)")
    toolkit = install_cuda_toolkit(variant.cuda, variant.archs, toolchain_cache(), progress=say)
    console.print(f"[green]ready[/]: CUDA {toolkit.version} at {toolkit.root} "
                  f"(nvcc {toolkit.nvcc}, host {toolkit.host_cxx}); verified archs "
                  f"{';'.join(variant.archs)}")
    return 0


# --- build --------------------------------------------------------------------------------

def cmd_build(args: argparse.Namespace) -> int:
    from shipyard.build_report import live_progress, summary_table
    from shipyard.wheel.build_request import BuildRequest, default_test_jobs
    from shipyard.wheel.pipeline import build_variant

    spec = _spec(args)
    check_filters(spec.release, variant=args.variant, python=args.python, component=args.component)
    root = Path(args.root)
    request = BuildRequest(
        variant=args.variant, pythons=tuple(args.python or ()), components=tuple(args.component or ()),
        skip_unavailable=args.skip_unavailable, container=args.container, run_tests=not args.no_tests,
        dist=(Path(args.dist) if args.dist else root / "dist").resolve(),
        state=(Path(args.state) if args.state else root / ".shipyard").resolve(),
        jobs=args.jobs, test_jobs=args.test_jobs or default_test_jobs(),
        test_installer=args.test_installer)
    with live_progress(err_console, f"build {args.variant}") as progress:
        if args.install_toolchain:
            install_toolchain_if_obtainable(spec, args.variant, progress)
        outcomes = build_variant(spec, request, progress)
    console.print(summary_table(outcomes, f"{spec.release.release.name} {spec.release.release.version} "
                                          f"variant {args.variant}"))
    failed = [o for o in outcomes if o.result == "failed"]
    for outcome in failed:
        err_console.print(f"[red]failed[/] {outcome.cell.id}:", end=" ")
        err_console.print(outcome.detail, markup=False, soft_wrap=True)
    # Cells a project's requires-python rules out are neither built nor failures: the exit
    # status ignores them.
    ruled_out = sum(o.result == "not applicable" for o in outcomes)
    counted = len(outcomes) - ruled_out
    tail = f" ({ruled_out} more not applicable)" if ruled_out else ""
    console.print(f"{counted - len(failed)} of {counted} cells ok{tail}; manifest: "
                  f"{request.dist / 'manifest.json'}; index: {request.dist / 'whl'}")
    from shipyard.supply.cli import sign_after_build

    sign_after_build(spec, request.dist)
    return 1 if failed else 0


def cmd_build_mobile(args: argparse.Namespace) -> int:
    from shipyard.build_report import live_progress
    from shipyard.mobile_release import build_mobile_release

    spec = _spec(args)
    check_filters(spec.release, target=args.target)
    root = Path(args.root)
    dist = (Path(args.dist) if args.dist else root / "dist").resolve()
    state = (Path(args.state) if args.state else root / ".shipyard").resolve()
    with live_progress(err_console, "build-mobile") as progress:
        results = build_mobile_release(spec, targets=tuple(args.target or ()), dist=dist, state=state,
                                       progress=progress)
    table = Table(title=f"ember-lite {spec.release.release.version}: mobile targets")
    for column in ("target", "result", "seconds", "package", "notes"):
        table.add_column(column, overflow="fold")
    for result in results:
        style = {"passed": "green", "failed": "red"}.get(result.status, "yellow")
        package = result.package.relative_to(dist).as_posix() if result.package else "-"
        table.add_row(result.target, f"[{style}]{result.status}[/]", f"{result.seconds:.1f}", package,
                      result.reason.strip().splitlines()[0] if result.reason.strip() else "")
    console.print(table)
    failed = [r for r in results if r.status == "failed"]
    for result in failed:
        err_console.print(f"[red]failed[/] {result.target}:", end=" ")
        err_console.print(result.reason, markup=False, soft_wrap=True)
    from shipyard.supply.cli import sign_after_build

    sign_after_build(spec, dist)
    return 1 if failed else 0


def install_toolchain_if_obtainable(spec: Spec, variant_name: str, progress) -> None:  # noqa: ANN001
    """Assemble the sysroot this host's wheels need to keep their glibc promise, and the variant's
    CUDA toolkit, unless present or not obtainable here (CUDA 10.2, a glibc older than any sysroot)."""
    from shipyard.errors import ToolchainMissing
    from shipyard.toolchains.cuda_toolkit import install_cuda_toolkit
    from shipyard.toolchains.discover import discover, toolchain_cache
    from shipyard.toolchains.sysroot import install_sysroot, recipe_for_glibc

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


# --- schema ---------------------------------------------------------------------------------

def cmd_schema(args: argparse.Namespace) -> int:
    from shipyard.errors import UsageError
    from shipyard.spec import FeatureFile, Release

    out = Path(args.out)
    for name, model in (("release.schema.json", Release), ("feature_status.schema.json", FeatureFile)):
        try:
            out.mkdir(parents=True, exist_ok=True)
            (out / name).write_text(json.dumps(model.model_json_schema(), indent=2, sort_keys=True) + "\n")
        except OSError as exc:
            raise UsageError(f"--out {out}: cannot write {name} there ({exc.strerror or exc}); "
                             f"pass a folder shipyard may create or write to") from exc
        console.print(f"wrote {out / name}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shipyard", description=__doc__)
    parser.add_argument("--root", default=".", help="folder holding release.yaml (default: .)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log every external command")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("validate", help="check release.yaml and feature_status.yaml")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("matrix", help="print the build matrix")
    p.add_argument("--format", choices=["table", "json", "github"], default="table")
    p.add_argument("--variant")
    p.add_argument("--platform")
    p.add_argument("--package-type")
    p.add_argument("--component")
    p.add_argument("--cells", action="store_true", help="with --format table, list every cell id")
    p.set_defaults(func=cmd_matrix)

    p = sub.add_parser("doctor", help="what this host can build, and the fix for what it cannot")
    p.add_argument("--variant")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("toolchain", help="manage toolchains in shipyard's cache")
    tsub = p.add_subparsers(dest="toolchain_command", required=True)
    tp = tsub.add_parser("install", help="assemble a CUDA toolkit for a variant (cuda11, cuda12, cuda13), "
                                          "or a sysroot (bullseye: gcc 10, glibc 2.31)")
    tp.add_argument("name")
    tp.set_defaults(func=cmd_toolchain_install)

    p = sub.add_parser("build", help="build, repair, check and test every wheel cell of a variant")
    p.add_argument("--variant", required=True, help="variant name or tag: cpu, cuda11, cu118, …")
    p.add_argument("--python", action="append", help="only this Python (repeatable), e.g. 3.11")
    p.add_argument("--component", action="append", help="only this component (repeatable)")
    p.add_argument("--skip-unavailable", action="store_true",
                   help="report cells whose toolchain is missing as skipped instead of failing")
    p.add_argument("--container", action="store_true",
                   help="build native wheels with cibuildwheel in a local manylinux-style image")
    p.add_argument("--no-tests", action="store_true", help="build and check only")
    p.add_argument("--install-toolchain", action="store_true",
                   help="first assemble what the build needs if it is missing and obtainable here: the "
                        "sysroot for the platform's glibc promise, the variant's CUDA toolkit")
    p.add_argument("--dist", help="output folder (default: <root>/dist)")
    p.add_argument("--state", help="work and cache folder (default: <root>/.shipyard)")
    p.add_argument("--jobs", type=int, default=max(1, os.cpu_count() or 1),
                   help="compile jobs (default: one per core)")
    p.add_argument("--test-jobs", type=_positive_int, default=None, metavar="N",
                   help="cells tested side by side (default: one per core, fewer when memory is short; "
                        "1 tests one cell at a time)")
    p.add_argument("--test-installer", choices=("uv", "pip"), default="uv",
                   help="what makes the test environments: uv, with one real pip resolution per Python "
                        "(default), or pip for every cell")
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("build-mobile", help="build, test and package ember-lite for every mobile target")
    p.add_argument("--target", action="append", help="only this mobile target (repeatable)")
    p.add_argument("--dist", help="output folder (default: <root>/dist)")
    p.add_argument("--state", help="work folder (default: <root>/.shipyard)")
    p.set_defaults(func=cmd_build_mobile)

    from shipyard.conda.cli import add_conda_commands  # it imports this module's console

    add_conda_commands(sub)

    from shipyard.image.cli import add_image_commands

    add_image_commands(sub)

    from shipyard.publish.cli import add_publish_commands

    add_publish_commands(sub)

    from shipyard.manifest_cli import add_manifest_commands

    add_manifest_commands(sub)

    from shipyard.ci.cli import add_ci_commands

    add_ci_commands(sub)

    from shipyard.report.cli import add_report_commands

    add_report_commands(sub)

    from shipyard.supply.cli import add_supply_commands

    add_supply_commands(sub)

    p = sub.add_parser("schema", help="write JSON schemas for both YAML files")
    p.add_argument("--out", default="schemas")
    p.set_defaults(func=cmd_schema)
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args) or 0)
    except ShipyardError as exc:
        err_console.print("[red]error[/]:", end=" ")
        err_console.print(str(exc), markup=False, soft_wrap=True)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
