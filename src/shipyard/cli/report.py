"""`shipyard report` and `shipyard notes`: thin layers over report.document, .html, .terminal and .notes."""

from __future__ import annotations

import argparse

from shipyard.cli.shared import console, dist_folder, load_release, out_file


def _report(args: argparse.Namespace):  # noqa: ANN202 - a ReleaseReport, imported lazily with the rest
    from shipyard.host.toolchains.discover import discover_for
    from shipyard.report.document import build_report

    spec = load_release(args)
    return spec, build_report(spec, dist_folder(args) / "manifest.json", discover_for(spec.release))


def cmd_report(args: argparse.Namespace) -> int:
    spec, report = _report(args)
    if args.format == "text":
        from shipyard.report.terminal import terminal_view

        console.print(terminal_view(report))
        return 0
    from shipyard.report.get_started import write_get_started
    from shipyard.report.html import STATE_NAMES, write_html

    dist = dist_folder(args)
    out = out_file(args, dist / "report" / "index.html")
    page = write_get_started(spec.release, report.manifest, out.with_name("get-started.html"), spec.statuses)
    write_html(report, out, dist, get_started=page)
    counts = ", ".join(f"{n} {STATE_NAMES[state]}" for state, n in report.counts())
    console.print(f"wrote {out} ({len(report.cells)} cells: {counts})")
    console.print(f"wrote {page} (the install command for every OS, package manager, compute platform and channel)")
    return 0


def cmd_notes(args: argparse.Namespace) -> int:
    from shipyard.report.notes import release_notes, write_notes
    from shipyard.report.previous import load_previous

    spec, report = _report(args)
    previous = load_previous(spec.root, args.previous) if args.previous else None
    out = write_notes(release_notes(report, spec.features, previous),
                      out_file(args, dist_folder(args) / "RELEASE_NOTES.md"))
    console.print(f"wrote {out}" + (f" (changes since {previous.label})" if previous else ""))
    return 0


def add_report_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("report", help="the release report: dist/report/index.html and get-started.html, or the "
                                      "grid in the terminal")
    p.add_argument("--format", choices=["html", "text"], default="html",
                   help="html: write one offline page (default); text: print the grid here")
    p.add_argument("--dist", help="folder of manifest.json (default: <root>/dist)")
    p.add_argument("--out", help="with --format html, the file to write (default: <dist>/report/index.html)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("notes", help="release notes from the manifest and feature_status.yaml: dist/RELEASE_NOTES.md")
    p.add_argument("--previous", metavar="REF_OR_FILE",
                   help="the previous release: a git ref (its feature_status.yaml) or a feature_status.yaml file; "
                        "adds its new features and status changes")
    p.add_argument("--dist", help="folder of manifest.json (default: <root>/dist)")
    p.add_argument("--out", help="the file to write (default: <dist>/RELEASE_NOTES.md)")
    p.set_defaults(func=cmd_notes)
