"""HTTP with bounded retries: 5xx responses, 429 (too many requests), connection resets and
timeouts are tried again after a growing pause, a bounded number of times; then RetriesExhausted
names the artifact, the server and the last response. A server that says how long to wait
(`Retry-After`, in seconds or as an HTTP date, on a 429 or a 503) is waited for instead, within
the policy's deadline: a wait that would end past it fails at once, naming the wait asked for, since
sleeping through it would only hold the job. Every request has a timeout, so a stalled server cannot
hang a publish.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any, Protocol, TypeVar

import requests
from requests.adapters import HTTPAdapter

from shipyard.errors import PublishError, RetriesExhausted

log = logging.getLogger("shipyard.publish")
T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    tries: int = 5
    first_pause: float = 0.5  # seconds; doubled after each failure, up to max_pause
    max_pause: float = 8.0
    timeout: float = 60.0  # seconds to connect, and between two reads
    # Seconds from a call's first try by which its last try starts: the longest a Retry-After is
    # waited for (PyPI and registries ask for seconds to a minute when they rate-limit).
    deadline: float = 120.0
    # Seconds an index may take to show a file after its upload (a CDN in front of PyPI serves a
    # cached page for a while) before a publish says it is not visible yet.
    visible_within: float = 120.0

    def pauses(self) -> list[float]:
        return [min(self.max_pause, self.first_pause * 2 ** i) for i in range(self.tries - 1)]


class _TimeoutAdapter(HTTPAdapter):
    """Gives every request the policy's timeout (twine's own requests set none), its proxy, and
    no hidden urllib3 retries: retrying is this module's job, bounded once."""

    def __init__(self, timeout: float, proxy: str | None) -> None:
        super().__init__(max_retries=0)
        self._timeout = timeout
        self._proxy = proxy

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        if kwargs.get("timeout") is None:
            kwargs["timeout"] = self._timeout
        if not kwargs.get("proxies"):
            kwargs["proxies"] = request_proxies(request.url or "", self._proxy)
        return super().send(request, **kwargs)


def request_proxies(url: str, proxy: str | None) -> dict[str, str]:
    """The proxies a request to `url` goes through: `proxy` (a target's own) for every URL, else the
    standard environment variables (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, in either case) unless
    NO_PROXY names the host, as curl and pip read them."""
    if proxy:
        return {"http": proxy, "https": proxy}
    return requests.utils.get_environ_proxies(url)


def bounded_session(policy: RetryPolicy, session: requests.Session | None = None, *,
                    verify: str | bool = True, proxy: str | None = None) -> requests.Session:
    """`session` (or a new one) with the policy's timeout on every request, no retries of its own,
    the certificates it trusts (`verify`: a CA bundle's path, or True for the default store) and
    its proxy (`proxy`, else the standard environment variables: request_proxies). Nothing else
    comes from the environment (trust_env off: no netrc credentials, no REQUESTS_CA_BUNDLE), and
    verification is never turned off."""
    session = session or requests.Session()
    session.trust_env = False
    if verify is False:
        raise ValueError("certificate verification is never turned off; give the CA bundle to trust instead")
    session.verify = verify
    for scheme in ("http://", "https://"):
        session.mount(scheme, _TimeoutAdapter(policy.timeout, proxy))
    return session


def describe(response: requests.Response) -> str:
    return f"HTTP {response.status_code} {response.reason}"


# What requests raises when a connection breaks, stalls or ends a body early: worth another try.
BROKEN_READS: tuple[type[Exception], ...] = (requests.ConnectionError, requests.Timeout,
                                             requests.exceptions.ChunkedEncodingError)


def untrusted_certificate(exc: Exception) -> bool:
    """Whether `exc` is a TLS verification failure (a certificate no trusted CA signed)."""
    return isinstance(exc, requests.exceptions.SSLError) and "CERTIFICATE_VERIFY_FAILED" in str(exc)


def gist(exc: Exception, scrub: Callable[[str], str] = str) -> str:
    """A failed try as a retry names it: the exception's kind and the start of its text, scrubbed
    (the text may quote a URL with a token)."""
    return scrub(f"{type(exc).__name__}: {str(exc)[:200]}")


# Statuses a server sends when it will answer later: tried again, after the wait it asks for.
_BUSY = (429, 503)


