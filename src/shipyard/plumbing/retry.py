"""HTTP with bounded retries: 5xx responses, connection resets and timeouts are tried again after
a growing pause, a bounded number of times; then RetriesExhausted names the artifact, the server
and the last response. Every request has a timeout, so a stalled server cannot hang a publish.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import requests
from requests.adapters import HTTPAdapter

from shipyard.errors import RetriesExhausted

log = logging.getLogger("shipyard.publish")
T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    tries: int = 5
    first_pause: float = 0.5  # seconds; doubled after each failure, up to max_pause
    max_pause: float = 8.0
    timeout: float = 60.0  # seconds to connect, and between two reads

    def pauses(self) -> list[float]:
        return [min(self.max_pause, self.first_pause * 2 ** i) for i in range(self.tries - 1)]


class _TimeoutAdapter(HTTPAdapter):
    """Gives every request the policy's timeout (twine's own requests set none) and no hidden
    urllib3 retries: retrying is this module's job, bounded once."""

    def __init__(self, timeout: float) -> None:
        super().__init__(max_retries=0)
        self._timeout = timeout

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        if kwargs.get("timeout") is None:
            kwargs["timeout"] = self._timeout
        return super().send(request, **kwargs)


def bounded_session(policy: RetryPolicy, session: requests.Session | None = None) -> requests.Session:
    """`session` (or a new one) with the policy's timeout on every request and no retries of its own."""
    session = session or requests.Session()
    session.trust_env = False  # no proxies or netrc from the environment: targets are named in release.yaml
    for scheme in ("http://", "https://"):
        session.mount(scheme, _TimeoutAdapter(policy.timeout))
    return session


def describe(response: requests.Response) -> str:
    return f"HTTP {response.status_code} {response.reason}"


# What requests raises when a connection breaks, stalls or ends a body early: worth another try.
BROKEN_READS: tuple[type[Exception], ...] = (requests.ConnectionError, requests.Timeout,
                                             requests.exceptions.ChunkedEncodingError)


def gist(exc: Exception, scrub: Callable[[str], str] = str) -> str:
    """A failed try as a retry names it: the exception's kind and the start of its text, scrubbed
    (the text may quote a URL with a token)."""
    return scrub(f"{type(exc).__name__}: {str(exc)[:200]}")


def retry(attempt: Callable[[], T], policy: RetryPolicy, *, label: str, errors: tuple[type[Exception], ...],
          failure: Callable[[Exception], str], gave_up: Callable[[str], str],
          fault: Callable[[T], str | None] = lambda _: None) -> T:
    """The one retry loop: call `attempt` at most `policy.tries` times, pausing as the policy says
    after each try that raised one of `errors` (described by `failure`, which must scrub secrets) or
    returned a result `fault` describes as a fault; return the first good result, else raise
    RetriesExhausted with `gave_up(the last failure)`."""
    last = "no response"
    pauses = policy.pauses()
    for number in range(policy.tries):
        try:
            result = attempt()
        except errors as exc:
            last = failure(exc)
        else:
            if (fault_text := fault(result)) is None:
                return result
            last = fault_text
        if number < len(pauses):
            log.info("%s: %s; trying again in %.1f s", label, last, pauses[number])
            time.sleep(pauses[number])
    raise RetriesExhausted(gave_up(last))


def with_retries(what: str, server: str, attempt: Callable[[], requests.Response], policy: RetryPolicy,
                 *, scrub: Callable[[str], str] = str) -> requests.Response:
    """Call `attempt` until it returns a response below 500, at most `policy.tries` times.
    A 4xx is returned to the caller (it is an answer, not a fault)."""
    return retry(
        attempt, policy, label=f"{what}: {server}",
        errors=BROKEN_READS,
        failure=lambda exc: gist(exc, scrub),
        fault=lambda response: describe(response) if response.status_code >= 500 else None,
        gave_up=lambda last: f"{what}: {server}: gave up after {policy.tries} tries; last response: {last}")
