"""What every command group shares: the consoles, loading the release, the output folders, small
argument types. It imports no other module of the CLI, so every group may import it."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from rich.console import Console

from shipyard.errors import UsageError, nearest
from shipyard.plumbing.input_files import input_error, usable_folder
from shipyard.release.channel_version import NIGHTLY
from shipyard.release.matrix import NotApplicable
from shipyard.release.spec import Spec
from shipyard.release.validate import load_spec
from shipyard.wheel.project_metadata import backend_requires_python

# Without a terminal rich assumes 80 columns, which folds cell ids; logs and CI get more room.
_WIDTH = None if sys.stdout.isatty() else 160
# No emoji codes: `release.yaml:100: key` would print as `release.yaml💯 key` (rich reads ":100:" as one).
console = Console(highlight=False, width=_WIDTH, emoji=False)
err_console = Console(stderr=True, highlight=False, width=_WIDTH, emoji=False)


def load_release(args: argparse.Namespace) -> Spec:
    """The release under `--root`, validated; its publish targets the stand-ins of `--targets`, when given."""
    targets = getattr(args, "targets", None)
    return load_spec(Path(args.root), backend_reader=backend_requires_python,
                     targets_file=Path(targets) if targets else None)


def dist_folder(args: argparse.Namespace) -> Path:
    """`--dist`, or `<root>/dist`; one line (exit 2) when that is a file or below one."""
    return usable_folder((Path(args.dist) if args.dist else Path(args.root) / "dist").resolve(), "--dist",
                         "pass the dist/ folder (a build writes it)")


def state_folder(args: argparse.Namespace) -> Path:
    """`--state`, or `<root>/.shipyard`; one line (exit 2) when that is a file or below one."""
    return usable_folder((Path(args.state) if args.state else Path(args.root) / ".shipyard").resolve(), "--state",
                         "pass a folder for shipyard's work files (default: <root>/.shipyard)")


def out_file(args: argparse.Namespace, default: Path) -> Path:
    """`--out` (a file to write), or `default`; one line (exit 2) when it is a folder or below a file."""
    out = Path(args.out).resolve() if args.out else default
    if out.is_dir():
        raise input_error(out, "--out", "is a folder, not a file", "pass the file to write")
    usable_folder(out.parent, "--out", "pass a file in a folder (the folder is made when missing)")
    return out


def add_publish_channel_option(parser: argparse.ArgumentParser) -> None:
    """`--publish-channel`, the same words on every build command (wheels, conda packages, mobile)."""
    parser.add_argument("--publish-channel", metavar="CHANNEL",
                        help="the channel of release.yaml the artifacts are built for: nightly gives them "
                             "development versions dated by the source commit (1.7.0.dev20261201, "
                             "1.7.0.dev20261201+cpu); any other channel (test, release), and none, the plain version")


def builds_nightly(args: argparse.Namespace, spec: Spec) -> bool:
    """Whether --publish-channel asks for nightly versions; UsageError (exit 2) for a channel
    release.yaml does not name."""
    channel = args.publish_channel
    if channel is not None and channel not in spec.release.channels:
        hint = nearest(channel, spec.release.channels)
        raise UsageError(f"--publish-channel {channel}: release.yaml names no such channel (channels: "
                         f"{', '.join(spec.release.channels)})" + (f"; did you mean {hint!r}?" if hint else ""))
    return channel == NIGHTLY


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def not_applicable_summary(ruled_out: list[NotApplicable]) -> str:
    """'3 cells (newpy: requires-python >=3.11, 3)': how many, per component and reason."""
    reasons = Counter(f"{n.cell.component}: {n.reason}" for n in ruled_out)
    return (f"{len(ruled_out)} cell{'' if len(ruled_out) == 1 else 's'} ("
            + "; ".join(f"{r}, {k}" for r, k in reasons.items()) + ")")
