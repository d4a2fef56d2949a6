"""The registry client's configuration, without a server: which scheme and namespace a docker
target's url means, and where its ca_file may appear; a bearer token asked for again when it
expired, against a loopback stand-in (the client against real registries:
test_publish_registry_auth.py, test_publish_images.py)."""

from __future__ import annotations

import base64
import secrets
from pathlib import Path

import pytest
from pydantic import ValidationError
from support.publish_servers import QuietHandler, loopback_server

from shipyard.errors import UsageError
from shipyard.plumbing.retry import RetryPolicy
from shipyard.publish.connection import target_trust as trust
from shipyard.publish.credentials import Credentials
from shipyard.publish.registry_client import RegistryClient
from shipyard.release.destinations import PublishTarget, registry_base


@pytest.mark.parametrize(("url", "expected"), [
    ("127.0.0.1:5000", ("http://127.0.0.1:5000", "127.0.0.1:5000", "")),
    ("localhost:5000", ("http://localhost:5000", "localhost:5000", "")),
    ("[::1]:5000", ("http://[::1]:5000", "[::1]:5000", "")),
    ("registry.example.org", ("https://registry.example.org", "registry.example.org", "")),
    ("ghcr.io/ember-ml", ("https://ghcr.io", "ghcr.io", "ember-ml")),
    ("https://ghcr.io/ember-ml/", ("https://ghcr.io", "ghcr.io", "ember-ml")),
    ("https://127.0.0.1:5443", ("https://127.0.0.1:5443", "127.0.0.1:5443", "")),
    ("http://10.0.0.5:5000", ("http://10.0.0.5:5000", "10.0.0.5:5000", "")),
])
def test_a_url_without_a_scheme_is_https_except_on_loopback(url: str, expected: tuple[str, str, str]) -> None:
    assert registry_base(url) == expected


def test_ca_file_belongs_to_a_target_reached_over_the_network_and_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="ca_file and proxy belong to a target shipyard reaches over the network"):
        PublishTarget(name="tree", kind="static", url="https://example.org/whl/", path="site", ca_file="ca.pem")
    target = PublishTarget(name="images", kind="docker", url="https://127.0.0.1:5443", ca_file="certs/ca.pem")
    with pytest.raises(UsageError, match=r"publish.images.ca_file: no such file; .* \(got certs/ca.pem\)"):
        trust(target, tmp_path)
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    assert trust(target, tmp_path) == str(tmp_path / "certs" / "ca.pem")
    assert trust(target.model_copy(update={"ca_file": None}), tmp_path) in (True, *[
        p for p in ("/usr/lib/ssl/cert.pem", "/etc/ssl/certs/ca-certificates.crt") if Path(p).exists()])


def test_a_bearer_token_that_expired_between_two_calls_is_asked_for_again(tmp_path: Path) -> None:
    # #52 item 2: a registry token lives minutes (Docker Hub's: 5) and a publish of large images
    # outlives it; the next call's 401 is met with a new token, not reported as a failure.
    live: set[str] = set()
    asked: list[str] = []

    class Registry(QuietHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path.startswith("/token"):
                assert self.headers.get("Authorization") == "Basic " + base64.b64encode(b"u:p").decode()
                token = secrets.token_hex(8)
                live.add(token)
                asked.append(token)
                self.send_json(200, {"token": token})
            elif self.headers.get("Authorization", "").removeprefix("Bearer ") in live:
                self.send_json(200, {"name": "r", "tags": ["1.7.0"]})
            else:
                self.send_response(401)
                self.send_header("WWW-Authenticate", f'Bearer realm="http://127.0.0.1:{self.server.server_address[1]}'
                                                     f'/token",service="reg",scope="repository:r:pull"')
                self.send_header("Content-Length", "0")
                self.end_headers()

    with loopback_server(Registry) as url:
        target = PublishTarget(name="images", kind="docker", url=url,
                               username_env="U", password_env="P")
        client = RegistryClient(target, tmp_path, Credentials("u", "p"), RetryPolicy(tries=2, first_pause=0.01),
                                lambda text: text)
        assert client.request("GET", "list tags", "r/tags/list").json()["tags"] == ["1.7.0"]
        live.clear()  # every token given out so far expires
        assert client.request("GET", "list tags", "r/tags/list").json()["tags"] == ["1.7.0"]
    assert len(asked) == 2
