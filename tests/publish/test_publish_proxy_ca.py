"""Publishing through a proxy to an index behind a private CA (#52 item 4): the target's `ca_file`
(any kind that talks to a server) and the standard proxy variables (or the target's `proxy`),
with verification never turned off. The index is the PyPI stand-in over TLS with a certificate of
a CA this test makes; the proxy is a real CONNECT proxy from PyPI (proxy.py) on loopback."""

from __future__ import annotations

import secrets
import time
from pathlib import Path

import pytest
from support.connect_proxy import PROXY, connect_proxy
from support.pypi_standin import pypi_standin
from support.registry_auth import make_tls
from support.release_copy import point_release_yaml
from support.synthetic_release import features, make_wheel, record, write_manifest

from shipyard.cli import main
from shipyard.release.destinations import PublishTarget

DEVPI_TARGET = "    kind: devpi\n    url: http://127.0.0.1:8081/\n"


def _dist(tmp_path: Path) -> Path:
    dist = tmp_path / "dist"
    wheel = make_wheel(dist / "whl" / "cpu" / "uocore", "uocore", "1.7.0.dev20261206+cpu")
    write_manifest(dist, [record(dist, wheel, component="uocore", package_type="wheel", variant="cpu", tag="cpu",
                                 tests=features(), version="1.7.0.dev20261206")], "1.7.0.dev20261206")
    return dist


@pytest.mark.skipif(not Path(PROXY).exists(), reason="proxy.py (a test dependency) is not installed: pip install "
                    "-e '.[test]'")
def test_a_release_goes_through_a_connect_proxy_to_an_index_behind_a_private_ca(tmp_path, monkeypatch, capsys):
    tls = make_tls(tmp_path / "tls")
    password = secrets.token_urlsafe(18)
    monkeypatch.setenv("SHIPYARD_PYPI_USERNAME", "u")
    monkeypatch.setenv("SHIPYARD_PYPI_PASSWORD", password)
    for name in ("NO_PROXY", "no_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    dist = _dist(tmp_path)
    with connect_proxy(tmp_path) as (proxy, log), \
            pypi_standin(lambda user, given: (user, given) == ("u", password), tls=tls) as index:
        monkeypatch.setenv("HTTPS_PROXY", proxy)

        def publish(ca_file: str | None, state: str) -> int:
            root = tmp_path / state
            target = (f"    kind: pypi\n    url: {index.url}\n    index_url: {index.simple}\n    channels: [nightly]\n"
                      + (f"    ca_file: {ca_file}\n" if ca_file else ""))
            point_release_yaml(root, {DEVPI_TARGET: target})
            return main(["--root", str(root), "publish", "--channel", "nightly", "--target", "pypi",
                         "--dist", str(dist), "--state", str(tmp_path / state / "state")])

        # Without the CA, the certificate is refused at once (no five tries), and nothing is sent.
        started = time.monotonic()
        assert publish(None, "untrusted") == 7
        err = " ".join(capsys.readouterr().err.split())
        assert "the server's TLS certificate is not signed by a CA this target trusts" in err, err
        assert "set the target's ca_file in release.yaml" in err and time.monotonic() - started < 20
        assert index.uploaded == []
        # With the CA, through the proxy: uploaded, read back, and the proxy carried it.
        assert publish(str(tls.ca), "trusted") == 0, capsys.readouterr()
        assert index.uploaded == ["uocore-1.7.0.dev20261206-py3-none-any.whl"]
        host = index.url.removeprefix("https://").rstrip("/")
        assert f"CONNECT {host}" in log.read_text(), log.read_text()
        assert password not in capsys.readouterr().err


def test_a_targets_own_proxy_must_be_a_url_without_credentials(tmp_path, capsys):
    target = "    kind: pypi\n    url: https://upload.pypi.org/legacy/\n    channels: [release]\n    proxy: {}\n"
    root = tmp_path / "good"
    point_release_yaml(root, {DEVPI_TARGET: target.format("http://proxy.example.org:3128")})
    assert main(["--root", str(root), "validate"]) == 0, capsys.readouterr()
    for n, (bad, says) in enumerate((("proxy.example.org:3128", "must be an http:// or https:// URL"),
                                     ("http://me:hunter2xyz@proxy.example.org:3128", "must not carry credentials"))):
        root = tmp_path / f"bad{n}"
        point_release_yaml(root, {DEVPI_TARGET: target.format(bad)})
        assert main(["--root", str(root), "validate"]) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert "publish.pypi" in err and says in err, err
        assert "hunter2xyz" not in err
    with pytest.raises(ValueError, match="a static target writes a folder"):
        PublishTarget(name="tree", kind="static", url="https://example.org/whl/", path="site", ca_file="ca.pem")
