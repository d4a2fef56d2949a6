"""shipyard publish and promote against real servers on 127.0.0.1 (#13): a devpi server, a web
server over the static wheel tree, the conda channel server. Small real artifacts (tiny wheels,
fixture .conda packages); the release's own wheels and conda packages are published end to end
in test_publish_release.py, and faults are injected in test_publish_faults.py."""

from __future__ import annotations

import calendar
import logging
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.fault_proxy import FaultProxy
from support.publish_project import PublishProject
from support.publish_servers import Devpi, Site, pip_installed_sha, publish_site
from support.synthetic_release import VERSION, build_conda_packages, synthetic_dist

from shipyard.cli import main
from shipyard.conda.serve import serve_channel
from shipyard.conda.solve_install import InstallRequest, solve_and_install
from shipyard.plumbing.hashing import sha256_of
from shipyard.publish.plain_version import plain_version_wheel
from shipyard.release.channel_version import channel_version

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
SECRET = "s3cr3t-Zq8vLw2Kp-publish"


@dataclass
class Servers:
    site: Site
    conda_packages: list[Path]

    @property
    def devpi(self) -> Devpi:
        return self.site.devpi

    @property
    def tree_url(self) -> str:
        return self.site.tree_url

    @property
    def conda_url(self) -> str:
        return self.site.conda_url

    @property
    def token(self) -> str:
        return self.site.token

    @property
    def folder(self) -> Path:
        return self.site.folder


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    base = tmp_path_factory.mktemp("servers")
    packages = build_conda_packages(base / "built", ["cpu", "cu118"])
    with publish_site(base) as site:
        yield Servers(site, packages)


@dataclass(frozen=True, kw_only=True)
class Project(PublishProject):
    user: str  # the test's own devpi user, whose trees are sub-folders of their own


def _project(servers: Servers, tmp_path: Path, *, password: str | None = None, token: str | None = None,
             devpi_url: str | None = None, conda_url: str | None = None) -> Project:
    user = "u" + secrets.token_hex(4)
    password = servers.devpi.add_user(user, password)
    # The targets write into the folders the web servers serve, one sub-tree per test user.
    replacements = servers.site.replacements(prefix=user, devpi_url=devpi_url, conda_url=conda_url)
    env = {"SHIPYARD_PYPI_USERNAME": user, "SHIPYARD_PYPI_PASSWORD": password,
           "SHIPYARD_CONDA_TOKEN": token or servers.token}
    return Project.laid_out(tmp_path, replacements, env, user=user)


def _conda_sha(servers: Servers, user: str, channel: str, spec: str, tmp_path: Path) -> str:
    url = servers.conda_url + f"conda/{user}/{channel}/"
    result = solve_and_install(InstallRequest(channels=[url], specs=[spec], prefix=str(tmp_path / "prefix"),
                                              cache_dir=str(tmp_path / "cache")))
    assert result.error is None and result.unsatisfiable is None, result
    [package] = result.packages
    return package.sha256


