"""The registry client's configuration, without a server: which scheme and namespace a docker
target's url means, and where its ca_file may appear (the client against real registries:
test_publish_registry_auth.py, test_publish_images.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from shipyard.errors import UsageError
from shipyard.publish.registry_client import trust
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


def test_ca_file_belongs_to_a_docker_target_and_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="ca_file .* belongs to a docker target"):
        PublishTarget(name="tree", kind="static", url="https://example.org/whl/", path="site", ca_file="ca.pem")
    target = PublishTarget(name="images", kind="docker", url="https://127.0.0.1:5443", ca_file="certs/ca.pem")
    with pytest.raises(UsageError, match=r"publish.images.ca_file: no such file; .* \(got certs/ca.pem\)"):
        trust(target, tmp_path)
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    assert trust(target, tmp_path) == str(tmp_path / "certs" / "ca.pem")
    assert trust(target.model_copy(update={"ca_file": None}), tmp_path) in (True, *[
        p for p in ("/usr/lib/ssl/cert.pem", "/etc/ssl/certs/ca-certificates.crt") if Path(p).exists()])
