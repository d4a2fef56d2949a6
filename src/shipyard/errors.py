"""Typed errors. Each carries an exit code and a message that says what to do.

Every error class shipyard raises lives here, and states its exit status in its class line; the
statuses that are verdicts rather than errors (a command finished and its answer is no) are the
constants below. EXIT_STATUSES says what each status means to a CI step; docs/exit-statuses.md's
table is `exit_status_table()` (tests/project/test_exit_statuses.py checks that they agree).
"""

from __future__ import annotations

import difflib
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from shipyard.redaction import SECRET_SHAPES as _SECRET_SHAPES
from shipyard.redaction import public_url

__all__ = ["public_url"]  # re-exported: the one definition is redaction.py's

# A SpecIssue's value when the problem has no value to show (a missing key, a whole file).
NO_VALUE: Any = object()


# --- exit statuses: what a CI step can tell apart without reading the log ---------------------

OK: Final = 0
# Python's own status for an uncaught exception: a bug in shipyard (the traceback is printed).
# No error class carries it, so a CI step never mistakes a crash for a verdict.
CRASHED: Final = 1
# `shipyard build` and `shipyard conda build` (and `build-mobile`, judged alike): every cell built,
# and a tested cell's tests said no (a stable feature failed). The artifacts are built and the
# manifest records the failure, so a CI job uploads its fragment before it fails and the publish
# gate decides per channel (ci/steps.py's build step tells it from every other status).
STABLE_FEATURE_FAILED: Final = 10
VERIFY_FAILED: Final = 15  # `shipyard verify`: an artifact's signature, digest or SBOM is not right
NOT_SIGNED: Final = 16  # `shipyard attest`: an artifact is missing or not the bytes the manifest records
NOT_REPRODUCIBLE: Final = 17  # `shipyard repro`: the two builds' artifacts differ
# `shipyard doctor`: it printed its table, and a cell of this host is not ready. A status of its own,
# not ToolchainMissing's 4: the doctor finished and its answer is no, nothing failed.
HOST_NOT_READY: Final = 18


@dataclass(frozen=True)
class ExitStatus:
    """What one exit status means: `meaning` for a status no error class carries (a verdict),
    `ci_step` what a CI step does on it; `shared` when several error classes carry it because a
    CI step treats them alike (each class's docstring says what it is)."""

    meaning: str
    ci_step: str
    shared: bool = False


EXIT_STATUSES: Final[dict[int, ExitStatus]] = {
    OK: ExitStatus("the command did what it was asked", "go on"),
    CRASHED: ExitStatus("shipyard crashed: an uncaught exception (Python's own status), a bug to report "
                        "with its traceback", "fail; nothing the command wrote can be trusted"),
    2: ExitStatus("bad input: a file, an argument or a setting is wrong; the one line says where and "
                  "the fix", "fail; fix the input (re-running cannot help)", shared=True),
    3: ExitStatus("something outside shipyard failed: a tool, or reading a channel", "fail; the message "
                  "names the tool or channel and what it said; re-run once that is fixed", shared=True),
    4: ExitStatus("this host cannot build it: a toolchain or a dependency is missing; nothing was built",
                  "fail, or run the job where the toolchain is (the message names the fix)", shared=True),
    5: ExitStatus("a build did not finish; nothing trustworthy to upload", "fail without uploading",
                  shared=True),
    6: ExitStatus("a built artifact broke a release rule", "fail without uploading"),
    7: ExitStatus("a publish stopped; what was visible before still is", "fail; re-run the publish once "
                  "the server or the credentials are fixed: it resumes", shared=True),
    8: ExitStatus("a published file name would get other bytes", "fail; bump the version or build number, "
                  "never retry"),
    9: ExitStatus("the gate refused an artifact with a failing stable feature for this channel",
                  "fail; the release report names the feature"),
    STABLE_FEATURE_FAILED: ExitStatus(
        "`shipyard build`, `conda build`: built, and a tested cell's tests said no (a stable feature "
        "failed); `build-mobile`: a target failed",
        "upload the fragment, then fail the job (the publish gate decides per channel)"),
    11: ExitStatus("the build jobs' fragments cannot be merged", "fail; dist/ is unchanged"),
    12: ExitStatus("a conda channel was not updated; readers still see what they saw before",
                   "fail; fix what the message names and re-run: nothing was half-written", shared=True),
    13: ExitStatus("`shipyard ci run`: a workflow job failed here", "fail; act's log names the step"),
    14: ExitStatus("the committed workflows are not what release.yaml generates",
                   "fail; run `shipyard ci generate` and commit"),
    VERIFY_FAILED: ExitStatus("`shipyard verify`: an artifact failed a check", "fail; do not publish it"),
    NOT_SIGNED: ExitStatus("`shipyard attest`: an artifact was left unsigned", "fail; rebuild dist/"),
    NOT_REPRODUCIBLE: ExitStatus("`shipyard repro`: the two builds differ", "fail; the report names the "
                                 "differing files"),
    HOST_NOT_READY: ExitStatus("`shipyard doctor`: a cell of this host is not ready (its table says what is "
                               "missing and the fix)", "build elsewhere, or install what the table names first"),
}


