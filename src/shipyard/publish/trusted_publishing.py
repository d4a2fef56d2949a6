"""Trusted publishing from a GitHub Actions job to PyPI, TestPyPI or any index that serves PyPI's
OIDC endpoints: no long-lived secret at all. The flow GitHub and PyPI document:

1. the audience: GET <index>/_/oidc/audience answers {"audience": "pypi"};
2. the ID token: GET $ACTIONS_ID_TOKEN_REQUEST_URL&audience=<audience> with the header
   `Authorization: bearer $ACTIONS_ID_TOKEN_REQUEST_TOKEN` answers {"value": "<JWT>"} (GitHub sets
   both variables only in a job with `permissions: id-token: write`);
3. the exchange: POST <index>/_/oidc/mint-token {"token": "<JWT>"} answers {"success": true,
   "token": "pypi-…"}, or 422 {"message": …, "errors": [{"code": …, "description": …}]}.

Each token is masked (`::add-mask::`, on GitHub Actions) the moment it is known, before anything
else is printed. The
upload token stays in this process's memory: `shipyard publish` mints it for a target that says
`trusted_publishing: true` and gives it to twine as the password of `__token__`; it is never written
to $GITHUB_ENV, a file or a log. Every failure is TrustedPublishingFailed: one line naming the step
and the fix.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import requests

from shipyard.errors import RetriesExhausted, TrustedPublishingFailed, UsageError, public_url
from shipyard.plumbing.retry import RetryPolicy, bounded_session, describe, with_retries
from shipyard.redaction import keep_hidden, redact, write_unredacted
from shipyard.release.destinations import PublishTarget
from shipyard.release.spec import Spec

REQUEST_URL = "ACTIONS_ID_TOKEN_REQUEST_URL"
REQUEST_TOKEN = "ACTIONS_ID_TOKEN_REQUEST_TOKEN"  # noqa: S105 - the name of a variable, not a value
MASK = "::add-mask::"


def mask(value: str, environ: Mapping[str, str]) -> None:
    """Tell the GitHub runner to hide `value` in every later line of the job's log. Elsewhere no
    runner reads the line, and it would only print the secret: nothing is written."""
    if environ.get("GITHUB_ACTIONS") == "true":
        write_unredacted(f"{MASK}{value}\n")


@dataclass(frozen=True)
class _Step:
    title: str  # "step 2 of 3 (the ID token from GitHub)"
    url: str
    fix: str  # what to do when the server refuses or answers nonsense


class _Exchange:
    def __init__(self, target: PublishTarget, policy: RetryPolicy, environ: Mapping[str, str],
                 announce: Callable[[str, Mapping[str, str]], None]) -> None:
        self.target = target
        self.policy = policy
        self.environ = environ
        self.announce = announce
        self.session = bounded_session(policy, proxy=target.proxy)  # the index's mint endpoint: its proxy

    def scrub(self, text: str) -> str:
        return redact(text)

    def learn(self, secret: str) -> None:
        """`secret` is hidden from every later line (redaction.py)."""
        keep_hidden(secret)

    def fail(self, step: _Step, what: str, fix: str | None = None) -> TrustedPublishingFailed:
        return TrustedPublishingFailed(self.scrub(
            f"trusted publishing for {self.target.name}: {step.title}: {public_url(step.url)}: {what}; "
            f"{fix or step.fix}"))

    def answer(self, step: _Step, send: Callable[[], requests.Response], key: str) -> str:
        """The string under `key` of the step's JSON answer; one-line failures."""
        later = "the server is failing or out of reach; run the job again later"
        try:
            response = with_retries(
                step.title, public_url(step.url), send, self.policy, scrub=self.scrub,
                gave_up=lambda last: str(self.fail(step, f"no answer but failures after {self.policy.tries} tries "
                                                         f"(last: {last})", later)),
                too_long=lambda last, wait: str(self.fail(
                    step, f"{last} asks to wait {wait:.0f} s (Retry-After), beyond the retry deadline of "
                          f"{self.policy.deadline:.0f} s", "the server is rate-limiting; run the job again later")))
        except RetriesExhausted as exc:
            raise TrustedPublishingFailed(str(exc)) from None
        try:
            data = response.json()
        except ValueError:
            data = None
        if response.status_code >= 400:
            raise self.fail(step, f"{describe(response)}{self._reasons(data, response)}")
        value = data.get(key) if isinstance(data, dict) else None
        if not isinstance(value, str) or not value:
            shown = response.headers.get("Content-Type", "no content type")
            raise self.fail(step, f"a malformed answer: no {key!r} string in it ({shown})")
        return value

    def _reasons(self, data: Any, response: requests.Response) -> str:
        if isinstance(data, dict):
            errors = data.get("errors")
            if isinstance(errors, list) and errors:
                said = "; ".join(f"{e.get('code', '?')}: {e.get('description', '')}" if isinstance(e, dict)
                                 else str(e) for e in errors)
                return f" ({' '.join(said.split())[:400]})"
            if isinstance(data.get("message"), str):
                return f" ({' '.join(data['message'].split())[:300]})"
        text = " ".join(response.text.split())[:200]
        return f" ({text})" if text else ""

    def request_variables(self, title: str) -> tuple[str, str]:
        """$ACTIONS_ID_TOKEN_REQUEST_URL and _TOKEN, or TrustedPublishingFailed naming what is not set."""
        request_url, request_token = self.environ.get(REQUEST_URL, ""), self.environ.get(REQUEST_TOKEN, "")
        if not (request_url and request_token):
            missing = " and ".join(v for v, value in ((REQUEST_URL, request_url), (REQUEST_TOKEN, request_token))
                                   if not value)
            raise TrustedPublishingFailed(
                f"trusted publishing for {self.target.name}: {title}: {missing} not set; run it in a GitHub Actions "
                f"job with `permissions: id-token: write` (the publish job `shipyard ci generate` writes has it)")
        return request_url, request_token

    def id_token(self, audience: str, title: str, for_whom: str) -> str:
        """GitHub's ID token for `audience` (a JWT), masked and hidden as soon as it is known; `title`
        names the step in a failure, `for_whom` what asked for `audience` (the index, the role)."""
        request_url, request_token = self.request_variables(title)
        github = _Step(title, request_url,
                       "GitHub refused the ID token request: the job needs `permissions: id-token: write` and "
                       "the request token is valid only while the job runs")
        self.learn(request_token)
        separator = "&" if "?" in request_url else "?"
        github_url = f"{request_url}{separator}audience={quote(audience, safe='')}"
        identity = self.answer(github, lambda: self.session.get(
            github_url, headers={"Authorization": f"bearer {request_token}"}), "value")
        self.learn(identity)
        self.announce(identity, self.environ)
        issued_for = _claims(identity).get("aud")
        if issued_for is not None and audience not in ([issued_for] if isinstance(issued_for, str) else issued_for):
            raise self.fail(github, f"GitHub issued the ID token for audience {issued_for!r}, {for_whom} asked for "
                                    f"{audience!r}", f"check that oidc_url of {self.target.name} is the index the "
                                                     f"upload goes to")
        return identity

    def run(self) -> str:
        base = self.target.mint_base
        name = self.target.name
        audience_step = _Step("step 1 of 3 (the audience from the index)", f"{base}/_/oidc/audience",
                              f"check oidc_url of the publish target {name} in release.yaml: the index must "
                              f"serve /_/oidc/audience (PyPI: https://pypi.org, TestPyPI: https://test.pypi.org)")
        self.request_variables("step 2 of 3 (the ID token from GitHub)")  # before any request: named at once
        audience = self.answer(audience_step, lambda: self.session.get(audience_step.url), "audience")
        identity = self.id_token(audience, "step 2 of 3 (the ID token from GitHub)", "the index")
        mint = _Step("step 3 of 3 (the upload token from the index)", f"{base}/_/oidc/mint-token",
                     f"register this repository, its workflow file and environment as a trusted publisher of the "
                     f"project on {public_url(base)} (the project's Settings, Publishing), or fix oidc_url of {name}")
        token = self.answer(mint, lambda: self.session.post(mint.url, json={"token": identity}), "token")
        self.learn(token)
        self.announce(token, self.environ)
        return token


