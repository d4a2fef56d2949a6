"""`shipyard publish` and `shipyard promote`: thin layers over publish.run."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rich.table import Table

from shipyard.cli.shared import console, dist_folder, err_console, load_release, positive_int, state_folder

if TYPE_CHECKING:  # requests, which the publishing modules import, takes a fifth of a second: only publishing pays it
    from shipyard.plumbing.retry import RetryPolicy


def _policy(args: argparse.Namespace) -> RetryPolicy:
    from shipyard.plumbing.retry import RetryPolicy

    return RetryPolicy(tries=args.tries, timeout=args.timeout, first_pause=args.first_pause,
                       visible_within=args.visible_within)


def _print_report(report, title: str) -> None:  # noqa: ANN001 - a run.PublishReport
    table = Table(title=title)
    for column in ("target", "uploaded", "unchanged", "users install from"):
        table.add_column(column, overflow="fold")
    for target in report.targets:
        table.add_row(target.target, str(len(target.uploaded)), str(len(target.unchanged)), target.where)
    console.print(table)
    for note in report.gating.marked:
        console.print(f"[red]marked[/]: published to {report.channel} with a "
                      f"{report.gating.blocking_names} feature not proven: ", end="")
        console.print(str(note), markup=False, soft_wrap=True)
    for note in report.gating.other_failures:
        console.print(f"[yellow]{note.status} failure[/]: ", end="")
        console.print(str(note), markup=False, soft_wrap=True)
    for target in report.targets:  # the moving tags: where each went, or why it stayed
        for line in target.moving:
            console.print(f"{target.target}: {line}", markup=False, soft_wrap=True)
    if report.held_back:  # what was built and is not sent is said, never left out silently
        console.print(f"held back from {report.channel}: {', '.join(report.held_back)} ({report.channel} publishes "
                      f"no sdists: an sdist carries its project's own version, not the nightly's development "
                      f"version; test and release publish them)", markup=False, soft_wrap=True)
    uploaded = sum(len(t.uploaded) for t in report.targets)
    unchanged = sum(len(t.unchanged) for t in report.targets)
    console.print(f"{report.version} on {report.channel}: {uploaded} files published, {unchanged} already there")


def _with_stand_ins(args: argparse.Namespace) -> argparse.Namespace:
    """`args` with --targets taken from the environment when not given (release/local_targets.py:
    how `shipyard ci run --targets FILE` reaches the workflow's publish step)."""
    import os

    from shipyard.release.local_targets import TARGETS_VARIABLE, targets_file_for

    given = getattr(args, "targets", None)
    found = targets_file_for(given, os.environ)
    if found and not given:  # said, so that a variable left set never sends a release elsewhere unseen
        err_console.print(f"stand-ins: the targets of {found} ({TARGETS_VARIABLE}) take release.yaml's places",
                          markup=False, highlight=False)
    return argparse.Namespace(**{**vars(args), "targets": found})


def cmd_publish(args: argparse.Namespace) -> int:
    from shipyard.publish.run import PublishRequest, publish

    spec = load_release(_with_stand_ins(args))
    dist, state = dist_folder(args), state_folder(args)
    request = PublishRequest(channel=args.channel, dist=dist, state=state, targets=tuple(args.target or ()),
                             policy=_policy(args))
    report = publish(spec, request, progress=lambda line: err_console.print(f"  {line}", markup=False))
    _print_report(report, f"publish {spec.release.release.name} {report.version} to {args.channel}")
    return 0


def cmd_promote(args: argparse.Namespace) -> int:
    from shipyard.publish.run import PromoteRequest, promote

    spec = load_release(_with_stand_ins(args))
    dist, state = dist_folder(args), state_folder(args)
    request = PromoteRequest(version=args.version, source=args.source, destination=args.destination, dist=dist,
                             state=state, targets=tuple(args.target or ()), policy=_policy(args))
    report = promote(spec, request, progress=lambda line: err_console.print(f"  {line}", markup=False))
    _print_report(report, f"promote {spec.release.release.name} {args.version}: {args.source} → {args.destination}")
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", action="append", help="only this target of release.yaml's publish (repeatable)")
    p.add_argument("--dist", help="folder of manifest.json and the artifacts (default: <root>/dist)")
    p.add_argument("--state", help="where the journal and derived files live (default: <root>/.shipyard)")
    p.add_argument("--tries", type=positive_int, default=5,
                   help="tries per request on 5xx, resets and timeouts (default 5)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds a server may stay silent (default 60)")
    p.add_argument("--first-pause", type=float, default=0.5,
                   help="seconds before the first retry, doubled after each (default 0.5)")
    p.add_argument("--visible-within", type=float, default=120.0,
                   help="seconds an index may take to list an upload (a CDN's cached page) before the publish "
                        "stops saying it is not visible yet (default 120)")


def add_publish_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("publish", help="publish dist/manifest.json's artifacts to a channel of every target, "
                                       "atomically and resumably")
    p.add_argument("--channel", required=True, help="a channel of release.yaml: nightly, test, release")
    _common(p)
    p.set_defaults(func=cmd_publish)
    p = sub.add_parser("promote", help="copy a version from one channel to a later one, byte for byte")
    p.add_argument("version", help="the version to promote, e.g. 1.7.0")
    p.add_argument("--from", dest="source", required=True, help="the channel it is in, e.g. test")
    p.add_argument("--to", dest="destination", required=True, help="the channel it goes to, e.g. release")
    _common(p)
    p.set_defaults(func=cmd_promote)
