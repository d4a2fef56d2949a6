"""What a user does with a published release, as the publish tests check it: `docker pull` from
the registry and run the image, the registry serving every blob a pull needs, and pip run as a
user runs it, with none of this machine's pip settings."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import zipfile
from pathlib import Path

import docker
import requests
from packaging.utils import parse_wheel_filename
from support.publish_servers import MANIFEST_V2, Registry

from shipyard.plumbing import command
from shipyard.record.manifest import ArtifactRecord


def plain_pip_env() -> dict[str, str]:
    """This process's environment without a pip setting of this machine: no PIP_* variable and
    no configuration file."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_CONFIG_FILE": os.devnull}


def registry_serves_every_blob(registry: Registry, repo: str, digest: str) -> None:
    """What a pull on a machine holding none of the image needs: the manifest `digest` and each
    blob it names, served with the bytes their digests name."""
    auth = (registry.user, registry.password)
    base = f"http://{registry.address}/v2/{repo}"
    manifest = requests.get(f"{base}/manifests/{digest}", auth=auth, headers={"Accept": MANIFEST_V2}, timeout=60)
    assert manifest.status_code == 200 and "sha256:" + hashlib.sha256(manifest.content).hexdigest() == digest
    body = json.loads(manifest.content)
    for blob in (body["config"], *body["layers"]):
        sha = hashlib.sha256()
        with requests.get(f"{base}/blobs/{blob['digest']}", auth=auth, stream=True, timeout=60) as answer:
            assert answer.status_code == 200, (blob, answer.status_code)
            for chunk in answer.iter_content(1 << 20):
                sha.update(chunk)
        assert "sha256:" + sha.hexdigest() == blob["digest"], blob


def wheel_record(wheel: Path) -> set[str]:
    """The RECORD lines of a wheel's files that pip installs under site-packages as they are."""
    with zipfile.ZipFile(wheel) as zf:
        record = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
        lines = zf.read(record).decode().splitlines()
    return {line for line in lines if line and not line.startswith(record) and ".data/" not in line.split(",")[0]}


def user_pulls(client: docker.DockerClient, registry: Registry, image: ArtifactRecord, channel: str,
               ember_wheel: Path) -> str:
    """`docker pull <registry>/ember:1.7.0-cpu-runtime-<channel>` as a user runs it, then the image
    run: it is the id the manifest records, holds the tested ember wheel's files and imports ember.
    The manifest digest it was pulled by."""
    repo, tag = image.name.split(":", 1)
    remote = f"{registry.address}/{repo}"
    pulled = client.images.pull(remote, tag=f"{tag}-{channel}", auth_config=registry.auth())
    digest = registry.served_digest(repo, f"{tag}-{channel}")
    assert digest is not None
    assert pulled.id == f"sha256:{image.sha256}", (channel, pulled.id)
    assert f"{remote}@{digest}" in pulled.attrs["RepoDigests"], pulled.attrs["RepoDigests"]
    code = ("import ember, importlib.metadata as m, numpy as np; print(ember.__version__); "
            "print(float(ember.fft.irfft(ember.fft.rfft(np.arange(8, dtype=np.float32)), 8).sum())); "
            "print(m.distribution('ember').read_text('RECORD'))")
    done = command.run(["docker", "run", "--rm", f"{remote}:{tag}-{channel}", "python", "-c", code], timeout=180,
                       check=False)
    assert done.returncode == 0, done.output
    version, total, *installed = done.stdout.splitlines()
    # ember.__version__ is the version its wheel was published as (a nightly's development version),
    # without the variant's local label, as shipyard stamped it; the RECORD check ties the image to that wheel.
    assert (version, total) == (parse_wheel_filename(ember_wheel.name)[1].public, "28.0"), done.stdout
    missing = wheel_record(ember_wheel) - set(installed)
    assert not missing, f"{channel}: the image's ember is not the tested wheel: {sorted(missing)[:5]}"
    return digest


def forget_pulls(client: docker.DockerClient, registry: Registry) -> None:
    """Drop the engine's references to this test's registry; the shared image keeps its own tags."""
    for image in client.images.list():
        for ref in image.tags + (image.attrs.get("RepoDigests") or []):
            if ref.startswith(f"{registry.address}/"):
                with contextlib.suppress(docker.errors.APIError):
                    client.images.remove(ref, noprune=True)
