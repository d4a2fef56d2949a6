"""End to end (#13): ember's CPU wheels and conda packages for one Python, built as CI builds
them (shipyard's shared build cache), published to nightly, promoted to test and to release; at
each step a user installs from that channel with pip (devpi and the static tree, the PyPI flavour
with --require-hashes) and with a conda solve + install, and gets the manifest's sha256."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from publish_servers import pip_installed_sha, publish_site

from shipyard.cli import main
from shipyard.conda.bootstrap import BootstrapChannel
from shipyard.conda.solve_install import InstallRequest, solve_and_install
from shipyard.manifest import read_manifest
from shipyard.publish.plain_version import plain_version_wheel
from shipyard.wheel.index import sha256_of

pytestmark = pytest.mark.slow
PYTHON = "3.11"


@pytest.fixture(scope="session")
def built_dist(repo: Path, conda_bootstrap: BootstrapChannel, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CPU cells for one Python: wheels (tested, verdicts cached) and conda packages, built with
    the repository's own state folder so that the suite's other builds are reused."""
    dist = tmp_path_factory.mktemp("published-dist")
    state = repo / ".shipyard"
    assert main(["--root", str(repo), "build", "--variant", "cpu", "--python", PYTHON, "--dist", str(dist),
                 "--state", str(state)]) == 0
    assert main(["--root", str(repo), "conda", "build", "--variant", "cpu", "--python", PYTHON, "--no-tests",
                 "--channel", conda_bootstrap.url(), "--dist", str(dist), "--state", str(state)]) == 0
    return dist


def test_a_release_goes_nightly_test_release_and_users_install_the_tested_bytes(
        repo: Path, built_dist: Path, conda_bootstrap: BootstrapChannel, tmp_path: Path):
    manifest = read_manifest(built_dist / "manifest.json")
    assert manifest is not None
    wheels = {a.component: a for a in manifest.artifacts if a.package_type == "wheel"}
    conda = {a.name.rsplit("-", 2)[0]: a for a in manifest.artifacts if a.package_type == "conda"}
    assert {"ember", "embervision", "emberaudio", "emberelastic"} <= set(wheels) and "ember" in conda
    root = tmp_path / "root"
    with publish_site(tmp_path) as site:
        devpi, tree, served, token = site.devpi, site.tree_url, site.conda_url, site.token
        password = devpi.add_user("ember")
        site.release_yaml(root)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHIPYARD_")} | {
            "SHIPYARD_PYPI_USERNAME": "ember", "SHIPYARD_PYPI_PASSWORD": password, "SHIPYARD_CONDA_TOKEN": token}

        def shipyard(*args: str) -> None:
            done = subprocess.run([sys.executable, "-m", "shipyard.cli", "--root", str(root), *args,
                                   "--dist", str(built_dist)], env=env, capture_output=True, text=True, timeout=900)
            assert done.returncode == 0, done.stdout + done.stderr
            assert "files published" in done.stdout

        plain = plain_version_wheel(built_dist / wheels["ember"].path, tmp_path / "plain")
        for step, (source, channel) in enumerate(((None, "nightly"), ("nightly", "test"), ("test", "release"))):
            if source is None:
                shipyard("publish", "--channel", channel, "--target", "wheels-staging", "--target", "wheels-tree",
                         "--target", "conda-staging")
            else:
                shipyard("promote", manifest.version, "--from", source, "--to", channel)
            where = tmp_path / channel
            for component in ("ember", "embervision", "emberelastic"):
                artifact = wheels[component]
                requirement = f"{component}=={artifact.version}" + ("+cpu" if "+cpu" in artifact.name else "")
                index = f"{devpi.url}/ember/{channel}-cpu/+simple/"
                assert pip_installed_sha(index, requirement, where / f"devpi-{component}") == artifact.sha256
                assert pip_installed_sha(f"{tree}{channel}/cpu/", requirement,
                                         where / f"tree-{component}") == artifact.sha256
            requirements = where / "requirements.txt"
            requirements.write_text(f"ember=={manifest.version} --hash=sha256:{sha256_of(plain)}\n")
            assert pip_installed_sha(f"{devpi.url}/ember/{channel}/+simple/", str(requirements), where / "pypi",
                                     "--require-hashes", "-r") == sha256_of(plain)
            result = solve_and_install(InstallRequest(
                channels=[f"{served}conda/{channel}/", conda_bootstrap.url()],
                specs=[f"python {PYTHON}.*", "ember * *_cpu_*", "emberaudio"], prefix=str(where / "prefix"),
                cache_dir=str(where / "cache")))
            assert result.error is None and result.unsatisfiable is None, result
            for name in ("ember", "libember", "emberaudio"):
                installed = result.named(name)
                assert installed is not None and installed.sha256 == conda[name].sha256, (step, name, installed)
