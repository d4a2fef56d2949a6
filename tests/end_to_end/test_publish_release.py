"""End to end (#13): ember's CPU wheels, conda packages and runtime image for one Python, built as
CI builds them (shipyard's shared build cache; the image is the one test_docker_image.py tests),
published to nightly, promoted to test and to release; at each step a user installs from that
channel with pip (devpi and the static tree, the PyPI flavour with --require-hashes), with a conda
solve + install, and with `docker pull` from the registry, and gets the manifest's sha256 (for the
image: its id, under the one manifest digest every channel serves)."""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shlex
import sys
from pathlib import Path

import docker
import pytest
from support.ember_images import EmberImages
from support.publish_servers import Registry, docker_registry, pip_installed_sha, publish_site
from support.shipyard_process import run_shipyard, without_shipyard_settings
from support.user_installs import forget_pulls, registry_serves_every_blob, user_pulls, wheel_record

from shipyard.cli import main
from shipyard.conda.bootstrap import BootstrapChannel
from shipyard.conda.solve_install import InstallRequest, solve_and_install
from shipyard.plumbing import command
from shipyard.plumbing.hashing import sha256_of
from shipyard.publish.plain_version import plain_version_wheel
from shipyard.record.manifest import ArtifactRecord, read_manifest
from shipyard.testing.venv import uv_binary

pytestmark = pytest.mark.slow
PYTHON = "3.11"
_CONDA_TOKEN_ENV = "SHIPYARD_CONDA_TOKEN"  # release.yaml's conda-channel token_env, as the page names it