class ShipyardError(Exception):
    """Base of every error shipyard reports to a user; `exit_code` is the CLI's exit status,
    stated once per kind in its class line (`class X(ShipyardError, exit_code=5)`), and one of
    EXIT_STATUSES. The base is never raised itself (tests/project/test_exit_statuses.py)."""

    exit_code = CRASHED

    def __init_subclass__(cls, exit_code: int | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Every kind says its status: one inherited by accident would be a status no table names.
        if exit_code is None:
            raise TypeError(f"{cls.__name__}: state its exit status: class {cls.__name__}(..., exit_code=N)")
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
    """A command-line argument names nothing in the release (an unknown --variant, --platform …) or
    asks what the command cannot do (nothing selected, a folder that is not a checkout)."""


class InputError(ShipyardError, exit_code=2):
    """A file a command reads is missing, unreadable or not what it must hold: one line
    (plumbing/input_files.py's readers and `input_error`)."""

    def __init__(self, issue: SpecIssue) -> None:
        self.issue = issue
        super().__init__(str(issue))


KEYGEN_FIX = "make one with `shipyard keygen`"


class SigningKeyError(InputError, exit_code=2):
    """The signing key or public key is missing or unusable: one line (never a byte of the key)."""

    def __init__(self, where: str, message: str, fix: str = KEYGEN_FIX, key: str = "(file)") -> None:
        super().__init__(SpecIssue(Path(where), None, key, NO_VALUE, message, fix))


class ChannelVersionError(UsageError, exit_code=2):
    """A version that has no version on a channel (not PEP 440, or already a development release
    bound for nightly), or a development version bound for test or release."""


class MatrixTooLarge(ShipyardError, exit_code=2):
    """A lane's matrix in release.yaml holds more jobs than GitHub runs from one matrix."""


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


class ChannelReadError(ShipyardError, exit_code=3):
    """A conda channel or one of its packages could not be read."""


class ToolchainMissing(ShipyardError, exit_code=4):
    """A cell cannot be built on this host; the message names the fix."""


class BuildError(ShipyardError, exit_code=5):
    """A build, repair or check step failed for a cell."""


class NormalizeError(ShipyardError, exit_code=5):
    """A package the conda build made is not a .conda package that rattler-build wrote (the repack
    that makes it reproducible refused it)."""


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


class RetriesExhausted(PublishError, exit_code=7):
    """A server kept failing; the message names the artifact, the server and the last response."""


class TrustedPublishingFailed(PublishError, exit_code=7):
    """The OIDC exchange for an upload token failed: the message names the step and the fix, never a token."""


# --- channels, the release pipeline and its workflows ----------------------------------------


class MergeError(ShipyardError, exit_code=11):
    """The build jobs' fragments cannot be merged (or one is missing); dist/ is left as it was."""


class ChannelError(ShipyardError, exit_code=12):
    """A package cannot go into the conda channel, or the channel could not be written; the channel
    is left as it was."""


class GenerationError(ShipyardError, exit_code=12):
    """The symlink could not be pointed at the new generation; what readers see is unchanged."""


class ServeError(ShipyardError, exit_code=2):
    """The channel server cannot be started as asked (a bad token, channel name or folder)."""


class RunFailed(ShipyardError, exit_code=13):
    """`shipyard ci run`: a job that can run here failed (or act could not run the workflow)."""


class WorkflowDrift(ShipyardError, exit_code=14):
    """The committed workflows are not what release.yaml generates."""


# --- the table of exit statuses (docs/exit-statuses.md) --------------------------------------


def error_classes() -> list[type[ShipyardError]]:
    """Every error class, in the order this module defines them (all of them live here)."""
    return [value for value in globals().values()
            if isinstance(value, type) and issubclass(value, ShipyardError) and value is not ShipyardError]


def _summary(cls: type) -> str:
    return " ".join((cls.__doc__ or "").split("\n\n")[0].split())


def exit_status_table() -> str:
    """The markdown table of every exit status: one row per error class (a status several classes
    share has a row for each), one row for a status no class carries."""
    rows = ["| status | error class | meaning | what a CI step does |", "| --- | --- | --- | --- |"]
    classes = error_classes()
    for code, status in sorted(EXIT_STATUSES.items()):
        carriers = [(f"`{cls.__name__}`", _summary(cls)) for cls in classes if cls.exit_code == code]
        for name, meaning in carriers or [("—", status.meaning)]:
            rows.append(f"| {code} | {name} | {meaning} | {status.ci_step} |")
    return "\n".join(rows) + "\n"
