"""`shipyard conda …`: the bootstrap channel, the variant builds, and the features of a channel."""

from __future__ import annotations

import argparse
import json
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
    not_applicable_summary,
    state_folder,
)
from shipyard.errors import STABLE_FEATURE_FAILED
from shipyard.release.cell_filters import check_filters

# --- conda features ---------------------------------------------------------------------------

def cmd_conda_features(args: argparse.Namespace) -> int:
    from shipyard.conda.features import list_channel_features
    from shipyard.redaction import redact

    packages = list_channel_features(args.channel)
    if args.json:
        print(json.dumps([p.to_json() for p in packages], indent=2))
        return 0
    table = Table(title=f"features in {redact(args.channel)}")
    for column in ("package", "version", "build", "variant", "feature", "status"):
        table.add_column(column, overflow="fold")
    colours = {"stable": "green", "beta": "yellow", "prototype": "magenta"}  # another vocabulary's: white
    bare = []
    for package in packages:
        if not package.features:
            bare.append(package.name)
        for feature in package.features:
            status = f"[{colours.get(feature.status, 'white')}]{feature.status}[/]"
            if feature.platform:
                status += f" ({feature.platform})"
            table.add_row(package.name, package.version, package.build, package.variant_tag or "", feature.id, status)
    console.print(table)
    console.print(f"{len(packages)} packages, {len(packages) - len(bare)} with features"
                  + (f"; without: {', '.join(sorted(set(bare)))}" if bare else ""))
    return 0


def _add_conda_features(conda_sub: argparse._SubParsersAction) -> None:
    p = conda_sub.add_parser("features", help="list each package of a conda channel with its features and statuses")
    p.add_argument("--channel", required=True,
                   help="channel URL (http(s)://…/, with /t/<token>/ if it needs one; file:///…) or folder")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_conda_features)


# --- conda ----------------------------------------------------------------------------------

def cmd_conda_bootstrap(args: argparse.Namespace) -> int:
    import time

    from shipyard.cli.build_report import live_progress
    from shipyard.conda.bootstrap import ensure_bootstrap_channel, release_requirements
    from shipyard.conda.bootstrap_plan import bootstrap_cuda_versions
    from shipyard.errors import UsageError

    spec = load_release(args)
    check_filters(spec.release, python=args.python)
    release_cuda = [v.cuda for v in spec.release.variants.values() if v.cuda]
    if args.cuda:
        unknown = [c for c in args.cuda if c not in release_cuda]
        if unknown:
            raise UsageError(f"--cuda {', '.join(unknown)}: no variant of release.yaml uses that CUDA version "
                             f"(they use {', '.join(dict.fromkeys(release_cuda))})")
    pythons = args.python or list(spec.release.pythons)
    cuda_versions = args.cuda or bootstrap_cuda_versions(release_cuda)
    console.print(f"bootstrap channel: Pythons {', '.join(pythons)}; CUDA runtimes "
                  f"{', '.join(cuda_versions) or 'none'}")
    start = time.monotonic()
    with live_progress(err_console, "conda bootstrap") as progress:
        channel = ensure_bootstrap_channel(pythons=pythons, cuda_versions=cuda_versions, progress=progress,
                                           requirements=release_requirements(spec),
                                           refresh=args.refresh)
    seconds = time.monotonic() - start
    size = sum(f.stat().st_size for f in channel.path.glob("*/*.conda"))
    console.print(f"[green]ready[/]: {channel.path}")
    console.print(f"  {len(channel.packages)} packages, {size / 1e6:.1f} MB, "
                  + ("cached" if channel.cached else f"built in {seconds:.0f} s"))
    console.print(f"  channel URL: {channel.url()}")
    return 0


