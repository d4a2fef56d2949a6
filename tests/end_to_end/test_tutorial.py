"""docs/third-party.md's tutorial, every command of it, in its order: shipyard installed from an
index (a loopback one holding this checkout's wheel, standing in for PyPI) into a fresh venv, a
fresh repository that holds no shipyard source, two projects (one beside the release folder, one pinned by its
sdist), `init`, `validate`, `build`, the generated nightly under `shipyard ci run` publishing to
a real devpi, and the published wheels installed by pip.

The commands are read from the document, not copied here: what the reader runs is what runs.
The only changes are the addresses of the servers this test starts (the sdist's, devpi's).
Its own nox session (`nox -s tutorial`): a whole nightly under act takes longer than .ci/run's
budget allows beside the rest."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from support.publish_servers import devpi_server, static_server, unbound_port
from support.shipyard_index import UV, shipyard_index
from support.shipyard_process import without_shipyard_settings

import shipyard
from shipyard.plumbing.port_ranges import claimed_port_range

REPO = Path(__file__).resolve().parents[2]
TUTORIAL = REPO / "docs" / "third-party.md"
PROJECTS = REPO / "tests" / "fixtures" / "tutorial"
SDIST_URL = "https://files.pythonhosted.org/packages/source/t/tinypure/tinypure-0.3.1.tar.gz"
DEVPI_URL = "https://devpi.example.org/"


def tutorial_script() -> str:
    """The ```sh blocks of the tutorial section, in order, as one script."""
    text = TUTORIAL.read_text()
    section = text[text.index("## Tutorial"):]
    section = section[:section.index("\n## ", 1)]
    blocks = re.findall(r"^```sh\n(.*?)^```$", section, re.M | re.S)
    assert len(blocks) == 7, f"{TUTORIAL}: the tutorial's steps changed ({len(blocks)} sh blocks)"
    return "".join(blocks)


def test_the_tutorial_reads_from_pip_install_to_a_published_nightly():
    script = tutorial_script()
    for command in ("pip install --quiet 'shipyard[act]'", "shipyard init ../tinyext", "shipyard validate",
                    "shipyard toolchain install bullseye", "shipyard doctor", "shipyard build --variant cpu",
                    "shipyard ci generate", "shipyard ci run --workflow nightly --python 3.11"):
        assert command in script, command
    assert SDIST_URL in script and DEVPI_URL in script  # the addresses the run replaces


@pytest.mark.slow
@pytest.mark.tutorial
@pytest.mark.timeout(3600)
def test_every_command_of_the_tutorial_runs_as_written(tmp_path: Path, docker_engine: None) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # tinypure's sdist, served where the tutorial's URL points
    sdists = tmp_path / "sdists"
    source = shutil.copytree(PROJECTS / "tinypure", tmp_path / "tinypure")  # setuptools writes egg-info into it
    subprocess.run([UV, "build", "--sdist", "--quiet", "--out-dir", str(sdists), str(source)],
                   check=True, timeout=600, capture_output=True)
    (sdist,) = sdists.glob("tinypure-0.3.1.tar.gz")
    constraint = tmp_path / "constraints.txt"  # this checkout's shipyard, whatever another index holds
    constraint.write_text(f"shipyard=={shipyard.__version__}\n")
    with claimed_port_range() as ports, devpi_server(tmp_path / "devpi", unbound_port(ports)) as devpi, \
            static_server(sdists) as sdist_server, shipyard_index(REPO, tmp_path / "shipyard-index") as index:
        password = devpi.add_user("tutorial")
        script = tutorial_script().replace(SDIST_URL, f"{sdist_server}{sdist.name}") \
            .replace(DEVPI_URL, f"{devpi.url}/")
        env = without_shipyard_settings({
            "HOME": str(home), "PROJECTS": str(PROJECTS),
            # pip finds shipyard on this index, its dependencies where this machine finds them
            "PIP_EXTRA_INDEX_URL": index, "PIP_CONSTRAINT": str(constraint),
            # the repository variable the jobs install shipyard with, and the publish job's secrets
            "SHIPYARD_INDEX_URL": index,
            "SHIPYARD_PYPI_USERNAME": "tutorial", "SHIPYARD_PYPI_PASSWORD": password,
            "GIT_AUTHOR_NAME": "tutorial", "GIT_AUTHOR_EMAIL": "tutorial@example.invalid",
            "GIT_COMMITTER_NAME": "tutorial", "GIT_COMMITTER_EMAIL": "tutorial@example.invalid"})
        env.pop("VIRTUAL_ENV", None)
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=3000, stdin=subprocess.DEVNULL)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert password not in output
    repository = tmp_path / "tiny-release"
    committed = subprocess.run(["git", "ls-files"], cwd=repository, capture_output=True, text=True, check=True,
                               timeout=60).stdout.split()
    # a user's repository: the project, the release folder beside it and the workflows at the top;
    # no shipyard, no build outputs
    assert sorted({name.split("/")[0] for name in committed}) == [".github", "release", "tinyext"], committed
    assert sorted(name for name in committed if name.startswith("release/")) == [
        "release/.gitignore", "release/feature_status.yaml", "release/release.yaml"], committed
    # the sdist is pinned, not copied in; the C extension lies outside the release folder
    text = (repository / "release" / "release.yaml").read_text()
    assert f"sha256: {hashlib.sha256(sdist.read_bytes()).hexdigest()}" in text, text
    assert 'path: "../tinyext"' in text, text
    # every job of the nightly ran and passed, and the last step printed what the wheels compute
    assert re.search(r"^publish\s.*success", done.stdout, re.M), done.stdout[-4000:]
    assert done.stdout.rstrip().endswith("42 hello, nightly"), done.stdout[-2000:]