def test_publish_then_promote_through_every_channel_gives_users_the_tested_bytes(servers: Servers, tmp_path: Path):
    project = _project(servers, tmp_path)
    records = {r.name: r for r in synthetic_dist(project.dist, servers.conda_packages)}
    code, out = project.run("publish", "--channel", "nightly")
    assert code == 0, out
    assert "files published" in out
    for source, channel in ((None, "nightly"), ("nightly", "test"), ("test", "release")):
        if source:
            code, out = project.run("promote", VERSION, "--from", source, "--to", channel)
            assert code == 0, out
        where = tmp_path / channel
        for tag in ("cpu", "cu118"):
            wheel = records[f"ember-{VERSION}+{tag}-py3-none-any.whl"]
            index = f"{servers.devpi.url}/{project.user}/{channel}-{tag}/+simple/"
            assert pip_installed_sha(index, f"ember=={VERSION}+{tag}", where / f"devpi-{tag}") == wheel.sha256
            tree = f"{servers.tree_url}{project.user}/{channel}/{tag}/"
            assert pip_installed_sha(tree, f"ember=={VERSION}+{tag}", where / f"tree-{tag}") == wheel.sha256
            # The pure wheel is in every variant's index, the same bytes.
            pure = records[f"emberaudio-{VERSION}-py3-none-any.whl"]
            assert pip_installed_sha(index, "emberaudio", where / f"pure-{tag}") == pure.sha256
        for package in servers.conda_packages:
            tag = "cu118" if "cu118" in package.name else "cpu"
            got = _conda_sha(servers, project.user, channel, f"shipyard-featured * {tag}_*", where / f"conda-{tag}")
            assert got == records[package.name].sha256
    # The PyPI flavour: the default variant under the plain version, installable with --require-hashes.
    plain = plain_version_wheel(project.dist / records[f"ember-{VERSION}+cpu-py3-none-any.whl"].path,
                                tmp_path / "expected")
    assert plain.name == f"ember-{VERSION}-py3-none-any.whl"
    requirements = tmp_path / "req.txt"
    requirements.write_text(f"ember=={VERSION} --hash=sha256:{sha256_of(plain)}\n")
    index = f"{servers.devpi.url}/{project.user}/release/+simple/"
    got = pip_installed_sha(index, str(requirements), tmp_path / "plain", "--require-hashes", "-r")
    assert got == sha256_of(plain)
    installed = tmp_path / "plain" / "site" / f"ember-{VERSION}.dist-info"
    assert f"Version: {VERSION}\n" in (installed / "METADATA").read_text()
    assert (installed / "RECORD").is_file()


def test_republishing_the_same_bytes_uploads_nothing(servers: Servers, tmp_path: Path):
    project = _project(servers, tmp_path)
    synthetic_dist(project.dist, servers.conda_packages)
    assert project.run("publish", "--channel", "nightly")[0] == 0
    indexes = servers.devpi.indexes(project.user)
    journal = (project.root / ".shipyard" / "publish" / "pypi.jsonl").read_text()
    code, out = project.run("publish", "--channel", "nightly")
    assert code == 0, out
    assert "nightly: 0 files published" in " ".join(out.split()), out
    assert servers.devpi.indexes(project.user) == indexes
    assert (project.root / ".shipyard" / "publish" / "pypi.jsonl").read_text() == journal


def test_a_devpi_publish_sends_the_password_once(servers: Servers, tmp_path: Path, capsys, monkeypatch):
    """devpi checks a password with argon2 on every request that carries it (about 0.15 s of the
    server's CPU): a publish logs in once, then sends devpi's login token with every write (twine's
    uploads included), and never shows the token."""
    import base64

    import requests

    project = _project(servers, tmp_path)
    for name, value in project.env.items():
        monkeypatch.setenv(name, value)
    synthetic_dist(project.dist, servers.conda_packages)
    sent: list[requests.PreparedRequest] = []
    send = requests.Session.send

    def recording(self: requests.Session, request: requests.PreparedRequest, **kwargs: object) -> requests.Response:
        sent.append(request)
        return send(self, request, **kwargs)

    monkeypatch.setattr(requests.Session, "send", recording)
    code = main(["-v", "--root", str(project.root), "publish", "--channel", "nightly", "--target", "pypi",
                 "--dist", str(project.dist)])
    shown = "".join(capsys.readouterr())
    assert code == 0, shown

    def basic(request: requests.PreparedRequest) -> str | None:
        header = request.headers.get("Authorization", "")
        return base64.b64decode(header.removeprefix("Basic ")).decode() if header.startswith("Basic ") else None

    def body(request: requests.PreparedRequest) -> bytes:
        data = request.body  # twine's multipart upload is a stream: it carries the wheel, not a password
        return data.encode() if isinstance(data, str) else data if isinstance(data, bytes) else b""

    password = project.env["SHIPYARD_PYPI_PASSWORD"]
    to_devpi = [r for r in sent if (r.url or "").startswith(servers.devpi.url)]
    carrying = [(r.method, r.url) for r in to_devpi
                if password.encode() in body(r) or password in (basic(r) or "")]
    assert carrying == [("POST", f"{servers.devpi.url}/+login")], carrying
    writes = [r for r in to_devpi if r.method in ("PUT", "PATCH", "POST") and r.url != carrying[0][1]]
    assert [r for r in writes if r.method == "POST"], [(r.method, r.url) for r in writes]  # the uploads
    [auth] = {basic(r) for r in writes}  # one token for the whole publish, sent with every write
    assert auth is not None and auth.startswith(f"{project.user}:")
    token = auth.split(":", 1)[1]
    assert token and token != password and token not in shown


