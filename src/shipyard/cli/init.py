"""`shipyard init [PROJECT ...]`: a starting release.yaml and feature_status.yaml from the projects'
own metadata (release/starting_release.py), for the Pythons this host has."""

from __future__ import annotations

import argparse
from pathlib import Path

from shipyard.ci.repository_sources import repository_root
from shipyard.cli.shared import console, err_console
from shipyard.host.toolchains.discover import find_interpreters
from shipyard.release.starting_release import PinnedSdistProject, write_starting_release
from shipyard.wheel.project_metadata import backend_requires_python, prepared_metadata


def cmd_init(args: argparse.Namespace) -> int:
    root = Path(args.root)
    pythons = [interpreter.version for interpreter in find_interpreters()]
    projects = [PinnedSdistProject.parse(p) or Path(p) for p in args.projects or ["."]]
    written = write_starting_release(root, projects, pythons,
                                     read_metadata=prepared_metadata, backend_reader=backend_requires_python,
                                     force=args.force, repository=repository_root(root),
                                     progress=lambda text: err_console.print(text, markup=False, highlight=False,
                                                                             soft_wrap=True))
    console.print(f"[green]wrote[/]: {' and '.join(str(p) for p in written)}; they validate. Read the lines "
                  f"marked DECIDE, then run `shipyard build`.")
    return 0


def add_init_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("init", help="write a starting release.yaml and feature_status.yaml from the projects' "
                                    "own metadata")
    p.add_argument("projects", nargs="*", metavar="PROJECT",
                   help="a folder holding a Python project (pyproject.toml or setup.py), inside --root or "
                        "anywhere else, or a released sdist pinned as URL#sha256=HEX (default: .)")
    p.add_argument("--force", action="store_true", help="replace release.yaml and feature_status.yaml if they exist")
    p.set_defaults(func=cmd_init)
