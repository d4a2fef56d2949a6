"""`shipyard doctor | toolchain install`: what this host can build, and the toolchains it lacks.

`doctor` exits 0 when every cell it checked is ready, HOST_NOT_READY (18) when one is not (errors.py)."""

from __future__ import annotations

import argparse
from collections import Counter

from rich.table import Table

from shipyard.cli.shared import console, load_release, not_applicable_summary
from shipyard.errors import HOST_NOT_READY, OK
from shipyard.release.cell_filters import check_filters
from shipyard.release.kinds import KINDS
from shipyard.release.matrix import expand, not_applicable, select


def cmd_doctor(args: argparse.Namespace) -> int:
    from shipyard.host.doctor import diagnose
    from shipyard.host.toolchains.discover import discover_for

    spec = load_release(args)
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
    here = inventory.platforms_built_here(spec.release)
    ruled_out = [n for n in not_applicable(spec.release)
                 if any(select([n.cell], variant=args.variant, platform=p) for p in here)]
    if ruled_out:  # their Pythons need no interpreter here
        console.print(f"not applicable, not checked: {not_applicable_summary(ruled_out)}")
    others = [c for c in select(expand(spec.release), variant=args.variant)
              if c.platform not in here and not KINDS[c.package_type].on_mobile_targets
              and not c.is_pure]
    if others:
        by_platform = Counter(c.platform for c in others)
        console.print("not built on this host: " + ", ".join(
            f"{n} {p} cells (GitHub {spec.release.platforms[p].github_runner} runners)"
            for p, n in by_platform.items()))
    # A CI step or a script can ask the host before a build: not ready is a status, not only words.
    return OK if ready == len(rows) else HOST_NOT_READY


def cmd_toolchain_install(args: argparse.Namespace) -> int:
    from shipyard.errors import UsageError, nearest
    from shipyard.host.toolchains.obtain import obtain_cuda_toolkit, obtain_sysroot, obtain_zig_compiler
    from shipyard.release.build_routes import ZIG_OLDEST_GLIBC, sysroot_recipes, zig_target_named

    say = lambda step: console.print(f"  [cyan]•[/] {step}")  # noqa: E731
    sysroots = [r.name for r in sysroot_recipes()]
    if args.name in sysroots:
        sysroot = obtain_sysroot(args.name, say)
        console.print(f"[green]ready[/]: the {sysroot.name} sysroot at {sysroot.root} (g++ {sysroot.gcc_version}, "
                      f"glibc {sysroot.glibc}; CC={sysroot.cc} CXX={sysroot.cxx})")
        return 0
    if args.name.startswith("zig-"):
        target = zig_target_named(args.name)
        if target is None:
            raise UsageError(f"{args.name!r} names no glibc the zig route targets: zig-<glibc> with a glibc from "
                             f"{ZIG_OLDEST_GLIBC} up to the oldest sysroot's (e.g. zig-{ZIG_OLDEST_GLIBC}); newer "
                             f"promises build with a sysroot ({', '.join(sysroots)})")
        zig = obtain_zig_compiler(target, say)
        console.print(f"[green]ready[/]: {zig.name} at {zig.root} (clang {zig.clang_version}; CC={zig.cc} "
                      f"CXX={zig.cxx})")
        return 0
    spec = load_release(args)
    variant = spec.release.variants.get(args.name)
    if variant is None:
        cuda_variants = [n for n, v in spec.release.variants.items() if v.cuda]
        hint = nearest(args.name, cuda_variants + sysroots)
        raise UsageError(f"no variant named {args.name!r} in release.yaml"
                            + (f"; did you mean {hint!r}?" if hint else "")
                            + f" (CUDA variants: {', '.join(cuda_variants)}; sysroots: {', '.join(sysroots)}; "
                              "zig for an older glibc: zig-2.17 …)")
    if not variant.cuda:
        raise UsageError(f"variant {args.name!r} needs no toolkit (it has no cuda version)")
    toolkit = obtain_cuda_toolkit(variant, say)
    console.print(f"[green]ready[/]: CUDA {toolkit.version} at {toolkit.root} "
                  f"(nvcc {toolkit.nvcc}, host {toolkit.host_cxx}); verified archs "
                  f"{';'.join(variant.archs)}")
    return 0



def add_doctor_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("doctor", help="what this host can build, and the fix for what it cannot; exits 18 when "
                                      "a cell of this host is not ready")
    p.add_argument("--variant", help="only this variant's cells (its name or tag; default: every variant)")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("toolchain", help="manage toolchains in shipyard's cache")
    tsub = p.add_subparsers(dest="toolchain_command", required=True)
    tp = tsub.add_parser("install", help="assemble a CUDA toolkit for a variant (cuda11, cuda12, cuda13), "
                                          "a sysroot (bullseye: gcc 10, glibc 2.31), or zig's clang for an "
                                          "older glibc (zig-2.17: manylinux2014, zig-2.28: manylinux_2_28)")
    tp.add_argument("name", help="a CUDA variant of release.yaml (cuda11 …), a sysroot (bullseye) or zig-<glibc>")
    tp.set_defaults(func=cmd_toolchain_install)