class BusyAnswer(Protocol):
    """What retry_after reads of an answer: requests' responses and botocore's alike."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...


def retry_after(response: BusyAnswer, now: float | None = None) -> float | None:
    """The seconds a 429 or 503 asks to wait (`Retry-After`: seconds, or an HTTP date); None when
    it asks for nothing readable. A date in the past is no wait."""
    if response.status_code not in _BUSY:
        return None
    value = response.headers.get("Retry-After", "").strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT; a zone-less one is read as such
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def retry(attempt: Callable[[], T], policy: RetryPolicy, *, label: str, errors: tuple[type[Exception], ...],
          failure: Callable[[Exception], str], gave_up: Callable[[str], str],
          fault: Callable[[T], str | None] = lambda _: None,
          asked_wait: Callable[[T], float | None] = lambda _: None,
          too_long: Callable[[str, float], str] | None = None) -> T:
    """The one retry loop: call `attempt` at most `policy.tries` times, pausing as the policy says
    after each try that raised one of `errors` (described by `failure`, which must scrub secrets) or
    returned a result `fault` describes as a fault; return the first good result, else raise
    RetriesExhausted with `gave_up(the last failure)`. A faulty result for which `asked_wait` gives
    seconds is waited for that long instead; when that wait would end past `policy.deadline` (from
    the first try), RetriesExhausted with `too_long(the failure, the wait)` at once."""
    last = "no response"
    pauses = policy.pauses()
    started = time.monotonic()
    for number in range(policy.tries):
        asked: float | None = None
        try:
            result = attempt()
        except errors as exc:
            if untrusted_certificate(exc):  # the same answer on every try: say what to trust
                raise PublishError(f"{label}: the server's TLS certificate is not signed by a CA this target "
                                   f"trusts ({failure(exc)}); set the target's ca_file in release.yaml to the PEM "
                                   f"file of the CA that signed it (verification is never turned off)") from None
            last = failure(exc)
        else:
            if (fault_text := fault(result)) is None:
                return result
            last = fault_text
            asked = asked_wait(result)
        if number < len(pauses):
            pause = pauses[number]
            if asked is not None:
                if time.monotonic() - started + asked > policy.deadline:
                    raise RetriesExhausted(too_long(last, asked) if too_long else
                                           f"{label}: {last} asks to wait {asked:.0f} s, beyond the retry "
                                           f"deadline of {policy.deadline:.0f} s; try again later")
                pause = asked
            log.info("%s: %s; trying again in %.1f s", label, last, pause)
            time.sleep(pause)
    raise RetriesExhausted(gave_up(last))


def with_retries(what: str, server: str, attempt: Callable[[], requests.Response], policy: RetryPolicy,
                 *, scrub: Callable[[str], str] = str, gave_up: Callable[[str], str] | None = None,
                 too_long: Callable[[str, float], str] | None = None) -> requests.Response:
    """Call `attempt` until it returns a response below 500 other than a 429, at most `policy.tries`
    times, waiting as long as a `Retry-After` asks (within the policy's deadline). Any other 4xx is
    returned to the caller (it is an answer, not a fault). `gave_up` and `too_long` word the failure
    (default: the step, the server, the last response, and the wait asked for)."""
    return retry(
        attempt, policy, label=f"{what}: {server}",
        errors=BROKEN_READS,
        failure=lambda exc: gist(exc, scrub),
        fault=lambda response: describe(response) if response.status_code >= 500 or response.status_code == 429
        else None,
        asked_wait=retry_after,
        gave_up=gave_up or (lambda last: f"{what}: {server}: gave up after {policy.tries} tries; last response: "
                                         f"{last}"),
        too_long=too_long or (lambda last, wait: f"{what}: {server}: {last} asks to wait {wait:.0f} s "
                                                 f"(Retry-After), beyond the retry deadline of "
                                                 f"{policy.deadline:.0f} s; publish again later"))


def wait_for(look: Callable[[], T | None], policy: RetryPolicy, *, label: str) -> T | None:
    """Call `look` until it returns something other than None, pausing after each None as the
    policy's retries do (doubling, up to `max_pause`), until `policy.visible_within` seconds have
    passed since the first call: what `look` returned, or None when that time ran out. For reads
    that may lag behind a write (an index's cached page right after an upload)."""
    started = time.monotonic()
    pause = policy.first_pause
    while True:
        found = look()
        if found is not None:
            return found
        left = policy.visible_within - (time.monotonic() - started)
        if left <= 0:
            return None
        log.info("%s: not yet; looking again in %.1f s", label, min(pause, left))
        time.sleep(min(pause, left))
        pause = min(policy.max_pause, pause * 2)