def test_a_published_name_with_other_bytes_is_refused_naming_both_hashes(servers: Servers, tmp_path: Path):
    project = _project(servers, tmp_path)
    first = {r.name: r for r in synthetic_dist(project.dist, [])}
    assert project.run("publish", "--channel", "nightly", "--target", "pypi")[0] == 0
    indexes = servers.devpi.indexes(project.user)
    second = {r.name: r for r in synthetic_dist(project.dist, [], payload="rebuilt")}  # same names, other bytes
    name = f"ember-{VERSION}+cpu-py3-none-any.whl"
    assert first[name].sha256 != second[name].sha256
    code, out = project.run("publish", "--channel", "nightly", "--target", "pypi")
    assert code == 8, out
    flat = " ".join(out.split())
    assert first[name].sha256 in flat and second[name].sha256 in flat and name in flat
    assert "nothing was uploaded" in flat
    assert servers.devpi.indexes(project.user) == indexes  # no staging index was even made


def test_a_failing_stable_feature_blocks_test_and_is_marked_on_nightly(servers: Servers, tmp_path: Path):
    project = _project(servers, tmp_path)
    synthetic_dist(project.dist, servers.conda_packages, stable="failed", beta="failed")
    code, out = project.run("publish", "--channel", "test")
    assert code == 9, out
    flat = " ".join(out.split())
    assert "ember.kernels (stable)" in flat and "nothing was uploaded" in flat
    assert servers.devpi.indexes(project.user) == []
    assert not (servers.folder / "whl" / project.user / "test").exists()
    code, out = project.run("publish", "--channel", "nightly")
    assert code == 0, out
    flat = " ".join(out.split())
    assert "marked: published to nightly with a stable feature not proven" in flat
    assert "beta failure: ember" in flat and "ember.fft (beta)" in flat
    # Promotion to test is gated the same way.
    code, out = project.run("promote", VERSION, "--from", "nightly", "--to", "test")
    assert code == 9, out


def test_each_nightly_publishes_under_its_own_version_and_test_refuses_a_nightly(servers: Servers, tmp_path: Path):
    """Nightlies of commit A (1 December) and commit B (2 December, other bytes) both publish, side
    by side under their development versions; A's nightly again uploads nothing; a nightly's
    manifest on the test channel is refused in one line before anything is uploaded."""
    project = _project(servers, tmp_path)
    a, b = (channel_version(VERSION, "nightly", calendar.timegm((2026, 12, day, 9, 0, 0))) for day in (1, 2))
    assert (a, b) == ("1.7.0.dev20261201", "1.7.0.dev20261202")
    first = {r.name: r for r in synthetic_dist(project.dist, [], version=a, payload="commit A")}
    code, out = project.run("publish", "--channel", "nightly")
    assert code == 0, out
    second = {r.name: r for r in synthetic_dist(project.dist, [], version=b, payload="commit B")}
    code, out = project.run("publish", "--channel", "nightly")
    assert code == 0, out  # B's names are new: no immutability conflict with A's
    # Both nightlies are served: A's by its pin, B's as the newest (pip takes a development version
    # unasked when there is nothing else).
    index = f"{servers.devpi.url}/{project.user}/nightly-cpu/+simple/"
    got = pip_installed_sha(index, f"ember=={a}+cpu", tmp_path / "pinned")
    assert got == first[f"ember-{a}+cpu-py3-none-any.whl"].sha256
    assert pip_installed_sha(index, "ember", tmp_path / "newest") == second[f"ember-{b}+cpu-py3-none-any.whl"].sha256
    # The same commit again: the same names and bytes, nothing to upload.
    synthetic_dist(project.dist, [], version=a, payload="commit A")
    indexes = servers.devpi.indexes(project.user)
    code, out = project.run("publish", "--channel", "nightly")
    assert code == 0, out
    assert "nightly: 0 files published" in " ".join(out.split()), out
    # A nightly on test: refused, one line, exit 2, nothing uploaded.
    code, out = project.run("publish", "--channel", "test")
    assert code == 2, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines == [f"error: publish --channel test: {project.dist / 'manifest.json'}: version {a} is a nightly "
                     f"development version, and channel test takes plain versions only; build it for test "
                     f"(--publish-channel test), or publish this build to nightly"], out
    code, out = project.run("promote", a, "--from", "nightly", "--to", "test")
    assert code == 2 and f"promote {a} --to test: version {a} is a nightly development version" in out, out
    assert servers.devpi.indexes(project.user) == indexes
    assert not (servers.folder / "whl" / project.user / "test").exists()


