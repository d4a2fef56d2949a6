"""The one HTTP client for a docker registry (the distribution API, /v2/): every image read and
write of the registry target goes through `RegistryClient.request`.

- **TLS and proxies.** `https://host` verifies the server against the target's `ca_file`, else the
  system trust store; requests go through its proxy (publish/connection.py). A url without a scheme is
  `https://`, except on a loopback host (127.0.0.1, localhost, ::1), which the docker engine
  also treats as plain HTTP by default.
- **Auth as the registry asks for it.** A request goes out without credentials; a 401 names
  the scheme in `WWW-Authenticate`. `Basic`: the request is sent again with the target's user and
  password. `Bearer realm=…,service=…,scope=…` (Docker Hub, GitHub's container registry,
  distribution's `auth.token`): GET the realm with that service and scope, with the user and
  password as basic auth when the target names them (anonymous otherwise), take `token` (or
  `access_token`) from the JSON answer and send the request again with it. Tokens are kept per
  scope for the run, in memory only.
- **Retries.** Each request goes through retry.py's policy (5xx, resets and timeouts tried again).
- **Pages.** `tags` follows the `Link: <…>; rel="next"` header of `tags/list` to the last page (the
  distribution spec's pagination; `n` asks for a page size): a registry that pages by default
  would otherwise hide every tag past its first page.
- **Secrets.** Passwords and tokens live in request headers only; every text this module puts
  in an error passes `scrub`; each token is handed to redaction.py as it arrives.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

from shipyard.errors import PublishError
from shipyard.plumbing.retry import RetryPolicy, describe, with_retries
from shipyard.publish.connection import target_session
from shipyard.publish.credentials import Credentials
from shipyard.redaction import keep_hidden
from shipyard.release.destinations import PublishTarget, registry_base

_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


class RegistryClient:
    def __init__(self, target: PublishTarget, root: Path, credentials: Credentials, policy: RetryPolicy,
                 scrub: Callable[[str], str]) -> None:
        self.target = target
        self.base, self.host, self.namespace = registry_base(target.url)
        self.credentials = credentials
        self.policy = policy
        self._scrub = scrub
        self.session = target_session(target, root, policy)
        self._tokens: dict[str, str] = {}  # scope → bearer token
        self._last_token: str | None = None
        self._scheme: str | None = None  # what the registry asked for last: basic or bearer

    def scrub(self, text: str) -> str:
        # Each token is known to redaction.py from the moment it arrives (`_token`).
        return self._scrub(text)

    def url(self, path: str) -> str:
        """`path` under /v2/, or a Location the registry answered with (absolute or not)."""
        if path.startswith(("http://", "https://")):
            return path
        return f"{self.base}{path}" if path.startswith("/") else f"{self.base}/v2/{path}"

    def request(self, method: str, what: str, path: str, *, body: bytes | Path | None = None,
                headers: dict[str, str] | None = None, stream: bool = False) -> requests.Response:
        """One API call, with the auth the registry asks for and retry.py's retries; a 4xx is returned.
        `body` may be a file, opened again for each try."""
        url = self.url(path)
        scope: str | None = None
        for _ in range(3):  # unauthenticated (or with what the last call needed), then as the 401 asks
            response = self._send(method, what, url, body, headers or {}, scope, stream)
            if response.status_code != 401:
                return response
            challenge = response.headers.get("WWW-Authenticate", "")
            scheme = challenge.split(" ", 1)[0].lower()
            if scheme == "basic" and self._scheme != "basic" and self.credentials.password:
                self._scheme = "basic"
            elif scheme == "bearer":
                params = dict(_CHALLENGE.findall(challenge))
                wanted = params.get("scope", "")
                if self._scheme == "bearer" and wanted == scope:
                    return response  # a fresh token for this very scope was refused
                self._scheme = "bearer"
                scope = wanted
                self._tokens[scope] = self._last_token = self._token(params, what)
            else:
                return response
        return response

    def tags(self, repo: str, what: str, page_size: int | None = None) -> list[str]:
        """Every tag of `repo` (its name in the API), read page after page as the `Link` header leads
        (`page_size`: the `n` to ask for; None: the registry's own); [] when there is no such repository."""
        path: str | None = f"{repo}/tags/list" + (f"?n={page_size}" if page_size else "")
        tags: list[str] = []
        seen: set[str] = set()
        while path is not None and path not in seen:  # a registry that links a page to itself ends here
            seen.add(path)
            response = self.request("GET", what, path)
            if response.status_code == 404 and not tags:
                return []
            if response.status_code != 200:
                raise self.fail(what, response)
            tags.extend(t for t in (response.json().get("tags") or []) if isinstance(t, str))
            path = response.links.get("next", {}).get("url")
        return sorted(set(tags))

    def _send(self, method: str, what: str, url: str, body: bytes | Path | None, headers: dict[str, str],
              scope: str | None, stream: bool) -> requests.Response:
        def attempt() -> requests.Response:
            auth = dict(headers)
            sent_auth: tuple[str, str] | None = None
            if self._scheme == "basic":
                sent_auth = self.credentials.basic_auth()
            elif self._scheme == "bearer":
                # The scope's own token once a 401 named it; before that the last one (pull,push covers pull).
                token = self._tokens.get(scope) if scope is not None else self._last_token
                if token:
                    auth["Authorization"] = f"Bearer {token}"
            try:
                if isinstance(body, Path):
                    with body.open("rb") as data:
                        return self.session.request(method, url, data=data, headers=auth, auth=sent_auth,
                                                    stream=stream)
                return self.session.request(method, url, data=body, headers=auth, auth=sent_auth, stream=stream)
            except requests.exceptions.SSLError as exc:  # not a fault another try mends
                raise self.untrusted(what, exc) from None

        return with_retries(what, self.host, attempt, self.policy, scrub=self.scrub)

    def _token(self, challenge: dict[str, str], what: str) -> str:
        """A bearer token from the challenge's realm for its service and scope."""
        realm = challenge.get("realm")
        if not realm:
            raise PublishError(f"{what}: {self.host} asks for a bearer token but names no realm; check the registry's "
                               f"auth configuration")
        params = {k: v for k, v in (("service", challenge.get("service")), ("scope", challenge.get("scope"))) if v}
        auth = self.credentials.basic_auth() if self.credentials.password else None
        def attempt() -> requests.Response:
            try:
                return self.session.get(realm, params=params, auth=auth)
            except requests.exceptions.SSLError as exc:
                raise self.untrusted(f"{what} (token from {realm.split('?')[0]})", exc) from None

        response = with_retries(f"{what} (token)", realm.split("?")[0], attempt, self.policy, scrub=self.scrub)
        if response.status_code != 200:
            raise PublishError(self.scrub(f"{what}: the token service {realm.split('?')[0]} refused "
                                          f"{params.get('scope', 'a token')}: {describe(response)}{self.hint()}"))
        try:
            data: Any = response.json()
            token = data.get("token") or data.get("access_token")
        except (ValueError, AttributeError):
            token = None
        if not isinstance(token, str) or not token:
            raise PublishError(f"{what}: the token service {realm.split('?')[0]} answered without a token (JSON with "
                               f"`token` or `access_token` expected); check the registry's auth configuration")
        keep_hidden(token)
        return token

    def untrusted(self, what: str, exc: Exception) -> PublishError:
        reason = "certificate verify failed" if "CERTIFICATE_VERIFY_FAILED" in str(exc) else type(exc).__name__
        fix = ("check that it is the CA that signed the registry's certificate" if self.target.ca_file else
               "set ca_file to the PEM file of the CA that signed its certificate, relative to release.yaml")
        return PublishError(self.scrub(f"{what}: {self.host}: TLS: {reason}; {fix} (release.yaml: "
                                       f"publish.{self.target.name})"))

    def hint(self) -> str:
        t = self.target
        if not (t.username_env or t.password_env):
            return (f"; the registry wants credentials: set username_env and password_env (release.yaml: "
                    f"publish.{t.name})")
        return f"; check {t.username_env} and {t.password_env} (release.yaml: publish.{t.name})"

    def fail(self, what: str, response: requests.Response) -> PublishError:
        hint = self.hint() if response.status_code in (401, 403) else ""
        return PublishError(self.scrub(f"{what}: {self.host}: {describe(response)}{hint}"))
