"""A secret put anywhere a user might put one never appears in what shipyard prints or writes."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from support.release_copy import SpecCopy

from shipyard.cli import main
from shipyard.errors import HOST_NOT_READY, MissingCredential
from shipyard.host.toolchains.discover import discover
from shipyard.publish.credentials import read_credentials
from shipyard.release.destinations import PublishTarget

SECRET = "s3cr3t-Zq8vLw2Kp"
R = "release.yaml"

# Every place in release.yaml a credential could be pasted: an inline key, an unknown key, a URL,
# an *_env field given the value instead of the variable's name, any other publish field.
IN_YAML = [
    ("inline password", "    password_env: SHIPYARD_PYPI_PASSWORD\n",
     f"    password_env: SHIPYARD_PYPI_PASSWORD\n    password: {SECRET}\n"),
    ("unknown key", "    token_env: SHIPYARD_CONDA_TOKEN\n",
     f"    token_env: SHIPYARD_CONDA_TOKEN\n    api-token: {SECRET}\n"),
    ("unknown key without a secret-like name", "    kind: devpi\n", f"    kind: devpi\n    extra: {SECRET}\n"),
    ("https URL credentials", "    url: http://127.0.0.1:8081/\n", f"    url: https://ci-bot:{SECRET}@127.0.0.1:8081/\n"),
    ("registry URL credentials", "    url: 127.0.0.1:5000\n", f"    url: ci-bot:{SECRET}@127.0.0.1:5000\n"),
    ("token pasted into token_env", "    token_env: SHIPYARD_CONDA_TOKEN\n", f"    token_env: {SECRET}\n"),
    ("password pasted into username_env", "    username_env: SHIPYARD_PYPI_USERNAME\n",
     f"    username_env: {SECRET}\n"),
    ("secret as the kind", "    kind: conda\n", f"    kind: {SECRET}\n"),
    ("secret in a flow mapping", "  images:\n", f"  leaked: {{kind: pypi, url: 'https://u:{SECRET}@h/'}}\n  images:\n"),
]

# Where the environment holds credentials while shipyard runs.
IN_ENV = {
    "SHIPYARD_PYPI_USERNAME": "ci-bot",
    "SHIPYARD_PYPI_PASSWORD": SECRET,
    "SHIPYARD_CONDA_TOKEN": SECRET,
    "SHIPYARD_REGISTRY_PASSWORD": SECRET,
    "TWINE_PASSWORD": SECRET,
    "PIP_INDEX_URL": f"https://ci-bot:{SECRET}@pypi.example.org/simple",
    "HTTPS_PROXY": f"http://proxy-user:{SECRET}@127.0.0.1:3128",
}


def _files_holding(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and needle in p.read_bytes()]


@pytest.mark.parametrize(("where", "old", "new"), IN_YAML, ids=[case[0] for case in IN_YAML])
def test_a_secret_in_release_yaml_is_refused_and_never_printed(spec_copy, capsys, where, old, new):
    spec_copy.edit(R, old, new)
    for command in (["validate"], ["matrix"], ["matrix", "--format", "github"], ["doctor"],
                    ["build", "--variant", "cpu"]):
        assert main(["--root", str(spec_copy.root), *command]) == 2, (where, command)
        captured = capsys.readouterr()
        assert SECRET not in captured.out + captured.err, (where, command, captured.err)
        assert "publish." in captured.err  # the problem is named, only its value is withheld
    # Nothing shipyard wrote holds it either (release.yaml itself aside).
    assert _files_holding(spec_copy.root, SECRET.encode()) == [spec_copy.root / R]


def test_secrets_in_the_environment_appear_in_no_output_and_no_written_file(tmp_path, monkeypatch, capsys, caplog,
                                                                            request):
    (tmp_path / "root").mkdir()
    spec = SpecCopy(tmp_path / "root")
    for name, value in IN_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SHIPYARD_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.DEBUG)  # what -v prints: every external command doctor runs
    # Look at the host afresh, with the secrets in the environment: an inventory cached by an
    # earlier test would run (and log) no command here.
    discover.cache_clear()
    # ... and leave none behind: the inventory seen here, with an empty SHIPYARD_CACHE, has none of
    # the machine's toolchains (the bullseye sysroot, CUDA toolkits) that later tests rely on.
    request.addfinalizer(discover.cache_clear)
    for command in (["validate"], ["matrix", "--cells"], ["matrix", "--format", "json"],
                    ["matrix", "--format", "github"], ["doctor"], ["schema", "--out", str(tmp_path / "schemas")]):
        # doctor's answer is no here: the release's cuda10.2 cells never have a toolkit on this host.
        assert main(["-v", "--root", str(spec.root), *command]) == (HOST_NOT_READY if command == ["doctor"] else 0), \
            command
        captured = capsys.readouterr()
        assert SECRET not in captured.out + captured.err, command
    assert caplog.records and SECRET not in caplog.text
    assert (tmp_path / "schemas" / "release.schema.json").is_file()
    assert _files_holding(tmp_path, SECRET.encode()) == []


# A credential pasted under any key, not only under publish: each edit is refused, and the line that
# names the problem says the value is hidden (or shows a URL without its userinfo and query).
PEM_KEY = "MC4CAQAwBQYDK2VwBCIEIHq7bKfQ2m9s0Yx1nJv4cT8wLpR3aZ6eU5iO0dGhKjNl"
GITHUB_TOKEN = "ghp_R4nd0mT0k3nV4lu3Xy12AbCdEfGh"
ANYWHERE = [
    ("a PEM key as signing_key_env", R, "  signing_key_env: SHIPYARD_SIGNING_KEY\n",
     f"  signing_key_env: |\n    -----BEGIN PRIVATE KEY-----\n    {PEM_KEY}\n    -----END PRIVATE KEY-----\n",
     PEM_KEY, "supply_chain.signing_key_env", "(value hidden: it looks like a key, token or password)"),
    ("a PEM key as signing_key_file", R, "  signing_key_file: .shipyard/keys/provenance-ed25519.pem\n",
     f"  signing_key_file: \"-----BEGIN PRIVATE KEY-----\\n{PEM_KEY}\\n-----END PRIVATE KEY-----\"\n",
     PEM_KEY, "supply_chain", "signing_key_file holds a key"),
    ("a GitHub token as the release name", R, "  name: ember\n", f"  name: {GITHUB_TOKEN}\n", GITHUB_TOKEN,
     "release.name", "(value hidden: it looks like a key, token or password)"),
    ("a PyPI token as a variant tag", R, "    tag: cu118\n", f"    tag: pypi-{SECRET}AgEIcHlwaS5vcmc\n", SECRET,
     "variants.cuda11.tag", "(value hidden: it looks like a key, token or password)"),
    ("a random token as an import name", R, "    import_name: emberaudio\n", f"    import_name: {SECRET}\n", SECRET,
     "components.emberaudio.import_name", "(value hidden: it looks like a key, token or password)"),
    ("a plain password under a key named so", R, "  wheel_size_budget_mb: 40\n",
     "  wheel_size_budget_mb: 40\n  password: hunter2\n", "hunter2", "release.password",
     "(value hidden: values under a key named like 'password' are never printed)"),
    ("a channel URL with a login and a token", R, "channels: [conda-forge]",
     f"channels: ['https://bot:{SECRET}@conda.example.org/main?token={GITHUB_TOKEN}']", SECRET,
     "conda.channels.0", "(got 'https://conda.example.org/main')"),
    ("a token as a feature's component", "feature_status.yaml", "component: embervision\n",
     f"component: {GITHUB_TOKEN}\n", GITHUB_TOKEN, "features.14.component",
     "(value hidden: it looks like a key, token or password)"),
]


@pytest.mark.parametrize(("where", "name", "old", "new", "secret", "key", "says"), ANYWHERE,
                         ids=[case[0] for case in ANYWHERE])
def test_a_credential_under_any_key_is_never_printed(spec_copy, capsys, where, name, old, new, secret, key, says):
    spec_copy.edit(name, old, new)
    assert main(["--root", str(spec_copy.root), "validate"]) == 2
    err = capsys.readouterr().err
    assert secret not in err and secret[:12] not in err, err
    line = next((x for x in err.splitlines() if f": {key}: " in x), "")
    assert says in line, err


def test_the_missing_credential_error_shows_the_url_without_userinfo_or_query():
    # validate refuses such a URL; the message must not depend on it, whatever built the target.
    target = PublishTarget.model_construct(name="wheels", kind="pypi", url=f"https://bot:{SECRET}@pypi.example.org/"
                                           f"simple/?token={SECRET}", username_env="PYPI_USER",
                                           password_env="PYPI_PASSWORD", token_env=None)
    with pytest.raises(MissingCredential) as info:
        read_credentials(target, {"PYPI_USER": "bot"})
    assert str(info.value) == ("release.yaml: publish.wheels.password_env: the environment variable PYPI_PASSWORD is "
                               "not set; export PYPI_PASSWORD with the password for https://pypi.example.org/simple/ "
                               "before publishing (nothing was uploaded)")
