"""The one retry policy every publish target's HTTP goes through (#52 item 5): a 429 is tried again
after the wait its Retry-After asks for (seconds or an HTTP date), and a wait past the policy's
deadline fails at once, in one line naming the server, the status and the wait."""

from __future__ import annotations

import time
from email.utils import formatdate

import pytest
from support.publish_servers import busy_server

from shipyard.errors import RetriesExhausted
from shipyard.plumbing.retry import RetryPolicy, bounded_session, with_retries

# A tiny backoff: every wait of note comes from the server's Retry-After.
POLICY = RetryPolicy(tries=4, first_pause=0.01, timeout=5, deadline=30)


def test_a_429_is_tried_again_after_the_wait_its_retry_after_asks_for_in_seconds_or_as_a_date():
    # The date is written now and read after the first wait (1 s): at least 3.5 - 1 (a date has no
    # fraction of a second) - 1 = 1.5 s ahead then, with room for a slow first round trip.
    with busy_server([(429, {"Retry-After": "1"}), (429, {"Retry-After": formatdate(time.time() + 3.5, usegmt=True)}),
                      (200, {})]) as busy:
        session = bounded_session(POLICY)
        response = with_retries("list ab", busy.url, lambda: session.get(f"{busy.url}simple/ab/"), POLICY)
    assert response.status_code == 200
    times = [t for _, _, t in busy.requests]
    assert len(times) == 3
    assert times[1] - times[0] >= 0.95, times  # Retry-After: 1, not the policy's 0.01 s
    assert times[2] - times[1] >= 0.95, times  # the date: at least a second ahead


def test_a_retry_after_past_the_deadline_fails_at_once_naming_the_server_the_status_and_the_wait():
    with busy_server([(429, {"Retry-After": "3600"})]) as busy:
        session = bounded_session(POLICY)
        started = time.monotonic()
        with pytest.raises(RetriesExhausted) as failure:
            with_retries("upload ab-1.0-py3-none-any.whl", busy.url, lambda: session.get(busy.url), POLICY)
    assert time.monotonic() - started < 5
    assert len(busy.requests) == 1
    said = str(failure.value)
    assert "\n" not in said
    assert said.startswith(f"upload ab-1.0-py3-none-any.whl: {busy.url}: HTTP 429 "), said
    assert "asks to wait 3600 s (Retry-After), beyond the retry deadline of 30 s" in said, said


def test_a_429_without_retry_after_is_tried_again_as_a_5xx_is():
    with busy_server([(429, {}), (200, {})]) as busy:
        session = bounded_session(POLICY)
        response = with_retries("list ab", busy.url, lambda: session.get(busy.url), POLICY)
    assert response.status_code == 200 and len(busy.requests) == 2
