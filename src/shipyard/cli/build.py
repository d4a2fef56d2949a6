"""`shipyard build | build-mobile`: every wheel cell of a variant, every mobile target."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rich.table import Table

from shipyard.cli.shared import (
    add_publish_channel_option,
    builds_nightly,
    console,
    dist_folder,
    err_console,
    load_release,
    positive_int,
    state_folder,
)
from shipyard.errors import STABLE_FEATURE_FAILED, UsageError
from shipyard.host.toolchains.obtain import install_toolchain_if_obtainable
from shipyard.release.cell_filters import check_filters
from shipyard.supply.signing import sign_after_build


def cmd_build(args: argparse.Namespace) -> int:
    from shipyard.cli.build_report import live_progress, summary_table
    from shipyard.wheel.build_request import BuildRequest, build_exit_status, default_test_jobs
    from shipyard.wheel.variant_wheels import build_variant

    spec = load_release(args)
    check_filters(spec.release, variant=args.variant, python=args.python, component=args.component,
                  platform=args.platform, test_python=args.test_python)
    _check_test_pythons(args)
    request = BuildRequest(
        variant=args.variant, pythons=tuple(args.python or ()), components=tuple(args.component or ()),
        platforms=tuple(args.platform or ()), skip_unavailable=args.skip_unavailable, container=args.container,
        run_tests=not args.no_tests,
        test_pythons=tuple(args.test_python or ()),
        dist=dist_folder(args), state=state_folder(args),
        jobs=args.jobs, test_jobs=args.test_jobs or default_test_jobs(),
        test_installer=args.test_installer, nightly=builds_nightly(args, spec), wheelhouse=_wheelhouse(args))
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
    # Cells left out by --test-python, and those built only for the selection's tests (--component),
    # are built and checked, not failures, and not ok either.
    untested = sum(o.result == "not tested" for o in outcomes)
    if untested:
        why = [f"--test-python {' '.join(request.test_pythons)}"] if request.test_pythons else []
        if any(o.cell.component not in request.components for o in outcomes if request.components):
            why.append("dependencies of --component")
        tail += f"; {untested} built and checked, not tested ({'; '.join(why)})"
    console.print(f"{counted - len(failed) - untested} of {counted} cells ok{tail}; manifest: "
                  f"{request.dist / 'manifest.json'}; index: {request.dist / 'whl'}")
    sign_after_build(spec, request.dist, console, err_console)
    return build_exit_status(outcomes)


def _wheelhouse(args: argparse.Namespace) -> Path | None:
    """--wheelhouse, checked to be a folder (not with --container: its wheels are built already)."""
    if args.wheelhouse is None:
        return None
    if args.container:
        raise UsageError(f"--wheelhouse {args.wheelhouse}: its wheels are built already, --container builds them; "
                         f"drop one of the two")
    folder = Path(args.wheelhouse)
    if not folder.is_dir():
        raise UsageError(f"--wheelhouse {args.wheelhouse}: no such folder; pass the folder cibuildwheel wrote its "
                         f"wheels to (--output-dir)")
    return folder.resolve()


def _check_test_pythons(args: argparse.Namespace) -> None:
    """--test-python names Pythons this build builds and tests: not with --no-tests, and within --python."""
    if not args.test_python:
        return
    if args.no_tests:
        raise UsageError(f"--test-python {args.test_python[0]}: --no-tests runs no tests at all; drop one of the two")
    outside = [p for p in args.test_python if args.python and p not in args.python]
    if outside:
        raise UsageError(f"--test-python {outside[0]}: not a Python this build selects (--python "
                         f"{' '.join(args.python)}); add --python {outside[0]}, or test one of those")


def cmd_build_mobile(args: argparse.Namespace) -> int:
    from shipyard.cli.build_report import live_progress
    from shipyard.mobile.release import build_mobile_release

    spec = load_release(args)
    check_filters(spec.release, target=args.target)
    dist, state = dist_folder(args), state_folder(args)
    with live_progress(err_console, "build-mobile") as progress:
        results = build_mobile_release(spec, targets=tuple(args.target or ()), dist=dist, state=state,
                                       progress=progress, nightly=builds_nightly(args, spec))
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
    sign_after_build(spec, dist, console, err_console)
    # The workflows' mobile lane judges this status as `shipyard build`'s (ci/steps.py): the targets
    # that passed are recorded and uploaded, then the job fails.
    return STABLE_FEATURE_FAILED if failed else 0


def add_build_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("build", help="build, repair, check and test every wheel cell of a variant")
    p.add_argument("--variant", required=True, help="variant name or tag: cpu, cuda11, cu118, …")
    p.add_argument("--python", action="append", help="only this Python (repeatable), e.g. 3.11")
    p.add_argument("--component", action="append", help="only this component (repeatable)")
    p.add_argument("--platform", action="append",
                   help="only this platform (repeatable; default: every platform this host builds: its own, and "
                        "another of the same OS and architecture with an older glibc promise)")
    p.add_argument("--skip-unavailable", action="store_true",
                   help="report cells whose toolchain is missing as skipped instead of failing")
    p.add_argument("--container", action="store_true",
                   help="build native wheels with cibuildwheel in a local manylinux-style image")
    p.add_argument("--wheelhouse", metavar="FOLDER",
                   help="take the native cells' wheels from this folder (cibuildwheel's, repaired) instead of building "
                        "them; they are labelled, checked, tested and recorded as built ones")
    p.add_argument("--no-tests", action="store_true", help="build and check only")
    p.add_argument("--test-python", action="append", metavar="PYTHON",
                   help="test only the cells of this Python (repeatable); every selected Python is still built "
                        "and checked, and the others are recorded as not tested")
    p.add_argument("--install-toolchain", action="store_true",
                   help="first assemble what the build needs if it is missing and obtainable here: the "
                        "sysroot for the platform's glibc promise, the variant's CUDA toolkit")
    p.add_argument("--dist", help="output folder (default: <root>/dist)")
    p.add_argument("--state", help="work and cache folder (default: <root>/.shipyard)")
    p.add_argument("--jobs", type=int, default=max(1, os.cpu_count() or 1),
                   help="compile jobs (default: one per core)")
    p.add_argument("--test-jobs", type=positive_int, default=None, metavar="N",
                   help="cells tested side by side (default: one per core, fewer when memory is short; "
                        "1 tests one cell at a time)")
    p.add_argument("--test-installer", choices=("uv", "pip"), default="uv",
                   help="what makes the test environments: uv, with one real pip resolution per Python "
                        "(default), or pip for every cell")
    add_publish_channel_option(p)
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("build-mobile", help="build, test and package ember-lite for every mobile target")
    p.add_argument("--target", action="append", help="only this mobile target (repeatable)")
    p.add_argument("--dist", help="output folder (default: <root>/dist)")
    p.add_argument("--state", help="work folder (default: <root>/.shipyard)")
    add_publish_channel_option(p)
    p.set_defaults(func=cmd_build_mobile)
