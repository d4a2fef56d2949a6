"""`kind: pypi` against a real pypiserver on 127.0.0.1 (#29): an index that speaks only the upload
API twine uses and PEP 503 HTML, with no staging, as PyPI-compatible indexes are. Small real wheels
(tests/support/synthetic_release.py), a project of their own per test (the index is one flat namespace)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.fault_proxy import FaultProxy
from support.publish_project import PublishProject
from support.publish_servers import PypiServer, busy_server, pip_installed_sha, pypi_server
from support.pypi_standin import pypi_standin
from support.release_copy import point_release_yaml
from support.synthetic_release import VERSION, features, make_wheel, record, write_manifest

from shipyard.cli import main
from shipyard.plumbing.hashing import sha256_of
from shipyard.publish.plain_version import plain_version_wheel

DEVPI_TARGET = "    kind: devpi\n    url: http://127.0.0.1:8081/\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PypiServer]:
    with pypi_server(tmp_path_factory.mktemp("pypiserver")) as running:
        yield running


def _project(server: PypiServer, tmp_path: Path, *, upload_url: str | None = None) -> PublishProject:
    """release.yaml whose wheel target is a pypi target on `server` (uploads through `upload_url` when
    given, e.g. a fault proxy), and an uploader of its own."""
    user, password = "u" + secrets.token_hex(4), secrets.token_urlsafe(18)
    server.add_user(user, password)
    # -v: every log line too, so that a credential in any of them would be seen.
    return PublishProject.laid_out(tmp_path, {DEVPI_TARGET: f"    kind: pypi\n    url: {upload_url or server.url}\n"
                                                            f"    index_url: {server.simple}\n"
                                                            "    channels: [nightly]\n"},
                                   {"SHIPYARD_PYPI_USERNAME": user, "SHIPYARD_PYPI_PASSWORD": password},
                                   tries=3, verbose=True)


def _dist(dist: Path, *projects: str, payload: str = "") -> dict[str, Path]:
    """dist/ with cpu and cu118 wheels of each project, and its manifest; what the pypi target gets
    (each cpu wheel under the plain version), by file name."""
    records, out = [], {}
    for project in projects:
        for variant, tag in (("cpu", "cpu"), ("cuda11", "cu118")):
            wheel = make_wheel(dist / "whl" / tag / project, project, f"{VERSION}+{tag}", payload=payload)
            records.append(record(dist, wheel, component=project, package_type="wheel", variant=variant, tag=tag,
                                  tests=features()))
            if tag == "cpu":
                plain = plain_version_wheel(wheel, dist.parent / f"plain-{payload}")
                out[plain.name] = plain
    write_manifest(dist, records)
    return out


def _publish(project: PublishProject) -> tuple[int, str]:
    return project.run("publish", "--channel", "nightly", "--target", "pypi")


@pytest.mark.slow
def test_a_release_reaches_pip_through_the_upload_api_and_a_republish_uploads_nothing(server: PypiServer,
                                                                                       tmp_path: Path):
    name = "pa" + secrets.token_hex(3)
    project = _project(server, tmp_path)
    [(filename, wheel)] = _dist(project.dist, name).items()
    code, first_out = _publish(project)
    assert code == 0, first_out
    assert "1 files published" in " ".join(first_out.split()), first_out
    assert "upload " in first_out  # -v shows the requests and steps: none of them with the password
    assert filename == f"{name}-{VERSION}-py3-none-any.whl"  # the plain version: PyPI refuses +cpu
    assert server.files()[filename] == sha256_of(wheel)
    assert not any("+cu118" in f or f.startswith(f"{name}-{VERSION}+") for f in server.files())
    assert pip_installed_sha(server.simple, f"{name}=={VERSION}", tmp_path / "pip") == sha256_of(wheel)
    stored = {p.name: p.stat().st_mtime_ns for p in server.packages.iterdir()}
    journal = (project.root / ".shipyard" / "publish" / "pypi.jsonl").read_text()
    code, out = _publish(project)
    assert code == 0, out
    assert "0 files published, 1 already there" in " ".join(out.split()), out
    assert {p.name: p.stat().st_mtime_ns for p in server.packages.iterdir()} == stored
    assert (project.root / ".shipyard" / "publish" / "pypi.jsonl").read_text() == journal
    password = project.env["SHIPYARD_PYPI_PASSWORD"]
    assert password not in first_out + out
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and password.encode() in p.read_bytes()]


@pytest.mark.slow
def test_a_published_name_with_other_bytes_is_refused_before_any_upload(server: PypiServer, tmp_path: Path):
    name, other = "pb" + secrets.token_hex(3), "pc" + secrets.token_hex(3)
    project = _project(server, tmp_path)
    [(filename, first)] = _dist(project.dist, name).items()
    first_sha = sha256_of(first)
    assert _publish(project)[0] == 0
    # The same name rebuilt with other bytes, beside a project the index does not hold yet.
    rebuilt = _dist(project.dist, name, other, payload="rebuilt")
    second_sha = sha256_of(rebuilt[filename])
    assert second_sha != first_sha
    before = server.files()
    code, out = _publish(project)
    assert code == 8, out
    flat = " ".join(out.split())
    assert filename in flat and first_sha in flat and second_sha in flat and "nothing was uploaded" in flat
    assert server.files() == before  # neither the rebuilt file nor the other project's


@pytest.mark.slow
def test_a_lost_answer_to_an_upload_is_success_when_the_index_holds_the_same_bytes(server: PypiServer,
                                                                                   tmp_path: Path):
    name = "pd" + secrets.token_hex(3)
    # The first upload reaches pypiserver, which stores the file; its answer never reaches shipyard.
    # The try after it is answered "file exists", and the index shows the same sha256: done.
    with FaultProxy(server.port, lambda _n, line: "lost" if line.startswith("POST") and lost.append(line) is None
                    and len(lost) == 1 else "pass") as proxy:
        lost: list[str] = []
        project = _project(server, tmp_path, upload_url=proxy.url + "/")
        [(filename, wheel)] = _dist(project.dist, name).items()
        code, out = _publish(project)
    assert code == 0, out
    assert proxy.injected["lost"] == 1 and len(lost) == 2, (proxy.injected, lost)
    assert server.files()[filename] == sha256_of(wheel)
    assert "1 files published" in " ".join(out.split()), out


def test_a_pypi_target_takes_only_the_channels_it_names_and_is_not_promoted_to(tmp_path: Path, capsys, monkeypatch):
    # No server and no credentials: a nightly run must not touch an index that takes only release.
    for name in ("SHIPYARD_PYPI_USERNAME", "SHIPYARD_PYPI_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    root = tmp_path / "root"
    point_release_yaml(root, {DEVPI_TARGET: "    kind: pypi\n    url: http://127.0.0.1:9/\n"
                                            "    index_url: http://127.0.0.1:9/simple/\n    channels: [release]\n"})
    _dist(tmp_path / "dist", "pe")
    common = ["--dist", str(tmp_path / "dist"), "--state", str(tmp_path / "state")]
    # Every target: the tree takes the wheels; the pypi target is left out, so its unset credentials
    # (a MissingCredential, exit 2, were it taking part) and its unreachable URL do not matter.
    assert main(["--root", str(root), "publish", "--channel", "nightly", *common]) == 0, capsys.readouterr()
    assert "pypi" in capsys.readouterr().out
    assert main(["--root", str(root), "publish", "--channel", "nightly", "--target", "wheels-tree",
                 "--target", "pypi", *common]) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert ("--target pypi --channel nightly: release.yaml's publish.pypi.channels names "
            "release only") in said, said
    common += ["--target", "pypi"]
    assert main(["--root", str(root), "promote", VERSION, "--from", "test", "--to", "release", *common]) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert "a pypi target is one index without channels" in said, said
    assert "shipyard publish --channel release --target <name>" in said, said


def test_an_index_that_rate_limits_past_the_deadline_stops_the_publish_in_one_line(tmp_path: Path, capsys,
                                                                                    monkeypatch):
    # #52 item 5: a 429 asking for an hour is not slept through, and not mistaken for an answer.
    monkeypatch.setenv("SHIPYARD_PYPI_USERNAME", "u")
    monkeypatch.setenv("SHIPYARD_PYPI_PASSWORD", secrets.token_urlsafe(18))
    with busy_server([(429, {"Retry-After": "3600"})]) as busy:
        root = tmp_path / "root"
        point_release_yaml(root, {DEVPI_TARGET: f"    kind: pypi\n    url: {busy.url}legacy/\n"
                                                f"    index_url: {busy.url}simple/\n    channels: [nightly]\n"})
        _dist(tmp_path / "dist", "pr")
        started = time.monotonic()
        code = main(["--root", str(root), "publish", "--channel", "nightly", "--target", "pypi",
                     "--dist", str(tmp_path / "dist"), "--state", str(tmp_path / "state"), "--first-pause", "0.01"])
    out, err = capsys.readouterr()
    assert code == 7, out + err
    assert time.monotonic() - started < 30
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert f"{busy.url}simple/: HTTP 429 Too Many Requests asks to wait 3600 s (Retry-After), beyond the retry " \
           f"deadline of 120 s" in lines[0], lines
    assert "Traceback" not in out + err


def test_a_pypi_target_without_channels_is_refused_in_one_line_before_anything_is_published(tmp_path: Path, capsys):
    # #52 item 8: taking every channel by default sent nightly development versions to PyPI.
    root = tmp_path / "root"
    point_release_yaml(root, {DEVPI_TARGET: "    kind: pypi\n    url: http://127.0.0.1:9/\n"
                                            "    index_url: http://127.0.0.1:9/simple/\n"})
    _dist(tmp_path / "dist", "pc")
    code = main(["--root", str(root), "publish", "--channel", "nightly", "--dist", str(tmp_path / "dist"),
                 "--state", str(tmp_path / "state")])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[0] == "error: 1 problem in the release description:" and len(lines) == 2, lines  # SpecError's form
    assert "release.yaml:" in lines[1] and "publish.pypi" in lines[1], lines
    assert "set channels (e.g. channels: [release])" in lines[1], lines
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").rglob("*.jsonl"))


def test_a_component_is_uploaded_before_the_components_that_depend_on_it(tmp_path: Path, capsys, monkeypatch):
    # #52 item 8: each upload to PyPI is visible at once. With emberaudio's wheel up before ember's,
    # `pip install emberaudio` in between (or after a publish stopped there) finds no ember 1.7.0.
    monkeypatch.setenv("SHIPYARD_PYPI_USERNAME", "u")
    monkeypatch.setenv("SHIPYARD_PYPI_PASSWORD", password := secrets.token_urlsafe(18))
    dist, records = tmp_path / "dist", []
    # The manifest lists the dependents first: the order a release.yaml may well name them in.
    for project, requires in (("uoaudio", [f"uocore=={VERSION}", "numpy>=1.20"]), ("uovision", [f"uocore=={VERSION}"]),
                              ("uocore", ["numpy>=1.20"])):
        for variant, tag in (("cpu", "cpu"), ("cuda11", "cu118")):
            wheel = make_wheel(dist / "whl" / tag / project, project, f"{VERSION}+{tag}", requires=requires)
            records.append(record(dist, wheel, component=project, package_type="wheel", variant=variant, tag=tag,
                                  tests=features()))
    write_manifest(dist, records)
    with pypi_standin(lambda user, given: (user, given) == ("u", password)) as index:
        root = tmp_path / "root"
        point_release_yaml(root, {DEVPI_TARGET: f"    kind: pypi\n    url: {index.url}\n"
                                                f"    index_url: {index.simple}\n    channels: [nightly]\n"})
        code = main(["--root", str(root), "publish", "--channel", "nightly", "--target", "pypi",
                     "--dist", str(dist), "--state", str(tmp_path / "state")])
        out, err = capsys.readouterr()
    assert code == 0, out + err
    assert [name.split("-")[0] for name in index.uploaded] == ["uocore", "uoaudio", "uovision"], index.uploaded


def _publish_to(index_url: str, simple: str, tmp_path: Path, *options: str) -> int:
    root = tmp_path / "root"
    point_release_yaml(root, {DEVPI_TARGET: f"    kind: pypi\n    url: {index_url}\n"
                                            f"    index_url: {simple}\n    channels: [nightly]\n"})
    return main(["--root", str(root), "publish", "--channel", "nightly", "--target", "pypi",
                 "--dist", str(tmp_path / "dist"), "--state", str(tmp_path / "state"), "--first-pause", "0.01",
                 *options])


def test_an_index_whose_page_lags_behind_an_upload_is_read_again_until_it_lists_it(tmp_path: Path, capsys,
                                                                                    monkeypatch):
    # #52 item 3: a CDN in front of PyPI serves its cached page (without the new file) for a while
    # after an upload; the read-back failed on the first stale read, with advice about index_url.
    monkeypatch.setenv("SHIPYARD_PYPI_USERNAME", "u")
    monkeypatch.setenv("SHIPYARD_PYPI_PASSWORD", password := secrets.token_urlsafe(18))
    [(filename, wheel)] = _dist(tmp_path / "dist", "lag").items()
    with pypi_standin(lambda user, given: (user, given) == ("u", password), stale_reads=4) as index:
        code = _publish_to(index.url, index.simple, tmp_path, "--visible-within", "10")
        out, err = capsys.readouterr()
    assert code == 0, out + err
    assert index.sha256s() == {filename: sha256_of(wheel)}
    assert "1 files published" in " ".join(out.split()), out


def test_an_index_that_never_lists_an_upload_stops_in_one_line_saying_how_long_it_waited(tmp_path: Path, capsys,
                                                                                          monkeypatch):
    monkeypatch.setenv("SHIPYARD_PYPI_USERNAME", "u")
    monkeypatch.setenv("SHIPYARD_PYPI_PASSWORD", password := secrets.token_urlsafe(18))
    [(filename, _)] = _dist(tmp_path / "dist", "never").items()
    with pypi_standin(lambda user, given: (user, given) == ("u", password), stale_reads=10**6) as index:
        started = time.monotonic()
        code = _publish_to(index.url, index.simple, tmp_path, "--visible-within", "0.5")
        out, err = capsys.readouterr()
    assert code == 7, out + err
    assert time.monotonic() - started < 10
    assert index.page_reads > 3  # it did look again
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("  pypi: upload")]
    assert len(lines) == 1, lines
    assert f"pypi: {index.simple}: not visible yet: {filename} uploaded to {index.url}" in lines[0], lines
    assert "did not list it within 0.5 s" in lines[0] and "publish again later to resume" in lines[0], lines
    assert "check that index_url" not in lines[0]
