"""A place release.yaml names carries no credentials, and nothing shipyard prints shows a secret:
whatever the line (a refusal, a cell id, an argument echoed back, a log record), whoever wrote it.

Each secret below is distinct, so a leak names the path it took.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from support.release_copy import REPO, SpecCopy
from support.shipyard_process import run_shipyard

from shipyard.cli import main
from shipyard.errors import public_url

R = "release.yaml"
PASSWORD = "s3cretpass"
CONDA_TOKEN = "tk-Zq8vLw2Kp0aBcDeF"
PATH_TOKEN = "ghp_PathT0k3nV4lu3Xy12AbCdEf"


def _validate(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["--root", str(root), "validate"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# Every place release.yaml names: a URL or image reference with a login, a token in its path or
# query. (where, text in release.yaml, its replacement, the key reported, the secret)
PLACES = [
    ("builder_id with a login", "  builder_id: https://github.com/ember-ml/shipyard/ci/bootstrap.sh@local\n",
     f"  builder_id: git+https://ci:{PASSWORD}@github.com/x/y\n", "supply_chain.builder_id", PASSWORD),
    ("builder_id with a token in its path", "  builder_id: https://github.com/ember-ml/shipyard/ci/bootstrap.sh@local\n",
     f"  builder_id: https://github.com/{PATH_TOKEN}/shipyard\n", "supply_chain.builder_id", PATH_TOKEN),
    ("images.source with a login", "  source: https://github.com/ember-ml/shipyard ",
     f"  source: https://ci:{PASSWORD}@github.com/ember-ml/shipyard ", "images.source", PASSWORD),
    ("images.base_image with a login", "  base_image: debian:bookworm-slim\n",
     f"  base_image: ci:{PASSWORD}@registry.example.org/debian:bookworm-slim\n", "images.base_image", PASSWORD),
    ("images.python_image with a login", "  python_image: python:3.11-slim-bookworm\n",
     f"  python_image: ci:{PASSWORD}@registry.example.org/python:3.11\n", "images.python_image", PASSWORD),
    ("a variant's base_image with a login", "      runtime_budget_mb: 320\n",
     f"      runtime_budget_mb: 320\n      base_image: ci:{PASSWORD}@registry.example.org/debian\n",
     "images.variants.cpu.base_image", PASSWORD),
    ("a conda target's url with /t/<token>/", "    url: http://127.0.0.1:8082/conda/\n",
     f"    url: http://127.0.0.1:8082/t/{CONDA_TOKEN}/conda/\n", "publish.conda-channel.url", CONDA_TOKEN),
    ("a publish url with ?token=", "    url: http://127.0.0.1:8083/whl/\n",
     f"    url: http://127.0.0.1:8083/whl/?token={PASSWORD}\n", "publish.wheels-tree.url", PASSWORD),
    ("a password holding '/'", "    url: http://127.0.0.1:8081/\n", "    url: http://admin:pa/ss@127.0.0.1:8081/\n",
     "publish.pypi.url", ":pa/ss"),
]


@pytest.mark.parametrize(("where", "old", "new", "key", "secret"), PLACES, ids=[p[0] for p in PLACES])
def test_a_place_carrying_credentials_is_refused_in_one_line_that_never_shows_them(spec_copy, capsys, where, old,
                                                                                   new, key, secret):
    spec_copy.edit(R, old, new)
    code, out, err = _validate(spec_copy.root, capsys)
    assert code == 2, (where, out, err)
    assert secret not in out + err, err
    assert "1 problem in the release description" in err, err
    [line] = [x for x in err.splitlines() if x.startswith("  ")]
    assert f": {key}: " in line and "carries" in line, line
    # ... and says where a credential goes instead.
    assert "token_env" in line, line


def test_a_password_holding_a_slash_is_never_shown():
    # RFC 3986 ends the authority at the first '/': 'admin:pa' there is no host:port, and the
    # password is hidden whole however it is read.
    assert public_url("http://admin:pa/ss@host/") == "http://host/"
    assert public_url("https://github.com/ember-ml/shipyard/ci/bootstrap.sh@local") == \
        "https://github.com/ember-ml/shipyard/ci/bootstrap.sh@local"
    from shipyard.redaction import redact

    shown = redact("GET http://admin:pa/ss@host/simple/ failed; proxy ci-bot:Zq8vLw2K@127.0.0.1:3128 down")
    assert "pa/ss" not in shown and "ss@" not in shown and "Zq8vLw2K" not in shown, shown
    assert shown == "GET http://***@host/simple/ failed; proxy ***@127.0.0.1:3128 down"


def test_a_short_secret_is_hidden_as_a_whole_word_never_inside_one(monkeypatch):
    from shipyard import redaction
    from shipyard.publish.credentials import Credentials, scrub

    monkeypatch.setattr(redaction, "_learnt", set())  # what this test teaches the scrubber stays here
    shown = scrub("login p refused by 127.0.0.1 port=8081 (password p)", [Credentials("ci", password="p")])
    assert shown == "login *** refused by 127.0.0.1 port=8081 (password ***)"


def test_a_target_secret_too_short_to_hide_is_refused_when_it_is_set(spec_copy, capsys, monkeypatch):
    monkeypatch.delenv("SHIPYARD_PYPI_PASSWORD", raising=False)
    assert _validate(spec_copy.root, capsys)[0] == 0  # validate runs where the secrets are not
    monkeypatch.setenv("SHIPYARD_PYPI_PASSWORD", "pw-1")
    code, out, err = _validate(spec_copy.root, capsys)
    assert code == 2, err
    [line] = [x for x in err.splitlines() if x.startswith("  ")]
    assert line.endswith(": publish.pypi.password_env: the environment variable SHIPYARD_PYPI_PASSWORD "
                         "holds a secret shorter than 8 characters, which cannot be hidden in logs; set "
                         "SHIPYARD_PYPI_PASSWORD to a longer password or token"), line
    assert "pw-1" not in out + err


# Secrets planted where shipyard echoes what it was given: a cell id (a variant's key), a refusal
# (an unknown key's name, an exclusion's reason, an argument), and the environment.
VARIANT_KEY = "pypi-AgEIcHlwaS5vcmcVarKey0123"
UNKNOWN_KEY = "ghp_UnkN0wnK3yV4lu3Xy12AbCdEf"
REASON = "glpat-R3asonT0kenXy12AbCd"
GITHUB_TOKEN = "Kq3vN8wLp2XzR7tYgh"  # no token shape: hidden because of the variable it is in
TARGET_PASSWORD = "Vw9pQ2rT6yLm4Nx8pw"
ENV = {"GITHUB_TOKEN": GITHUB_TOKEN, "SHIPYARD_PYPI_PASSWORD": TARGET_PASSWORD}
PLANTED = (VARIANT_KEY, UNKNOWN_KEY, REASON, GITHUB_TOKEN, TARGET_PASSWORD)
COMMANDS = (["validate"], ["matrix"], ["matrix", "--cells"], ["matrix", "--format", "json"],
            ["matrix", "--format", "github"], ["doctor"], ["image", "bases", "--variant", "cpu"],
            ["matrix", "--variant", GITHUB_TOKEN], ["matrix", "--platform", TARGET_PASSWORD])


def _outputs(root: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, tuple[int, str]]:
    seen = {}
    for command in COMMANDS:
        code = main(["--root", str(root), *command])
        captured = capsys.readouterr()
        seen[" ".join(command)] = (code, captured.out + captured.err)
    return seen


def test_secrets_planted_in_names_reasons_arguments_and_the_environment_are_never_printed(tmp_path, capsys,
                                                                                            monkeypatch):
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SHIPYARD_CACHE", str(tmp_path / "cache"))
    (tmp_path / "valid").mkdir()
    valid = SpecCopy(tmp_path / "valid")
    valid.edit(R, "  cuda13:\n", f"  {VARIANT_KEY}:\n")  # a variant named like a token: in every cell id
    seen = _outputs(valid.root, capsys)
    assert seen["matrix --cells"][0] == 0 and seen["matrix --variant " + GITHUB_TOKEN][0] == 2, seen
    # The masked cells are still there: only the secret went.
    assert "***" in seen["matrix --cells"][1]

    # Refused releases: the refusal names an unknown key, and quotes an exclusion's reason when a
    # second exclusion repeats the first.
    refused = {
        "unknown key": (R, "  wheel_size_budget_mb: 40\n", f"  wheel_size_budget_mb: 40\n  {UNKNOWN_KEY}: 1\n"),
        "reason": (R, "    reason: no CUDA on macOS\n", f"    reason: no CUDA on macOS {REASON}\n"
                   "  - variant: \"cuda*\"\n    platform: macos-arm64\n    reason: the same again\n"),
    }
    for case, edit in refused.items():
        (tmp_path / case).mkdir()
        spec = SpecCopy(tmp_path / case)
        spec.edit(*edit)
        seen.update({f"{case}: {k}": v for k, v in _outputs(spec.root, capsys).items()})
    assert "release.***: unknown key '***'" in seen["unknown key: validate"][1], seen
    assert "already removed by exclusions.0 (no CUDA on macOS ***)" in seen["reason: validate"][1], seen
    assert all(seen[f"{case}: {' '.join(command)}"][0] == 2 for case in refused for command in COMMANDS)
    leaks = {command: [s for s in PLANTED if s in text] for command, (_, text) in seen.items()}
    assert not any(leaks.values()), {c: found for c, found in leaks.items() if found}


def test_a_shipyard_process_hides_them_in_its_log_too(tmp_path):
    # The whole process, as CI runs it: -v logs every external command doctor runs.
    (tmp_path / "root").mkdir()
    spec = SpecCopy(tmp_path / "root")
    spec.edit(R, "  cuda13:\n", f"  {VARIANT_KEY}:\n")
    env = {**os.environ, **ENV, "PYTHONPATH": str(REPO / "src"), "SHIPYARD_CACHE": str(tmp_path / "cache")}
    done = run_shipyard("-v", "--root", spec.root, "matrix", "--cells", "--variant", VARIANT_KEY, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "***" in done.stdout
    assert not [s for s in PLANTED if s in done.stdout + done.stderr]


def test_what_is_written_in_pieces_is_hidden_whole(monkeypatch):
    # print() writes its arguments one by one, and a PEM key comes a line at a time.
    import io

    from shipyard.redaction import redacted_output

    inner = io.StringIO()
    monkeypatch.setattr(sys, "stdout", inner)
    with redacted_output():
        print("token:", "ghp_", end="")
        print("PiecesT0k3nV4lu3Xy12AbCd and more")
        for line in ("-----BEGIN PRIVATE KEY-----", "MC4CAQAwBQYDK2VwBCIEIHq7bKfQ2m9s0Yx1nJv4cT8w",
                     "-----END PRIVATE KEY-----", "after"):
            print(line)
    assert inner.getvalue() == "token: *** and more\n***\n***\n***\nafter\n"