@pytest.fixture(scope="session")
def built_dist(repo: Path, conda_bootstrap: BootstrapChannel, ember_images: EmberImages,
               tmp_path_factory: pytest.TempPathFactory, suite_state: Path) -> Path:
    """The CPU cells for one Python: wheels (tested, verdicts cached), conda packages and the runtime
    image, built with the suite's session state folder so that the suite's other builds are reused.
    The image is conftest's (test_docker_image.py tests it): `shipyard image build` over these wheels
    finds it unchanged, the same bytes, and only records it in this manifest."""
    dist = tmp_path_factory.mktemp("published-dist")
    state = suite_state
    # linux-x86_64's: publishing a second Linux platform's wheels proves nothing more here
    assert main(["--root", str(repo), "build", "--variant", "cpu", "--python", PYTHON, "--platform", "linux-x86_64",
                 "--dist", str(dist), "--state", str(state)]) == 0
    # Tested (the verdicts test_conda_install.py recorded in the same state are reused): the test and
    # release channels take only what its tests proved (record/gate.py).
    assert main(["--root", str(repo), "conda", "build", "--variant", "cpu", "--python", PYTHON,
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


def _get_started_commands(root: Path, dist: Path, out: Path, channel: str) -> dict[str, str]:
    """The command get-started.html shows for Linux · <installer> · CPU · <channel>, per installer,
    from the page `shipyard report` writes for this release.yaml and manifest."""
    assert main(["--root", str(root), "report", "--dist", str(dist), "--out", str(out / "index.html")]) == 0
    page = (out / "get-started.html").read_text()
    found = re.findall(r'<div class="answer" data-platform="linux-x86_64" data-installer="(\w+)" data-variant="cpu" '
                       rf'data-channel="{channel}">\s*<p class="combo">[^<]*</p>\s*'
                       r'<code class="command">([^<]*)</code>', page)
    return {installer: html.unescape(text) for installer, text in found}


def _user_runs_the_page_commands(commands: dict[str, str], where: Path, token: str, bootstrap: BootstrapChannel,
                                 wheels: dict[str, ArtifactRecord], conda: dict[str, ArtifactRecord], dist: Path,
                                 registry: Registry) -> None:
    """What a user does with the get-started page's CPU commands: pip and uv in fresh venvs, the conda
    install, the docker pull, each as the page words it; each ends with ember importable and the
    tested bytes installed."""
    assert set(commands) == {"pip", "uv", "conda", "docker"}, commands
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "VIRTUAL_ENV"))}
    uv = uv_binary()
    for installer in ("pip", "uv"):
        venv = where / f"{installer}-venv"
        command.run([uv, "venv", "--quiet", "--seed", "--python", sys.executable, venv], env=env, timeout=300)
        # numpy, the one dependency the release's own index does not serve (PyTorch's index mirrors its
        # dependencies; ours holds the release's projects): already there, as in most environments.
        command.run([uv, "pip", "install", "--quiet", "--python", venv / "bin" / "python", "numpy"], env=env,
                    timeout=300)
        # The venv activated, and uv on PATH as its installer puts it.
        user = env | {"PATH": f"{venv / 'bin'}:{uv.parent}:{env['PATH']}", "VIRTUAL_ENV": str(venv)}
        command.run(shlex.split(commands[installer]), env=user, timeout=300, what=commands[installer])
        done = command.run([venv / "bin" / "python", "-c", "import ember, embervision, emberaudio, importlib.metadata "
                            "as m; print(ember.__version__); print(m.distribution('ember').read_text('RECORD'))"],
                           env=user, timeout=120)
        version, *installed = done.stdout.splitlines()
        assert version == wheels["ember"].version, (installer, done.stdout[:200])
        assert not wheel_record(dist / wheels["ember"].path) - set(installed), f"{installer}: not the tested wheel"
    # conda: no conda client here; py-rattler solves and installs what the command names, from its
    # channels, with the bootstrap channel standing in for conda-forge (as the conda build does).
    words = shlex.split(commands["conda"].replace(f"${_CONDA_TOKEN_ENV}", token))
    assert words[:2] == ["conda", "install"], words
    channels = [words[i + 1] for i, w in enumerate(words) if w == "-c"]
    specs = [w for i, w in enumerate(words[2:], 2) if w != "-c" and words[i - 1] != "-c"]
    result = solve_and_install(InstallRequest(
        channels=[bootstrap.url() if c == "conda-forge" else c for c in channels], specs=specs,
        prefix=str(where / "page-prefix"), cache_dir=str(where / "page-cache")))
    assert result.error is None and result.unsatisfiable is None, result
    for name in ("ember", "libember", "emberaudio"):
        installed = result.named(name)
        assert installed is not None and installed.sha256 == conda[name].sha256, (name, installed)
    python = where / "page-prefix" / "bin" / "python"
    assert command.run([python, "-c", "import ember; print(ember.__version__)"], timeout=120).stdout.strip() == (
        conda["ember"].version)
    # docker: the page's pull, with the user's registry login; user_pulls then runs ember in it.
    config = where / "docker-config"
    config.mkdir()
    login = base64.b64encode(f"{registry.user}:{registry.password}".encode()).decode()
    (config / "config.json").write_text(json.dumps({"auths": {registry.address: {"auth": login}}}))
    command.run(shlex.split(commands["docker"]), extra_env={"DOCKER_CONFIG": str(config)}, timeout=600,
                what=commands["docker"])


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
        env = without_shipyard_settings({
            "SHIPYARD_PYPI_USERNAME": "ember", "SHIPYARD_PYPI_PASSWORD": password, "SHIPYARD_CONDA_TOKEN": token,
            "SHIPYARD_REGISTRY_USERNAME": registry.user, "SHIPYARD_REGISTRY_PASSWORD": registry.password})

        def shipyard(*args: str) -> None:
            done = run_shipyard("--root", root, *args, "--dist", built_dist, env=env, timeout=900, check=True)
            assert "files published" in done.stdout
            assert registry.password not in done.stdout + done.stderr

        plain = plain_version_wheel(built_dist / wheels["ember"].path, tmp_path / "plain")
        try:
            for step, (source, channel) in enumerate(((None, "nightly"), ("nightly", "test"), ("test", "release"))):
                if source is None:
                    shipyard("publish", "--channel", channel, "--target", "pypi", "--target", "wheels-tree",
                             "--target", "conda-channel", "--target", "images")
                else:
                    shipyard("promote", manifest.version, "--from", source, "--to", channel)
                where = tmp_path / channel
                if source is None:  # the get-started page's CPU commands, once: the channels serve the same bytes
                    _user_runs_the_page_commands(_get_started_commands(root, built_dist, tmp_path / "report", channel),
                                                 where, token, conda_bootstrap, wheels, conda, built_dist, registry)
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
