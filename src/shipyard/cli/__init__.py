"""The `shipyard` command line: a thin layer over functions that tests call directly."""

from __future__ import annotations

import argparse
import functools
import logging
import traceback

from shipyard.cli.build import add_build_commands
from shipyard.cli.ci import add_ci_commands
from shipyard.cli.conda import add_conda_commands
from shipyard.cli.doctor import add_doctor_commands
from shipyard.cli.image import add_image_commands
from shipyard.cli.init import add_init_commands
from shipyard.cli.manifest import add_manifest_commands
from shipyard.cli.matrix import add_matrix_commands, add_schema_command
from shipyard.cli.publish import add_publish_commands
from shipyard.cli.report import add_report_commands
from shipyard.cli.shared import err_console
from shipyard.cli.supply import add_supply_commands
from shipyard.cli.variants import add_variants_commands
from shipyard.errors import CRASHED, ShipyardError
from shipyard.redaction import redacted_output


class _PrintVersion(argparse.Action):
    """`--version`: the installed distribution's version, looked up only when asked."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("shipyard")
        except PackageNotFoundError:
            found = "(not installed: run from a source tree)"
        print(f"shipyard {found}")  # on stdout, as argparse's own version action prints it
        parser.exit()


def _global_options(parser: argparse.ArgumentParser, *, after_the_command: bool) -> None:
    unset = argparse.SUPPRESS
    parser.add_argument("--root", default=unset if after_the_command else ".",
                        help="folder holding release.yaml (default: .)")
    parser.add_argument("--targets", default=unset if after_the_command else None, metavar="FILE",
                        help="a local targets file: stand-ins for release.yaml's publish targets, under the same "
                             "names (publish and promote here against local servers; docs/publishing.md)")
    parser.add_argument("-v", "--verbose", action="store_true", default=unset if after_the_command else False,
                        help="log every external command")


def _global_options_after_the_command(parser: argparse.ArgumentParser) -> None:
    """Every command takes the global options after its name too (`shipyard validate --root x`); given
    there, they win over the same option before it. SUPPRESS: a command's parser sets nothing the
    user did not give, so the value before the command, or its default, stays."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                if any(isinstance(a, argparse._SubParsersAction) for a in command._actions):
                    _global_options_after_the_command(command)
                else:
                    _global_options(command, after_the_command=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shipyard", description=__doc__)
    _global_options(parser, after_the_command=False)
    parser.add_argument("--version", action=_PrintVersion, nargs=0, help="print shipyard's version and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    # The order of `shipyard --help`: the description, this host, builds, then what follows a build.
    add_init_commands(sub)
    add_matrix_commands(sub)
    add_doctor_commands(sub)
    add_build_commands(sub)
    add_conda_commands(sub)
    add_image_commands(sub)
    add_variants_commands(sub)
    add_publish_commands(sub)
    add_manifest_commands(sub)
    add_ci_commands(sub)
    add_report_commands(sub)
    add_supply_commands(sub)
    add_schema_command(sub)
    _global_options_after_the_command(parser)
    return parser


@functools.cache
def _parser() -> argparse.ArgumentParser:
    """The parser, built once per process: argparse looks up a translation of every help text
    (about 30 ms here), and callers in one process (the test suite, a Python caller) call main()
    hundreds of times. Parsing changes nothing in it."""
    return build_parser()


def main(argv: list[str] | None = None) -> int:
    # Everything a command prints or logs, argparse's complaints and a crash's traceback included,
    # passes through the one scrubber (redaction.py) on its way out.
    with redacted_output():
        args = _parser().parse_args(argv)
        logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                            format="%(levelname)s %(name)s: %(message)s")
        try:
            return int(args.func(args) or 0)
        except ShipyardError as exc:
            err_console.print("[red]error[/]:", end=" ")
            err_console.print(str(exc), markup=False, soft_wrap=True)
            return exc.exit_code
        except Exception:
            # Printed here, inside the scrubber, rather than by Python after main returns; the
            # exit status is Python's own for an uncaught exception.
            traceback.print_exc()
            return CRASHED
