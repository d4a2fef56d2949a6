"""The one scrubber between shipyard and everything it shows: every line it prints or logs, every
error, and the output of the tools it runs pass through `redact` (the CLI puts `RedactedStream`
over stdout and stderr, so nothing has to remember to call it).

What it hides, wherever it appears in a text:
- the values of the variables release.yaml names for credentials (`watch_variables`), of the
  known CI token variables (CI_TOKEN_VARIABLES), and of any variable named like a credential
  (…PASSWORD, …TOKEN, …SECRET …);
- secrets learnt while running (a minted upload token, a login token: `keep_hidden`);
- strings shaped like tokens (SECRET_SHAPES) and whole PEM blocks;
- a URL's user:password@, its ?query, and conda's /t/<token>/.

A known value is replaced only as a whole token, never inside a word: a password `p` leaves
`port=8081` as it is. That is also why a credential shorter than 8 characters is refused by
validation (release/validate.py): so short a value cannot be told from ordinary words.

It imports nothing of shipyard: errors.py and every layer above may use it.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache
from typing import IO, Any

MASK = "***"
# A secret this short cannot be hidden in logs without hiding ordinary words with it.
SHORTEST_SECRET = 8

# Credentials recognisable by their shape: PEM blocks, the prefixed tokens of GitHub, PyPI, GitLab,
# Slack, npm, AWS and OpenAI-style APIs, and JSON web tokens.
SECRET_SHAPES = re.compile(
    r"-----BEGIN [A-Z0-9 ]+-----"
    r"|(?<![A-Za-z0-9])(gh[pousr]_|github_pat_|pypi-|glpat-|xox[abposr]-|npm_|sk-|AKIA|ASIA)[A-Za-z0-9_\-]{12,}"
    r"|(?<![A-Za-z0-9])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}(\.[A-Za-z0-9_-]*)?")
# A whole PEM block; one cut short (the rest comes on a later line) runs to the end of the text.
_PEM_BLOCK = re.compile(r"-----BEGIN [A-Z0-9 ]+-----.*?(-----END [A-Z0-9 ]+-----|(?=\n?\Z))", re.DOTALL)
_PEM_END = re.compile(r"-----END [A-Z0-9 ]+-----")

# Variables CI systems and publishing tools keep tokens in, whatever release.yaml names.
CI_TOKEN_VARIABLES = ("GITHUB_TOKEN", "GH_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_TOKEN", "ACTIONS_RUNTIME_TOKEN",
                      "PYPI_TOKEN", "PYPI_API_TOKEN", "TWINE_PASSWORD", "ANACONDA_API_TOKEN", "CONDA_TOKEN",
                      "DOCKER_PASSWORD", "CI_JOB_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "NPM_TOKEN")
# A variable whose name holds one of these words holds a credential.
SECRET_VARIABLE_WORDS = ("PASSWORD", "PASSWD", "PASSPHRASE", "TOKEN", "SECRET", "API_KEY", "APIKEY", "CREDENTIAL",
                         "PRIVATE_KEY", "SIGNING_KEY")
# A value of a variable merely named like a credential may be a flag ("1", "true"): shorter ones
# are left alone. Variables release.yaml names are hidden whatever their length.
_SHORTEST_GUESSED = 4
_PLACE_SUFFIXES = ("_FILE", "_PATH", "_DIR", "_URL")

_lock = threading.Lock()
_watched: set[str] = set()  # names of the variables release.yaml keeps credentials in
_learnt: set[str] = set()  # secrets met while running


def watch_variables(names: Iterable[str]) -> None:
    """Hide the values of the variables `names` (release.yaml's password_env, token_env …) from now on."""
    with _lock:
        _watched.update(n for n in names if n)


def keep_hidden(*secrets: str | None) -> None:
    """Hide `secrets` (a token minted or handed out while running) in everything shown from now on."""
    with _lock:
        _learnt.update(s for s in secrets if s)


def names_a_secret_variable(name: str) -> bool:
    """Whether the variable `name` is one whose value is a credential (by release.yaml, by CI, by its name)."""
    upper = name.upper()
    if name in _watched or upper in CI_TOKEN_VARIABLES:
        return True
    # ..._TOKEN_FILE, ..._TOKEN_REQUEST_URL name where a secret is, not the secret (a URL's own
    # credentials are hidden as a URL's).
    return any(w in upper for w in SECRET_VARIABLE_WORDS) and not upper.endswith(_PLACE_SUFFIXES)


def known_secrets(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """Every secret value known now: the credential variables' values in this process's environment
    and in `environ` (a child's), and those learnt while running."""
    with _lock:
        values = set(_learnt)
        watched = set(_watched)
    for env in (os.environ, environ or {}):
        for name, value in list(env.items()):
            if not value or not names_a_secret_variable(name):
                continue
            if name in watched or len(value) >= _SHORTEST_GUESSED:
                values.add(value)
    return frozenset(values)


@lru_cache(maxsize=64)
def _whole_tokens(values: frozenset[str]) -> re.Pattern[str] | None:
    """One pattern for every value of `values`, each matched only as a whole token: a value that
    starts (ends) with a letter or digit must not have one just before (after) it."""
    if not values:
        return None
    parts = []
    for value in sorted(values, key=len, reverse=True):  # the longest first: a secret holding another
        before = r"(?<![A-Za-z0-9])" if value[0].isalnum() else ""
        after = r"(?![A-Za-z0-9])" if value[-1].isalnum() else ""
        parts.append(f"{before}{re.escape(value)}{after}")
    return re.compile("|".join(parts))


def userinfo_end(url: str) -> int:
    """Where the user:password@ of `url` ends (the index just after its '@'), or 0 when it has none.

    RFC 3986 ends the authority at the first '/', so `https://host/a@b` has none. But a user who
    writes `http://admin:pa/ss@host/` means a password holding '/': a first segment of the form
    `name:not-a-port` followed by an '@' later on is read as userinfo up to that '@' too, so the
    password is hidden either way."""
    start = url.find("://")
    start = start + 3 if start >= 0 else 0
    rest = url[start:]
    cut = re.search(r"[/?#\s]", rest)
    authority = rest[:cut.start()] if cut else rest
    if "@" in authority:
        return start + authority.rindex("@") + 1
    host, colon, port = authority.partition(":")
    if colon and not re.fullmatch(r"\d{0,5}", port):
        at = re.search(r"@", rest)
        space = re.search(r"\s", rest)
        if at and (space is None or at.start() < space.start()):
            return start + at.start() + 1
    return 0


def public_url(url: str) -> str:
    """`url` as a message may show it: without user:password@, ?query, #fragment or a conda /t/<token>/."""
    end = userinfo_end(url)
    if end:
        scheme = url.find("://")
        url = (url[:scheme + 3] if scheme >= 0 else "") + url[end:]
    url = re.split(r"[?#]", url, maxsplit=1)[0]
    return _CONDA_TOKEN.sub(f"/t/{MASK}/", url)


# A URL inside free text: a scheme, then anything up to a blank or a quote.
_URL_IN_TEXT = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")
# user:password@host without a scheme (a registry's host:port is written so), also as a path
# segment (a URL joined onto a folder loses a slash: library/x/https:/ci:pw@github.com).
# (Not an image reference pinned by digest: name:tag@sha256:….)
_BARE_USERINFO = re.compile(r"(?<![A-Za-z0-9_.%:@-])[A-Za-z0-9_.%-]+:[^\s@/'\"]+@(?=[A-Za-z0-9\[])(?!sha\d+:)")


# conda's /t/<token>/ path segment; not a placeholder for one (`/t/$SHIPYARD_CONDA_TOKEN/`, what
# the get-started page tells a user to fill in), which holds no secret.
_CONDA_TOKEN = re.compile(r"/t/(?!\$\{?[A-Za-z_][A-Za-z0-9_]*\}?/)[^/\s]+/")


def _url_shown(match: re.Match[str]) -> str:
    url = match.group()
    end = userinfo_end(url)
    if end:
        scheme = url.find("://")
        url = f"{url[:scheme + 3]}{MASK}@{url[end:]}"
    return re.sub(r"\?[^#]*", f"?{MASK}", url, count=1)


def hide_values(text: str, environ: Mapping[str, str] | None = None) -> str:
    """`text` with only the known secret values (see `redact`) replaced, each as a whole token: for
    a tool's output that shipyard reads as data (JSON, a listing), where a URL or a digest must
    stay as it is; what is shown of it passes `redact` at the edge."""
    pattern = _whole_tokens(known_secrets(environ)) if text else None
    return pattern.sub(MASK, text) if pattern is not None else text


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    """`text` with every secret shipyard knows of (and those of the variables in `environ`, a child
    process's environment) replaced by ***, as a whole token; see the module's docstring."""
    if not text:
        return text
    text = hide_values(text, environ)
    text = _PEM_BLOCK.sub(MASK, text)
    text = SECRET_SHAPES.sub(MASK, text)
    text = _URL_IN_TEXT.sub(_url_shown, text)
    text = _BARE_USERINFO.sub(f"{MASK}@", text)
    return _CONDA_TOKEN.sub(f"/t/{MASK}/", text)


class RedactedStream:
    """A text stream that passes what is written to `inner` redacted, a line at a time: a secret
    written in pieces (print writes its arguments one by one) is whole when it is matched. A PEM
    block written over several lines is hidden from its BEGIN line to its END line."""

    def __init__(self, inner: IO[str]) -> None:
        self.inner = inner
        self._pending = ""
        self._in_pem = False
        self._lock = threading.Lock()  # builds report progress from several threads

    def write(self, text: str) -> int:
        with self._lock:
            self._pending += text
            if "\n" in self._pending:
                lines, _, self._pending = self._pending.rpartition("\n")
                self.inner.write(self._redacted(lines + "\n"))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        with self._lock:
            if self._pending:
                # A partial line (a prompt, a live display's redraw) goes out now, redacted as it is.
                pending, self._pending = self._pending, ""
                self.inner.write(self._redacted(pending))
        self.inner.flush()

    def _redacted(self, text: str) -> str:
        if self._in_pem:
            end = _PEM_END.search(text)
            if end is None:
                return re.sub(r"[^\n]+", MASK, text)
            text = MASK + text[end.end():]
            self._in_pem = False
        last_begin = text.rfind("-----BEGIN ")
        if last_begin >= 0 and not _PEM_END.search(text, last_begin):
            self._in_pem = True
        return redact(text)

    def __getattr__(self, name: str) -> Any:
        # isatty, fileno, encoding, buffer …: what rich and logging ask of a stream.
        return getattr(self.inner, name)


def write_unredacted(line: str) -> None:
    """Write `line` to standard output past the scrubber: only for a CI runner's command that must
    carry a secret to hide it (GitHub's `::add-mask::<value>`), which the runner reads and never shows."""
    out = sys.stdout
    if isinstance(out, RedactedStream):
        out.flush()  # what was written before goes first
        out = out.inner
    out.write(line)
    out.flush()


_record_factory_installed = False


def _redact_log_records() -> None:
    """Make every log record's message redacted where it is made, once per process: what a
    handler (a file, a test's capture, the console) formats is then already clean."""
    global _record_factory_installed
    with _lock:
        if _record_factory_installed:
            return
        _record_factory_installed = True
    make = logging.getLogRecordFactory()

    def redacted_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a malformed %-format: logging reports it when formatting
            return record
        record.msg, record.args = redact(message), None
        return record

    logging.setLogRecordFactory(redacted_record)


@contextmanager
def redacted_output() -> Iterator[None]:
    """Within the block, everything written to sys.stdout and sys.stderr, and every log record,
    is redacted: the edge between shipyard and what a user (or a CI log) sees."""
    _redact_log_records()
    out, err = sys.stdout, sys.stderr
    if isinstance(out, RedactedStream) and isinstance(err, RedactedStream):
        yield  # already inside one (a command that runs another in-process)
        return
    sys.stdout, sys.stderr = RedactedStream(out), RedactedStream(err)
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        sys.stdout, sys.stderr = out, err