def test_a_missing_credential_stops_before_any_upload(servers: Servers, tmp_path: Path):
    project = _project(servers, tmp_path)
    synthetic_dist(project.dist, servers.conda_packages)
    del project.env["SHIPYARD_CONDA_TOKEN"]
    code, out = project.run("publish", "--channel", "nightly")
    assert code == 2, out
    flat = " ".join(out.split())
    assert "publish.conda-channel.token_env: the environment variable SHIPYARD_CONDA_TOKEN is not set" in flat
    assert servers.devpi.indexes(project.user) == []
    assert not (servers.folder / "whl" / project.user).exists()


def test_a_server_that_keeps_failing_is_named_with_the_artifact_and_its_last_response(servers: Servers,
                                                                                       tmp_path: Path):
    def uploads_fail(n: int, line: str) -> str:  # the log-in (a POST too) goes through: it happens before any upload
        return "503" if line.startswith("POST") and "/+login " not in line else "pass"

    with FaultProxy(servers.devpi.port, uploads_fail) as proxy:
        project = _project(servers, tmp_path, devpi_url=proxy.url)
        synthetic_dist(project.dist, [])
        code, out = project.run("publish", "--channel", "nightly", "--target", "pypi")
    assert code == 7, out
    flat = " ".join(out.split())
    assert "upload emberaudio-1.7.0-py3-none-any.whl" in flat or "upload ember-1.7.0+" in flat
    assert f"{proxy.url}: gave up after 2 tries; last response: HTTP 503 Service Unavailable" in flat
    assert proxy.injected["503"] == 2


