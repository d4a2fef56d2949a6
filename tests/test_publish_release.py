"""End to end (#13): ember's CPU wheels, conda packages and runtime image for one Python, built as
CI builds them (shipyard's shared build cache; the image is the one test_docker_image.py tests),
published to nightly, promoted to test and to release; at each step a user installs from that
channel with pip (devpi and the static tree, the PyPI flavour with --require-hashes), with a conda
solve + install, and with `docker pull` from the registry, and gets the manifest's sha256 (for the
image: its id, under the one manifest digest every channel serves)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import docker
import pytest
from ember_images import EmberImages
from publish_servers import docker_registry, pip_installed_sha, publish_site
from user_installs import forget_pulls, registry_serves_every_blob, user_pulls

from shipyard.cli import main
from shipyard.conda.bootstrap import BootstrapChannel
from shipyard.conda.solve_install import InstallRequest, solve_and_install
from shipyard.plumbing.hashing import sha256_of
from shipyard.publish.plain_version import plain_version_wheel
from shipyard.record.manifest import read_manifest

pytestmark = pytest.mark.slow
PYTHON = "3.11"


@pytest.fixture(scope="session")
def built_dist(repo: Path, conda_bootstrap: BootstrapChannel, ember_images: EmberImages,
               tmp_path_factory: pytest.TempPathFactory, suite_state: Path) -> Path:
    """The CPU cells for one Python: wheels (tested, verdicts cached), conda packages and the runtime
    image, built with the suite's session state folder so that the suite's other builds are reused.
    The image is conftest's (test_docker_image.py tests it): `shipyard image build` over these wheels
    finds it unchanged, the same bytes, and only records it in this manifest."""
    dist = tmp_path_factory.mktemp("published-dist")
    state = suite_state
    assert main(["--root", str(repo), "build", "--variant", "cpu", "--python", PYTHON, "--dist", str(dist),
                 "--state", str(state)]) == 0
    assert main(["--root", str(repo), "conda", "build", "--variant", "cpu", "--python", PYTHON, "--no-tests",
                 "--channel", conda_bootstrap.url(), "--dist", str(dist), "--state", str(state)]) == 0
    shared = ember_images.get("cpu")
    assert main(["--root", str(repo), "image", "build", "--variant", "cpu", "--target", "runtime",
                 "--dist", str(dist)]) == 0
    manifest = read_manifest(dist / "manifest.json")
    assert manifest is not None
    [image] = [a for a in manifest.artifacts if a.package_type == "docker"]
    # Not built twice: these wheels are the bytes the shared image was built from.
    assert image.sha256 == shared.image_id.removeprefix("sha256:") and image.build["cached"], (image, shared)
    return dist


def test_a_release_goes_nightly_test_release_and_users_install_the_tested_bytes(
        repo: Path, built_dist: Path, conda_bootstrap: BootstrapChannel, tmp_path: Path):
    manifest = read_manifest(built_dist / "manifest.json")
    assert manifest is not None
    wheels = {a.component: a for a in manifest.artifacts if a.package_type == "wheel"}
    conda = {a.name.rsplit("-", 2)[0]: a for a in manifest.artifacts if a.package_type == "conda"}
    [image] = [a for a in manifest.artifacts if a.package_type == "docker"]
    assert {"ember", "embervision", "emberaudio", "emberelastic"} <= set(wheels) and "ember" in conda
    assert image.name == f"ember:{manifest.version}-cpu-runtime", image.name
    root = tmp_path / "root"
    client = docker.from_env(timeout=600)
    digests: dict[str, str] = {}
    with publish_site(tmp_path) as site, docker_registry(tmp_path / "registry") as registry:
        devpi, tree, served, token = site.devpi, site.tree_url, site.conda_url, site.token
        password = devpi.add_user("ember")
        site.release_yaml(root, registry=registry.address)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHIPYARD_")} | {
            "SHIPYARD_PYPI_USERNAME": "ember", "SHIPYARD_PYPI_PASSWORD": password, "SHIPYARD_CONDA_TOKEN": token,
            "SHIPYARD_REGISTRY_USERNAME": registry.user, "SHIPYARD_REGISTRY_PASSWORD": registry.password}

        def shipyard(*args: str) -> None:
            done = subprocess.run([sys.executable, "-m", "shipyard.cli", "--root", str(root), *args,
                                   "--dist", str(built_dist)], env=env, capture_output=True, text=True, timeout=900)
            assert done.returncode == 0, done.stdout + done.stderr
            assert "files published" in done.stdout
            assert registry.password not in done.stdout + done.stderr

        plain = plain_version_wheel(built_dist / wheels["ember"].path, tmp_path / "plain")
        try:
            for step, (source, channel) in enumerate(((None, "nightly"), ("nightly", "test"), ("test", "release"))):
                if source is None:
                    shipyard("publish", "--channel", channel, "--target", "wheels-staging", "--target", "wheels-tree",
                             "--target", "conda-staging", "--target", "images")
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
                digests[channel] = user_pulls(client, registry, image, channel, built_dist / wheels["ember"].path)
                if source is None:
                    registry_serves_every_blob(registry, "ember", digests[channel])
        finally:
            forget_pulls(client, registry)
    # Promoted, not rebuilt: every channel serves the one manifest nightly was verified with.
    assert len(set(digests.values())) == 1 and len(digests) == 3, digests
