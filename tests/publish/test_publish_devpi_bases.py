"""devpi's `bases` stay bounded (#52 item 8): a visible index inherits from its archive and the
newest staging index only, however many publishes it has seen, and every version ever published
is still served. Against a real devpi-server on 127.0.0.1, read through its JSON API."""

from __future__ import annotations

import calendar
import secrets
from pathlib import Path
from typing import Any

import pytest
import requests
from support.publish_servers import devpi_server, unbound_port
from support.release_copy import point_release_yaml
from support.synthetic_release import VERSION, synthetic_dist

from shipyard.cli import main
from shipyard.plumbing.port_ranges import claimed_port_range
from shipyard.release.channel_version import channel_version

pytestmark = pytest.mark.slow


def _json(url: str) -> dict[str, Any]:
    response = requests.get(url, headers={"Accept": "application/json"}, timeout=30)
    assert response.status_code == 200, (url, response.text)
    return response.json()


def test_three_publishes_keep_at_most_two_bases_one_level_deep_and_serve_every_version(tmp_path: Path, capsys,
                                                                                       monkeypatch):
    with claimed_port_range() as ports, devpi_server(tmp_path / "devpi", unbound_port(ports)) as devpi:
        user = "u" + secrets.token_hex(4)
        monkeypatch.setenv("SHIPYARD_PYPI_USERNAME", user)
        monkeypatch.setenv("SHIPYARD_PYPI_PASSWORD", devpi.add_user(user))
        root, dist = tmp_path / "root", tmp_path / "dist"
        point_release_yaml(root, {"url: http://127.0.0.1:8081/": f"url: {devpi.url}/"})
        versions = [channel_version(VERSION, "nightly", calendar.timegm((2026, 12, day, 9, 0, 0)))
                    for day in (1, 2, 3)]
        for version in versions:  # three nightlies, each publish a staging index of its own
            synthetic_dist(dist, [], version=version, payload=version)
            code = main(["--root", str(root), "publish", "--channel", "nightly", "--target", "pypi",
                         "--dist", str(dist), "--state", str(tmp_path / "state")])
            assert code == 0, capsys.readouterr()
        visible = [name for name in devpi.indexes(user) if "-stage-" not in name]
        assert "nightly-cpu" in visible, visible
        for name in visible:
            bases = _json(f"{devpi.url}/{user}/{name}")["result"]["bases"]
            assert len(bases) <= 2, (name, bases)
            for base in bases:  # one level deep: what a visible index inherits from inherits nothing
                assert _json(f"{devpi.url}/{base}")["result"]["bases"] == [], (name, base)
        for tag in ("cpu", "cu118"):
            files = requests.get(f"{devpi.url}/{user}/nightly-{tag}/+simple/ember/",
                                 headers={"Accept": "application/vnd.pypi.simple.v1+json"}, timeout=30).json()["files"]
            assert sorted(f["filename"] for f in files) == sorted(
                f"ember-{v}+{tag}-py3-none-any.whl" for v in versions), files
