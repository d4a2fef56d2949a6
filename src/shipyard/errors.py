"""Typed errors. Each carries an exit code and a message that says what to do."""

from __future__ import annotations

import difflib
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shipyard.plumbing.redaction import SECRET_SHAPES as _SECRET_SHAPES
from shipyard.plumbing.redaction import public_url

__all__ = ["public_url"]  # re-exported: the one definition is plumbing/redaction.py's

# A SpecIssue's value when the problem has no value to show (a missing key, a whole file).
NO_VALUE: Any = object()


class ShipyardError(Exception):
    """Base of every error shipyard reports to a user; `exit_code` is the CLI's exit status,
    stated once per kind in its class line (`class X(ShipyardError, exit_code=5)`)."""

    exit_code = 1

    def __init_subclass__(cls, exit_code: int | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if exit_code is not None:
            cls.exit_code = exit_code


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
        if self.value is not NO_VALUE and self.value is not None and not isinstance(self.value, dict | list):
            text += f" ({shown(self.value, self.key)})"
        if self.suggestion:
            text += f"; did you mean {self.suggestion!r}?"
        return one_line(text)


# Control characters and line breaks a file may put into a key, a path or a message (`x\ny` as a
# tests folder, \x11 in an unknown key): shown escaped, so that one problem stays one line and no
# escape sequence reaches the terminal.
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: str) -> str:
    """`text` with every control character and line break escaped (`\\n`, `\\x11`)."""
    return _UNPRINTABLE.sub(lambda m: repr(m.group())[1:-1], text)


# --- what a message may show of a value ------------------------------------------------------
# Every value a message quotes goes through `shown`: the one place that decides what is never
# printed (keys, tokens, passwords, a URL's user:password@ and ?query).

# A key whose name holds one of these words holds a credential (api-token, auth_key, signing_key_env …).
SECRET_WORDS = ("password", "passwd", "passphrase", "token", "secret", "apikey", "api_key", "auth", "credential",
                "private_key", "access_key", "signing_key")
# ... unless it names where the credential is kept: a path is shown (a key pasted there is caught by its shape).
_PATH_KEY_SUFFIXES = ("_file", "_path", "_dir")
_DIGEST = re.compile(r"[0-9a-f]{32,128}")  # a sha256 or a commit: shown, it is what a user compares


def names_a_secret(key: str) -> bool:
    """Whether the key `key` ('publish.x.token', 'password_env') is named like one that holds a
    credential: its last named part (list indexes skipped) contains a word of SECRET_WORDS."""
    names = [part for part in str(key).split(".") if part and not part.isdigit()]
    word = names[-1].lower().replace("-", "_") if names else ""
    return any(w in word for w in SECRET_WORDS)


def _high_entropy(word: str) -> bool:
    # A random token: long, no spaces, upper and lower case letters and digits all mixed, and
    # no character repeated much. Names, paths, versions and digests have one or two of those.
    if len(word) < 16 or _DIGEST.fullmatch(word):
        return False
    if not (re.search(r"[a-z]", word) and re.search(r"[A-Z]", word) and re.search(r"[0-9]", word)):
        return False
    counts = Counter(word)
    entropy = -sum(n / len(word) * math.log2(n / len(word)) for n in counts.values())
    return entropy >= 3.5


def looks_secret(text: str) -> bool:
    """Whether `text` holds something shaped like a key, token or password."""
    return bool(_SECRET_SHAPES.search(text)) or any(_high_entropy(w) for w in re.split(r"[\s'\"=:,;@/]+", text))


def _is_url(value: Any, key: str) -> bool:
    return isinstance(value, str) and (str(key).split(".")[-1] == "url"
                                       or re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", value) is not None)


def hidden_because(value: Any, key: str = "") -> str | None:
    """Why `value`, found under `key`, must never be printed; None when it may be (a URL: once
    `public_url` has taken its credentials out)."""
    parts = str(key).split(".")
    if parts[0] == "publish" and parts[-1] != "url":
        return "values under publish are never printed"
    text = value if isinstance(value, str) else str(value)
    if looks_secret(public_url(text) if _is_url(value, key) else text):
        return "it looks like a key, token or password"
    if names_a_secret(key) and not parts[-1].endswith(_PATH_KEY_SUFFIXES):
        return f"values under a key named like {parts[-1]!r} are never printed"
    return None


def shown(value: Any, key: str = "") -> str:
    """What a message may say of `value` found under `key`: "got 'x'" (one short line; a URL
    without userinfo or query), or "value hidden: why" for anything that may be a credential."""
    why = hidden_because(value, key)
    if why:
        return f"value hidden: {why}"
    if _is_url(value, key):
        value = public_url(value)
    raw = getattr(value, "raw", None)  # a YAML number keeps the text it was written as: 3.10, not 3.1
    text = raw if isinstance(raw, str) else repr(value)
    # One line, and short: a value is shown to be recognised, not to be reproduced.
    return "got " + (text if len(text) <= 80 else text[:77] + "...")


def nearest(word: str, choices: Iterable[str]) -> str | None:
    """The closest valid spelling of `word`, if one is close enough to be a typo. Case does not
    count ('stable' is nearer 'API-Stable' than 'API-Unstable')."""
    spelled: dict[str, str] = {}
    for choice in choices:
        spelled.setdefault(str(choice).lower(), str(choice))
    found = difflib.get_close_matches(str(word).lower(), list(spelled), n=1, cutoff=0.6)
    return spelled[found[0]] if found else None


class SpecError(ShipyardError, exit_code=2):
    """release.yaml or feature_status.yaml is invalid: one line per problem."""

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


class UsageError(ShipyardError, exit_code=2):
    """A command-line argument names nothing in the release (an unknown --variant, --platform …)."""


class ToolError(ShipyardError, exit_code=3):
    """An external tool failed; carries the command and the tail of what it printed."""

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


class ToolchainMissing(ShipyardError, exit_code=4):
    """A cell cannot be built on this host; the message names the fix."""


class BuildError(ShipyardError, exit_code=5):
    """A build, repair or check step failed for a cell."""


class CheckFailed(ShipyardError, exit_code=6):
    """A built artifact broke a release rule (tag, dependencies, size, CUDA archs)."""


class RecipeError(ShipyardError, exit_code=2):
    """A conda recipe cannot be read, parsed or rendered: `file:line: key: what; fix`."""


class UnsatisfiableDependency(ShipyardError, exit_code=4):
    """A conda package's requirements cannot be met from the channels; found before any build."""


# --- publishing: a publish stopped; no message ever holds a credential ----------------------


class PublishError(ShipyardError, exit_code=7):
    """A publish stopped; what was visible before is still visible, and a re-run resumes."""


class MissingCredential(PublishError, exit_code=2):
    """An environment variable release.yaml names for a target is unset: found before any upload."""


class ImmutableFileError(PublishError, exit_code=8):
    """A file name is already published with other bytes: published names never change bytes."""


class GateBlocked(PublishError, exit_code=9):
    """An artifact with a failing stable feature may not go to this channel."""


class RetriesExhausted(PublishError):
    """A server kept failing; the message names the artifact, the server and the last response."""


class TrustedPublishingFailed(PublishError):
    """The OIDC exchange for an upload token failed: the message names the step and the fix, never a token."""
