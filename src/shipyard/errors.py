"""Typed errors. Each carries an exit code and a message that says what to do."""

from __future__ import annotations


class ShipyardError(Exception):
    """Base of every error shipyard reports to a user; `exit_code` is the CLI's exit status."""

    exit_code = 1


class SpecError(ShipyardError):
    """release.yaml or feature_status.yaml is invalid."""

    exit_code = 2


class ToolError(ShipyardError):
    """An external tool failed; carries the command and the tail of what it printed."""

    exit_code = 3

    def __init__(self, message: str, *, cmd: list[str] | None = None, returncode: int | None = None,
                 output: str = "") -> None:
        super().__init__(message)
        self.cmd = cmd or []
        self.returncode = returncode
        self.output = output  # stdout, then stderr: compilers and ninja report on stdout

    def __str__(self) -> str:
        text = super().__str__()
        tail = self.output.strip().splitlines()[-25:]
        if tail:
            text += "\n  output (last lines):\n    " + "\n    ".join(tail)
        return text


class ToolchainMissing(ShipyardError):
    """A cell cannot be built on this host; the message names the fix."""

    exit_code = 4


class BuildError(ShipyardError):
    """A build, repair or check step failed for a cell."""

    exit_code = 5


class CheckFailed(ShipyardError):
    """A built artifact broke a release rule (tag, dependencies, size, CUDA archs)."""

    exit_code = 6
