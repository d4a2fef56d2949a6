"""`shipyard manifest merge|gate`: the one record of a release built by many jobs."""

from __future__ import annotations

import argparse
from pathlib import Path

from shipyard.cli.shared import console, dist_folder, load_release


def cmd_manifest_merge(args: argparse.Namespace) -> int:
    from shipyard.conda.channel import place_packages
    from shipyard.record.merge import merge_fragments
    from shipyard.release.kinds import CONDA, WHEEL
    from shipyard.release.release_tags import released_components
    from shipyard.wheel.index import place_wheels

    spec = load_release(args)
    dist = dist_folder(args)
    released = released_components(spec.release, args.ref)
    report = merge_fragments([Path(f) for f in args.fragment], dist, release=spec.release.release.name,
                             version=spec.release.release.version,
                             place={WHEEL.name: place_wheels, CONDA.name: place_packages}, components=released)
    if report.left_out:
        console.print(f"{args.ref} releases {', '.join(sorted(released or ()))} alone: left out "
                      f"{', '.join(report.left_out)} (built for its tests)")
    console.print(f"merged {report.fragments} fragments ({report.records} records: {report.wheels} wheel files, "
                  f"{report.conda_packages} conda packages, {report.other_files} other files); "
                  f"{dist / 'manifest.json'} holds {report.total_artifacts} artifacts")
    return 0


def cmd_manifest_gate(args: argparse.Namespace) -> int:
    from shipyard.errors import UsageError
    from shipyard.publish.run import load_manifest
    from shipyard.record.gate import gate

    spec = load_release(args)
    channel = spec.release.channels.get(args.channel)
    if channel is None:
        raise UsageError(f"--channel {args.channel}: release.yaml's channels are {', '.join(spec.release.channels)}")
    manifest = load_manifest(spec, dist_folder(args))
    gating = gate(channel, manifest.artifacts, statuses=spec.statuses)  # raises GateBlocked on a block channel
    for note in gating.marked:
        console.print("[red]marked[/]: ", end="")
        console.print(str(note), markup=False, soft_wrap=True)
    for note in gating.other_failures:
        console.print(f"[yellow]{note.status} failure[/]: ", end="")
        console.print(str(note), markup=False, soft_wrap=True)
    unproven = len({note.artifact for note in gating.blocking_failures})
    said = (f"{unproven} of them not proven for {gating.blocking_names}, marked" if unproven
            else f"every {gating.blocking_names} feature proven")
    console.print(f"[green]gate passed[/]: {len(manifest.artifacts)} artifacts may go to {channel.name} "
                  f"(gate: {channel.gate}; {said})")
    return 0


def add_manifest_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("manifest", help="merge manifest fragments of separate build jobs; gate a channel on them")
    msub = p.add_subparsers(dest="manifest_command", required=True)
    m = msub.add_parser("merge", help="merge build jobs' dist/ folders (artifacts + manifest.json) into one dist/")
    m.add_argument("fragment", nargs="+", help="a fragment folder: a job's dist/ (holds manifest.json)")
    m.add_argument("--dist", help="the folder to merge into (default: <root>/dist)")
    m.add_argument("--ref", help="the run's git ref (GITHUB_REF): a component tag (<component>-v<version>) merges "
                                 "that component's records and files only; anything else merges all")
    m.set_defaults(func=cmd_manifest_merge)
    g = msub.add_parser("gate", help="fail when the manifest has a failing feature of a blocking status (stable) "
                                     "and the channel blocks")
    g.add_argument("--channel", required=True, help="the channel the artifacts would go to (a key of release.yaml's "
                   "channels: its blocking statuses decide)")
    g.add_argument("--dist", help="folder of manifest.json (default: <root>/dist)")
    g.set_defaults(func=cmd_manifest_gate)
