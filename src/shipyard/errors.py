"""Typed errors. Each carries an exit code and a message that says what to do."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# A SpecIssue's value when the problem has no value to show (a missing key, a whole file).
NO_VALUE: Any = object()
# What an issue shows instead of a value that may be a credential (anything under `publish`).
REDACTED = "<hidden: values under publish are never printed>"


class ShipyardError(Exception):
    """Base of every error shipyard reports to a user; `exit_code` is the CLI's exit status."""

    exit_code = 1


@dataclass(frozen=True)
class SpecIssue:
    """One problem in one file, at one key: what is wrong, what to do, and the bad value.

    Rendered as one line, `file:line: key: message; fix (got value); did you mean 'x'?`.
    """

    file: Path
    line: int | None
    key: str
    value: Any
    message: str
    fix: str = ""
    suggestion: str | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else str(self.file)
        text = f"{where}: {self.key}: {self.message}"
        if self.fix:
            text += f"; {self.fix}"
        if self.value is REDACTED:
            text += " (value hidden: values under publish are never printed)"
        elif self.value is not NO_VALUE and self.value is not None and not isinstance(self.value, dict | list):
            text += f" (got {_shown(self.value)})"
        if self.suggestion:
            text += f"; did you mean {self.suggestion!r}?"
        return text


def _shown(value: Any) -> str:
    # One line, and short: a value is shown to be recognised, not to be reproduced.
    raw = getattr(value, "raw", None)  # a YAML number keeps the text it was written as: 3.10, not 3.1
    text = raw if isinstance(raw, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def nearest(word: str, choices: Iterable[str]) -> str | None:
    """The closest valid spelling of `word`, if one is close enough to be a typo."""
    found = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


class SpecError(ShipyardError):
    """release.yaml or feature_status.yaml is invalid: one line per problem."""

    exit_code = 2

    def __init__(self, message: str | SpecIssue | Sequence[SpecIssue]) -> None:
        if isinstance(message, SpecIssue):
            message = [message]
        if isinstance(message, str):
            self.issues: tuple[SpecIssue, ...] = ()
            super().__init__(message)
            return
        self.issues = tuple(message)
        count = len(self.issues)
        body = "\n".join(f"  {issue}" for issue in self.issues)
        super().__init__(f"{count} problem{'s' if count > 1 else ''} in the release description:\n{body}")


class UsageError(ShipyardError):
    """A command-line argument names nothing in the release (an unknown --variant, --platform …)."""

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


class RecipeError(ShipyardError):
    """A conda recipe cannot be read, parsed or rendered: `file:line: key: what; fix`."""

    exit_code = 2


class UnsatisfiableDependency(ShipyardError):
    """A conda package's requirements cannot be met from the channels; found before any build."""

    exit_code = 4
