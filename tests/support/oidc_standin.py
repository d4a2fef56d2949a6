"""A local stand-in for the two services trusted publishing talks to, because neither GitHub's
token service nor PyPI can run here: shaped as their documentation specifies, on 127.0.0.1.

- GitHub's ID token endpoint (what $ACTIONS_ID_TOKEN_REQUEST_URL names in a job with
  `permissions: id-token: write`): GET /github/token?api-version=2.0&audience=<aud> with
  `Authorization: bearer <request token>` answers {"count": …, "value": "<JWT>"}; the JWT's `aud`
  is the audience asked for. Its signature is not a real one: only this stand-in checks it.
- PyPI's endpoints: GET /_/oidc/audience answers {"audience": "pypi"}; POST /_/oidc/mint-token
  {"token": "<JWT>"} answers {"success": true, "token": "pypi-…", "expires": …} for a JWT this
  stand-in issued for its audience, else 422 {"message": "Token request failed", "errors":
  [{"code": …, "description": …}]}. A minted token is handed to `on_mint` (the test makes the
  upload index accept it, as PyPI's own tokens are accepted by its upload endpoint).

`faults` makes one endpoint misbehave: {"audience"|"github"|"mint": an HTTP status, or "garbage"
for a 200 that is not the documented JSON}; `retry_after` is sent with a faulted 429 or 503 (a
rate limit); `issue_for` makes GitHub issue tokens for another audience than the one asked for;
`token_lifetime` makes minted tokens expire that many seconds after they are minted (`live` says
whether one still holds), as PyPI's expire after 15 minutes.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlparse

from support.publish_servers import QuietHandler, loopback_server


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class OidcStandIn:
    request_token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    audience: str = "pypi"
    issue_for: str | None = None
    faults: dict[str, int | str] = field(default_factory=dict)
    retry_after: str | None = None
    on_mint: Callable[[str], None] = lambda _token: None
    issued: list[str] = field(default_factory=list)  # every JWT the GitHub side gave out
    minted: list[str] = field(default_factory=list)  # every upload token the PyPI side gave out
    token_lifetime: float = 900.0
    expiry: dict[str, float] = field(default_factory=dict)  # minted token -> time.monotonic() it expires at
    url: str = ""

    def live(self, token: str) -> bool:
        """Whether `token` is one this stand-in minted and it has not expired."""
        return time.monotonic() < self.expiry.get(token, 0.0)

    @property
    def request_url(self) -> str:
        """What GitHub puts in $ACTIONS_ID_TOKEN_REQUEST_URL (it carries a query already)."""
        return f"{self.url}/github/token?api-version=2.0"

    def _jwt(self, audience: str) -> str:
        claims = {"iss": "https://token.actions.githubusercontent.com", "aud": audience,
                  "repository": "ember-ml/shipyard", "workflow_ref": "ember-ml/shipyard/.github/workflows/"
                  "release.yml@refs/tags/v1.7.0", "environment": "release", "iat": int(time.time()),
                  "exp": int(time.time()) + 300, "jti": secrets.token_hex(8)}
        token = ".".join([_b64(b'{"alg":"RS256","typ":"JWT"}'), _b64(json.dumps(claims).encode()),
                          _b64(secrets.token_bytes(32))])
        self.issued.append(token)
        return token

    def handle(self, method: str, path: str, query: dict[str, list[str]], headers: dict[str, str],
               body: bytes) -> tuple[int, object]:
        if method == "GET" and path == "/_/oidc/audience":
            return self._faulted("audience") or (200, {"audience": self.audience})
        if method == "GET" and path == "/github/token":
            if headers.get("authorization", "") != f"bearer {self.request_token}":
                return 401, {"message": "Bad credentials"}
            audience = query.get("audience", ["https://github.com/ember-ml"])[0]
            return self._faulted("github") or (200, {"count": 1, "value": self._jwt(self.issue_for or audience)})
        if method == "POST" and path == "/_/oidc/mint-token":
            faulted = self._faulted("mint")
            if faulted:
                return faulted
            try:
                token = json.loads(body)["token"]
            except (ValueError, KeyError, TypeError):
                return 422, {"message": "Token request failed", "errors": [
                    {"code": "invalid-payload", "description": "malformed request: token missing"}]}
            if token not in self.issued:
                return 422, {"message": "Token request failed", "errors": [
                    {"code": "invalid-token", "description": "could not verify the token's signature"}]}
            claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
            if claims["aud"] != self.audience:
                return 422, {"message": "Token request failed", "errors": [
                    {"code": "invalid-token", "description": f"invalid audience {claims['aud']!r}"}]}
            minted = "pypi-" + secrets.token_urlsafe(48)
            self.expiry[minted] = time.monotonic() + self.token_lifetime
            self.on_mint(minted)
            self.minted.append(minted)
            return 200, {"success": True, "token": minted, "expires": int(time.time() + self.token_lifetime)}
        return 404, {"message": "not found"}

    def _faulted(self, endpoint: str) -> tuple[int, object] | None:
        fault = self.faults.get(endpoint)
        if fault is None:
            return None
        if fault == "garbage":
            return 200, "<html><body>Service maintenance</body></html>"
        return int(fault), {"message": f"stand-in fault {fault}"}


@contextmanager
def oidc_standin(**options: object) -> Iterator[OidcStandIn]:
    standin = OidcStandIn(**options)  # type: ignore[arg-type]

    class Handler(QuietHandler):
        def _serve(self) -> None:
            parsed = urlparse(self.path)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, payload = standin.handle(self.command, parsed.path, parse_qs(parsed.query),
                                             {k.lower(): v for k, v in self.headers.items()}, body)
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            self.send_response(status)
            if standin.retry_after is not None and status in (429, 503):
                self.send_header("Retry-After", standin.retry_after)
            self.send_header("Content-Type", "text/html" if isinstance(payload, str) else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _serve

    with loopback_server(Handler) as url:
        standin.url = url
        yield standin
