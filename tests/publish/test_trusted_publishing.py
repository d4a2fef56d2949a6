"""Trusted publishing (#29): `shipyard publish` mints a PyPI upload token through GitHub's OIDC ID
token, masks both before anything else is printed, keeps the upload token in memory, and names the
step and the fix of every failure in one line.

GitHub's token service and PyPI cannot run here: tests/support/oidc_standin.py stands in for both on
127.0.0.1, shaped as their documentation specifies. The upload itself goes to a real pypiserver
that accepts `__token__` with the minted token, as PyPI's upload endpoint does."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.oidc_standin import OidcStandIn, oidc_standin
from support.publish_servers import pip_installed_sha, pypi_server
from support.pypi_standin import pypi_standin
from support.release_copy import point_release_yaml
from support.shipyard_process import run_shipyard
from support.synthetic_release import VERSION, features, make_wheel, record, write_manifest

from shipyard.cli import main
from shipyard.plumbing.hashing import sha256_of
from shipyard.publish.plain_version import plain_version_wheel

DEVPI_TARGET = ("    kind: devpi\n    url: http://127.0.0.1:8081/\n    username_env: SHIPYARD_PYPI_USERNAME\n"
                "    password_env: SHIPYARD_PYPI_PASSWORD\n")
MASK = "::add-mask::"


def _root(tmp_path: Path, standin: OidcStandIn, upload_url: str = "http://127.0.0.1:9/",
          index_url: str = "http://127.0.0.1:9/simple/") -> Path:
    root = tmp_path / "root"
    point_release_yaml(root, {DEVPI_TARGET: f"    kind: pypi\n    url: {upload_url}\n    index_url: {index_url}\n"
                                            f"    trusted_publishing: true\n    oidc_url: {standin.url}\n"
                                            f"    channels: [nightly]\n"})
    return root


def _dist(dist: Path, *projects: str) -> list[Path]:
    """dist/ with cpu and cu118 wheels of each project and its manifest; the wheels the pypi target gets."""
    records, plain = [], []
    for project in projects:
        for variant, tag in (("cpu", "cpu"), ("cuda11", "cu118")):
            wheel = make_wheel(dist / "whl" / tag / project, project, f"{VERSION}+{tag}")
            records.append(record(dist, wheel, component=project, package_type="wheel", variant=variant, tag=tag,
                                  tests=features()))
            if tag == "cpu":
                plain.append(plain_version_wheel(wheel, dist.parent / "plain"))
    write_manifest(dist, records)
    return plain


@pytest.fixture
def github_job(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN", "GITHUB_ACTIONS"):
        monkeypatch.delenv(name, raising=False)
    yield


FAILURES = [
    # (what goes wrong, stand-in options, whether the job has id-token: write, what the line says)
    ("no id-token permission", {}, False,
     ["step 2 of 3 (the ID token from GitHub)", "ACTIONS_ID_TOKEN_REQUEST_URL and ACTIONS_ID_TOKEN_REQUEST_TOKEN "
      "not set", "permissions: id-token: write"]),
    ("the audience endpoint fails", {"faults": {"audience": 503}}, True,
     ["step 1 of 3 (the audience from the index)", "/_/oidc/audience", "after 2 tries",
      "HTTP 503", "run the job again later"]),
    ("the audience endpoint is not there", {"faults": {"audience": 404}}, True,
     ["step 1 of 3 (the audience from the index)", "HTTP 404", "check oidc_url of the publish target"]),
    ("the audience answer is malformed", {"faults": {"audience": "garbage"}}, True,
     ["step 1 of 3", "a malformed answer: no 'audience' string in it (text/html)", "check oidc_url"]),
    ("GitHub refuses the request token", {"request_token": "other"}, True,
     ["step 2 of 3 (the ID token from GitHub)", "HTTP 401", "Bad credentials", "permissions: id-token: write"]),
    ("GitHub's token service fails", {"faults": {"github": 500}}, True,
     ["step 2 of 3", "after 2 tries", "HTTP 500", "run the job again later"]),
    ("GitHub's answer is malformed", {"faults": {"github": "garbage"}}, True,
     ["step 2 of 3", "a malformed answer: no 'value' string in it"]),
    ("audience mismatch", {"issue_for": "https://github.com/ember-ml"}, True,
     ["step 2 of 3", "GitHub issued the ID token for audience 'https://github.com/ember-ml', the index asked for "
      "'pypi'", "check that oidc_url"]),
    ("the index refuses the exchange", {"faults": {"mint": 422}}, True,
     ["step 3 of 3 (the upload token from the index)", "HTTP 422", "register this repository, its workflow file "
      "and environment as a trusted publisher"]),
    ("the index fails to mint", {"faults": {"mint": 502}}, True,
     ["step 3 of 3", "after 2 tries", "HTTP 502", "run the job again later"]),
    ("the index rate-limits past the deadline", {"faults": {"mint": 429}, "retry_after": "3600"}, True,
     ["step 3 of 3", "HTTP 429", "asks to wait 3600 s (Retry-After), beyond the retry deadline of 120 s",
      "run the job again later"]),
    ("the mint answer is malformed", {"faults": {"mint": "garbage"}}, True,
     ["step 3 of 3", "a malformed answer: no 'token' string in it"]),
]


@pytest.mark.parametrize(("options", "permitted", "says"), [f[1:] for f in FAILURES], ids=[f[0] for f in FAILURES])
def test_every_failure_of_the_exchange_is_one_line_naming_the_step_and_the_fix(
        options, permitted, says, github_job, tmp_path, capsys, monkeypatch):
    with oidc_standin(**options) as standin:
        root = _root(tmp_path, standin)
        _dist(tmp_path / "dist", "tp")
        if permitted:
            monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_URL", standin.request_url)
            # The job's request token; a stand-in told to expect another refuses it.
            monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN",
                               "job-" + standin.request_token if "request_token" in options else standin.request_token)
        code = main(["--root", str(root), "publish", "--channel", "nightly", "--target", "pypi",
                     "--dist", str(tmp_path / "dist"), "--state", str(tmp_path / "state"), "--tries", "2",
                     "--first-pause", "0.01", "--timeout", "10"])
        out, err = capsys.readouterr()
    lines = [line for line in (out + err).splitlines() if line.strip()]
    assert code == 7, out + err
    assert len(lines) == 1 and lines[0].startswith("error: trusted publishing for pypi: "), lines
    for words in says:
        assert words in lines[0], (words, lines[0])
    job_token = os.environ.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN")
    for secret in [*([job_token] if job_token else []), *standin.issued, *standin.minted]:
        assert secret not in out + err  # not even a mask line: no GitHub runner reads it here
    assert "Traceback" not in out + err
    assert not standin.minted or options.get("faults", {}).get("mint") is not None


@pytest.mark.slow
def test_an_upload_with_the_minted_token_reaches_pip_and_the_token_is_in_no_output_or_file(tmp_path: Path):
    with pypi_server(tmp_path / "pypiserver") as server, \
            oidc_standin(on_mint=lambda token: server.add_user("__token__", token)) as standin:
        root = _root(tmp_path, standin, server.url, server.simple)
        [wheel] = _dist(tmp_path / "dist", "tpok")
        github_env = tmp_path / "github_env"
        github_env.write_text("")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SHIPYARD_", "ACTIONS_"))} | {
            "ACTIONS_ID_TOKEN_REQUEST_URL": standin.request_url,
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN": standin.request_token, "GITHUB_ENV": str(github_env),
            "GITHUB_ACTIONS": "true"}
        done = run_shipyard("-v", "--root", root, "publish", "--channel", "nightly", "--target", "pypi",
                            "--dist", tmp_path / "dist", env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        # Two exchanges: the check before any server changes, and the token the uploads use (minted right
        # before them, #52 item 2).
        [identity, *_], [token, *_] = standin.issued, standin.minted
        assert len(standin.issued) == len(standin.minted) == 2
        assert server.files() == {wheel.name: sha256_of(wheel)}
        assert pip_installed_sha(server.simple, f"tpok=={VERSION}", tmp_path / "pip") == sha256_of(wheel)
    # Every token is masked before anything else is printed (the later ones before they are used), and
    # appears nowhere else.
    lines = done.stdout.splitlines()
    assert lines[:2] == [f"{MASK}{identity}", f"{MASK}{token}"], done.stdout[:500]
    masks = [f"{MASK}{secret}" for pair in zip(standin.issued, standin.minted, strict=True) for secret in pair]
    assert [line for line in lines if line.startswith(MASK)] == masks, done.stdout[:1000]
    rest = "\n".join(line for line in lines if not line.startswith(MASK)) + done.stderr
    assert "upload tpok" in rest  # -v: what was said is there, without the tokens
    for secret in (*standin.issued, *standin.minted, standin.request_token):
        assert secret not in rest
        for path in tmp_path.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path
    assert github_env.read_text() == ""


def test_a_release_that_outlives_its_upload_token_is_published_whole(github_job, tmp_path, capsys, monkeypatch):
    # #52 item 2: tokens live 1.5 s here (PyPI's 15 min), four uploads take 0.6 s each. A token minted
    # once at the start was refused halfway and left a partial release on the index.
    with oidc_standin(token_lifetime=1.5) as oidc, \
            pypi_standin(lambda user, password: user == "__token__" and oidc.live(password),
                         upload_pause=0.6) as index:
        root = _root(tmp_path, oidc, index.url, index.simple)
        wheels = _dist(tmp_path / "dist", "tla", "tlb", "tlc", "tld")
        monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_URL", oidc.request_url)
        monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN", oidc.request_token)
        code = main(["--root", str(root), "publish", "--channel", "nightly", "--target", "pypi",
                     "--dist", str(tmp_path / "dist"), "--state", str(tmp_path / "state"), "--first-pause", "0.01"])
        out, err = capsys.readouterr()
    assert code == 0, out + err
    assert index.sha256s() == {w.name: sha256_of(w) for w in wheels}
    assert len(oidc.minted) >= 3  # the start's check, before the uploads, and after a refusal
    for secret in [oidc.request_token, *oidc.issued, *oidc.minted]:
        assert secret not in out + err