def _claims(jwt: str) -> dict[str, Any]:
    """The payload of a JWT, unverified (the index verifies it); {} when it is not one."""
    parts = jwt.split(".")
    if len(parts) != 3:
        return {}
    try:
        data = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        return {}
    return data if isinstance(data, dict) else {}


def mint_upload_token(target: PublishTarget, policy: RetryPolicy, environ: Mapping[str, str] | None = None,
                      announce: Callable[[str, Mapping[str, str]], None] = mask) -> str:
    """A short-lived upload token for `target` (a pypi target with trusted_publishing), through
    GitHub's ID token; both are given to `announce` (masked) as soon as they are known."""
    return _Exchange(target, policy, os.environ if environ is None else environ, announce).run()


def github_id_token(target: PublishTarget, policy: RetryPolicy, audience: str, environ: Mapping[str, str] | None = None,
                    announce: Callable[[str, Mapping[str, str]], None] = mask) -> str:
    """GitHub's ID token for `audience`, for a target that trades it itself (an s3 target's role:
    sts.amazonaws.com); masked and hidden as soon as it is known."""
    exchange = _Exchange(target, policy, os.environ if environ is None else environ, announce)
    return exchange.id_token(audience, "the ID token from GitHub", "the role")


def check_trusted_publishing(spec: Spec, target_name: str, policy: RetryPolicy | None = None) -> str:
    """`shipyard ci trusted-publishing`: run the exchange once, to see that it works; the token is
    dropped (`shipyard publish` mints its own in the step that uploads)."""
    target = spec.release.publish.get(target_name)
    if target is None or not target.trusted_publishing:
        takes = [n for n, t in spec.release.publish.items() if t.trusted_publishing]
        raise UsageError(f"--target {target_name}: not a publish target of release.yaml with trusted_publishing: "
                         f"true (those that have it: {', '.join(takes) or 'none'})")
    mint_upload_token(target, policy or RetryPolicy())
    return (f"trusted publishing for {target_name}: {public_url(target.mint_base)} minted an upload token; "
            f"`shipyard publish` mints its own in the step that uploads, and nothing was written")