def cmd_conda_build(args: argparse.Namespace) -> int:
    from shipyard.cli.build_report import live_progress
    from shipyard.conda.variant_packages import CondaRunRequest, run_conda_variant

    spec = load_release(args)
    check_filters(spec.release, variant=args.variant, python=args.python, component=args.component)
    request = CondaRunRequest(
        variant=args.variant, channels=tuple(_channel_url(c) for c in args.channel or ()),
        bootstrap=args.bootstrap_channel,
        pythons=tuple(args.python or ()), components=tuple(args.component or ()),
        state=state_folder(args), dist=dist_folder(args), jobs=args.jobs, tests=not args.no_tests,
        nightly=builds_nightly(args, spec),
        **({"test_jobs": args.test_jobs} if args.test_jobs else {}))
    with live_progress(err_console, f"conda {args.variant}") as progress:
        run = run_conda_variant(spec, request, progress)
    table = Table(title=f"conda packages, variant {args.variant}")
    for column in ("package", "build", "tests"):
        table.add_column(column, overflow="fold")
    for cell in run.cells:
        done = "cached" if cell.package.result == "cached" else f"built in {cell.package.seconds:.0f} s"
        if cell.untested:  # built only because a selected component depends on it
            verdict = f"[yellow]{cell.untested}[/]"
        elif cell.test is None:
            verdict = "(no tests of its own)" if cell.python is None else "not run (--no-tests)"
        elif cell.test.passed:
            verdict = (f"[green]passed[/] (Python {cell.python}, "
                       + ("cached)" if cell.test_cached else f"{cell.test.seconds:.0f} s)"))
        else:
            verdict = "[red]failed[/]: " + "; ".join(cell.test.problems)
        if cell.withheld:  # a core package whose dependents all failed
            verdict += f"; [red]not published[/]: {cell.withheld}"
        table.add_row(cell.package.label, done, verdict)
    for skipped in run.not_applicable:  # ruled out by the component's requires-python: never a failure
        table.add_row(skipped.cell.id, f"[dim]not applicable ({skipped.reason})[/]", "[dim]not built[/]")
    console.print(table)
    if run.not_applicable:
        console.print(f"not applicable, not built: {not_applicable_summary(list(run.not_applicable))}")
    dist = request.dist / "conda"
    console.print(f"{len(run.published)} packages in {dist} (indexed); dependencies from "
                  f"{', '.join(run.channels)}")
    from shipyard.supply.signing import sign_after_build

    sign_after_build(spec, request.dist, console, err_console)
    return 0 if run.passed else STABLE_FEATURE_FAILED  # built; a tested package's tests said no


def _channel_url(channel: str) -> str:
    """A channel as rattler takes it: a local folder becomes its file:// URL."""
    return Path(channel).resolve().as_uri() if "://" not in channel and Path(channel).is_dir() else channel


def _add_conda_build(conda_sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = conda_sub.add_parser("build", help="build a variant's conda packages with rattler-build, test each in "
                                           "a solved environment, publish those that pass into <dist>/conda")
    p.add_argument("--variant", required=True, help="variant name or tag: cpu, cuda11, cu118, …")
    p.add_argument("--python", action="append", help="only this Python (repeatable), e.g. 3.11")
    p.add_argument("--component", action="append", help="only this component (repeatable)")
    p.add_argument("--channel", action="append", metavar="URL",
                   help="a channel to take dependencies from: a URL or a local folder (repeatable, in "
                        "priority order; default: release.yaml's conda.channels)")
    p.add_argument("--bootstrap-channel", action="store_true",
                   help="make (or reuse) the bootstrap channel from this host's pyenv Pythons (linux-64 only, "
                        "`shipyard conda bootstrap`) and search it first, standing in for conda-forge where "
                        "no conda channel can be reached")
    p.add_argument("--state", help="work and cache folder (default: <root>/.shipyard)")
    p.add_argument("--dist", help="output folder (default: <root>/dist): the channel is <dist>/conda")
    p.add_argument("--no-tests", action="store_true", help="build only; publish without testing")
    p.add_argument("--test-jobs", type=int, default=None, metavar="N",
                   help="packages tested side by side (default: one per core, fewer when memory is short)")
    p.add_argument("--jobs", type=int, default=max(1, os.cpu_count() or 1),
                   help="compile jobs (default: one per core)")
    add_publish_channel_option(p)
    p.set_defaults(func=cmd_conda_build)


def add_conda_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("conda", help="conda packages: the bootstrap channel, builds, channels and their features")
    csub = p.add_subparsers(dest="conda_command", required=True)
    _add_conda_build(csub)
    _add_conda_features(csub)
    cp = csub.add_parser("bootstrap", help="build (or reuse) the local channel of python, numpy, pytest, the "
                                           "CUDA runtime ... that stands in for conda-forge here")
    cp.add_argument("--python", action="append", help="only this Python (repeatable; default: release.yaml's)")
    cp.add_argument("--cuda", action="append",
                    help="only this CUDA runtime (repeatable; default: the release's CUDA versions whose runtime "
                         "wheel shipyard knows)")
    cp.add_argument("--refresh", action="store_true",
                    help="ask PyPI and Debian again for the newest wheels and .debs instead of reusing the "
                         "last resolution")
    cp.set_defaults(func=cmd_conda_bootstrap)