def test_secrets_appear_in_no_output_and_no_written_file(servers: Servers, tmp_path: Path, capsys, caplog, monkeypatch):
    """A known secret in every credential variable, every publish path run, failures included."""
    caplog.set_level(logging.DEBUG)
    with FaultProxy(servers.devpi.port, lambda n, line: "pass") as proxy, \
            serve_channel({"conda": servers.folder / "conda"}, token=SECRET) as conda:
        project = _project(servers, tmp_path, password=SECRET, token=SECRET, devpi_url=proxy.url, conda_url=conda)
        project.env["SHIPYARD_PYPI_USERNAME"] = project.user  # a name, not a secret: devpi shows it
        for name, value in project.env.items():
            monkeypatch.setenv(name, value)

        def shipyard(*args: str) -> int:
            return main(["-v", "--root", str(project.root), *args, "--dist", str(project.dist), "--tries", "2",
                         "--first-pause", "0.05", "--timeout", "5"])

        synthetic_dist(project.dist, servers.conda_packages)
        codes = [shipyard("publish", "--channel", "nightly"), shipyard("publish", "--channel", "nightly"),
                 shipyard("promote", VERSION, "--from", "nightly", "--to", "test")]
        synthetic_dist(project.dist, servers.conda_packages, payload="rebuilt")
        codes.append(shipyard("publish", "--channel", "nightly"))  # immutability failure
        synthetic_dist(project.dist, servers.conda_packages, stable="failed")
        codes.append(shipyard("publish", "--channel", "release"))  # gate failure
        synthetic_dist(project.dist, servers.conda_packages)
        proxy.plan = lambda n, line: "503" if line.startswith("POST") else "pass"
        codes.append(shipyard("promote", VERSION, "--from", "test", "--to", "release", "--target", "pypi"))
        proxy.plan = lambda n, line: "reset"
        codes.append(shipyard("publish", "--channel", "test", "--target", "pypi"))
        monkeypatch.setenv("SHIPYARD_PYPI_PASSWORD", "wrong-" + SECRET)  # a refused login
        proxy.plan = lambda n, line: "pass"
        codes.append(shipyard("publish", "--channel", "release", "--target", "pypi"))
        monkeypatch.delenv("SHIPYARD_CONDA_TOKEN")
        codes.append(shipyard("publish", "--channel", "release"))
    assert codes[:3] == [0, 0, 0] and all(c != 0 for c in codes[3:]), codes
    captured = capsys.readouterr()
    shown = captured.out + captured.err + caplog.text
    assert "gave up after 2 tries" in shown and "published with sha256" in shown  # the failures did happen
    assert SECRET not in shown
    written = [p for folder in (project.root, project.dist, servers.folder / "whl" / project.user,
                                servers.folder / "conda" / project.user)
               for p in folder.rglob("*") if p.is_file() and not p.is_symlink()]
    assert any(p.name.endswith(".jsonl") for p in written)
    assert [p for p in written if SECRET.encode() in p.read_bytes()] == []


def test_a_pypi_target_reads_the_pep_691_json_an_index_serves(servers: Servers, tmp_path: Path):
    """`kind: pypi` against a devpi index used as a plain upload-API index: devpi answers the simple
    API in PEP 691 JSON (pypiserver, in test_publish_pypi.py, only in PEP 503 HTML)."""
    import requests

    from shipyard.publish.simple_index import ACCEPT, JSON_TYPE

    user = "u" + secrets.token_hex(4)
    password = servers.devpi.add_user(user)
    index = f"{servers.devpi.url}/{user}/plain/"
    created = requests.put(index.rstrip("/"), auth=(user, password), timeout=30,
                           json={"type": "stage", "bases": [], "volatile": False})
    assert created.status_code in (200, 201), created.text
    root = tmp_path / "root"
    servers.site.release_yaml(root, prefix=user)
    text = (root / "release.yaml").read_text()
    devpi_target = f"    kind: devpi\n    url: {servers.devpi.url}/\n"
    assert devpi_target in text
    (root / "release.yaml").write_text(text.replace(
        devpi_target, f"    kind: pypi\n    url: {index}\n    index_url: {index}+simple/\n"
                       f"    channels: [nightly]\n"))
    project = Project(root=root, dist=tmp_path / "dist", user=user,
                      env={"SHIPYARD_PYPI_USERNAME": user, "SHIPYARD_PYPI_PASSWORD": password})
    synthetic_dist(project.dist, [])
    code, out = project.run("publish", "--channel", "nightly", "--target", "pypi")
    assert code == 0, out
    assert "2 files published" in " ".join(out.split()), out  # ember under the plain version, emberaudio
    page = requests.get(f"{index}+simple/ember/", headers={"Accept": ACCEPT}, timeout=30)
    assert page.headers["Content-Type"].startswith(JSON_TYPE)  # what the target read: the JSON form
    plain = plain_version_wheel(project.dist / "whl" / "cpu" / "ember" / f"ember-{VERSION}+cpu-py3-none-any.whl",
                                tmp_path / "plain")
    assert pip_installed_sha(f"{index}+simple/", f"ember=={VERSION}", tmp_path / "pip") == sha256_of(plain)
    code, out = project.run("publish", "--channel", "nightly", "--target", "pypi")
    assert code == 0, out
    assert "0 files published, 2 already there" in " ".join(out.split()), out
