"""Publishing images to registries as they are (#29): Debian's docker-registry over TLS from a CA
the test makes, once with htpasswd (the registry answers `WWW-Authenticate: Basic`) and once
behind distribution's bearer-token flow (`WWW-Authenticate: Bearer realm=…,service=…,scope=…`,
the token service a stand-in: registry_auth.py). shipyard runs as a user runs it, in its own
process; what it did is read from the registry's storage on disk, not through any client."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest
from support.connect_proxy import connect_proxy
from support.publish_project import PublishProject
from support.publish_servers import Registry, docker_registry
from support.registry_auth import Tls, make_tls
from support.synthetic_release import VERSION, image_record, import_image, remove_images, write_manifest

pytestmark = pytest.mark.slow
PASSWORD = "s3cr3t-Hq8vLz2Px-tls-registry"


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    return make_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def client(docker_engine: None) -> docker.DockerClient:
    return docker.from_env(timeout=300)


def _credentials(password: str) -> dict[str, str]:
    return {"SHIPYARD_REGISTRY_USERNAME": "shipyard", "SHIPYARD_REGISTRY_PASSWORD": password}


@dataclass(frozen=True, kw_only=True)
class Project(PublishProject):
    targets: tuple[str, ...] = ("images",)
    verbose: bool = True  # -v: the debug log too, where no secret may appear either
    client: docker.DockerClient
    repo: str
    image_id: str

    def written(self) -> bytes:
        return b"".join(p.read_bytes() for folder in (self.root, self.dist) for p in folder.rglob("*")
                        if p.is_file() and not p.is_symlink())


def _project(tmp_path: Path, client: docker.DockerClient, target_lines: str, *, two_layers: bool = False) -> Project:
    """release.yaml whose images target is `target_lines`, one tiny image in dist."""
    repo = f"shipyard-test-{uuid.uuid4().hex[:8]}"
    ref = f"{repo}:{VERSION}-cpu-runtime"
    if two_layers:  # FROM scratch, two COPY layers: a push and a load of more than one layer, built in a second
        context = tmp_path / "context"
        context.mkdir(parents=True)
        (context / "Dockerfile").write_text("FROM scratch\nCOPY a /a\nCOPY b /b\n")
        (context / "a").write_text(f"{repo} first layer\n")
        (context / "b").write_text(f"{repo} second layer\n" * 1000)
        image_id = str(client.images.build(path=str(context), tag=ref, rm=True)[0].id)
    else:
        image_id = import_image(tmp_path / "images", ref, "tls")
    project = Project.laid_out(tmp_path, {"url: 127.0.0.1:5000": target_lines}, _credentials(PASSWORD),
                               client=client, repo=repo, image_id=image_id)
    project.dist.mkdir()
    write_manifest(project.dist, [image_record(ref, image_id)])
    return project


@pytest.fixture
def made(client: docker.DockerClient) -> Iterator[list[Project]]:
    projects: list[Project] = []
    yield projects
    for project in projects:
        remove_images(client, project.repo, [project.image_id])


def _https(registry: Registry, tls: Tls) -> str:
    return f"url: https://{registry.address}\n    ca_file: {tls.ca}"


def _published(registry: Registry, project: Project, channel: str) -> str:
    """The digest the registry's storage links the channel tag to, after checking that manifest
    names the recorded image id as its config."""
    digest = registry.tag_on_disk(project.repo, f"{VERSION}-cpu-runtime-{channel}")
    assert digest is not None, channel
    manifest = json.loads(registry.blob_on_disk(digest))
    assert manifest["config"]["digest"] == project.image_id
    return digest


def _publish_then_promote(registry: Registry, project: Project) -> list[str]:
    outputs = []
    code, out = project.run("publish", "--channel", "nightly")
    assert code == 0, out
    outputs.append(out)
    digest = _published(registry, project, "nightly")
    project.client.images.remove(project.image_id, force=True)  # promotion reads the image from the registry
    code, out = project.run("promote", VERSION, "--from", "nightly", "--to", "test")
    assert code == 0, out
    outputs.append(out)
    assert _published(registry, project, "test") == digest  # the same manifest, read back over TLS
    return outputs


def test_tls_with_htpasswd_publishes_and_promotes_and_a_registry_it_cannot_trust_is_named(
        tls: Tls, client: docker.DockerClient, tmp_path: Path, made: list[Project]) -> None:
    with docker_registry(tmp_path / "registry", password=PASSWORD, tls=tls) as registry:
        project = _project(tmp_path / "ok", client, _https(registry, tls), two_layers=True)
        made.append(project)
        outputs = _publish_then_promote(registry, project)
        manifest = json.loads(registry.blob_on_disk(_published(registry, project, "test")))
        assert len(manifest["layers"]) == 2

        untrusting = _project(tmp_path / "no-ca", client, f"url: https://{registry.address}")
        made.append(untrusting)
        code, out = untrusting.run("publish", "--channel", "nightly")
        assert code != 0, out
        flat = " ".join(out.split())
        assert f"{registry.address}: TLS: certificate verify failed; set ca_file to the PEM file of the CA" in flat, out
        assert "Traceback" not in out
        assert registry.tag_on_disk(untrusting.repo, f"{VERSION}-cpu-runtime-nightly") is None

        code, out = project.run("publish", "--channel", "release", env=_credentials("wrong-" + PASSWORD))
        assert code != 0, out
        assert "HTTP 401" in out and "check SHIPYARD_REGISTRY_USERNAME and SHIPYARD_REGISTRY_PASSWORD" in out, out
        outputs.append(out)
    for text in outputs:
        assert PASSWORD not in text
    assert PASSWORD.encode() not in project.written()


def test_the_bearer_token_flow_publishes_and_promotes_and_never_shows_a_token(
        tls: Tls, client: docker.DockerClient, tmp_path: Path, made: list[Project]) -> None:
    with docker_registry(tmp_path / "registry", password=PASSWORD, tls=tls, bearer=True) as registry:
        assert registry.tokens is not None
        project = _project(tmp_path / "ok", client, _https(registry, tls))
        made.append(project)
        outputs = _publish_then_promote(registry, project)
        issued = list(registry.tokens.issued)
        assert issued  # the registry let nothing in without one

        code, out = project.run("publish", "--channel", "release", env=_credentials("wrong-" + PASSWORD))
        assert code != 0, out
        flat = " ".join(out.split())
        assert f"the token service {registry.tokens.realm} refused repository:{project.repo}:" in flat, out
        assert "HTTP 401" in flat and "check SHIPYARD_REGISTRY_USERNAME and SHIPYARD_REGISTRY_PASSWORD" in flat, out
        assert registry.tag_on_disk(project.repo, f"{VERSION}-cpu-runtime-release") is None
        outputs.append(out)
    written = project.written()
    for secret in [PASSWORD, *issued]:
        assert all(secret not in text for text in outputs)
        assert secret.encode() not in written


def test_a_registry_behind_a_private_ca_is_reached_through_a_connect_proxy(
        tls: Tls, client: docker.DockerClient, tmp_path: Path, made: list[Project]) -> None:
    """#52 item 4 for the docker kind: HTTPS_PROXY (proxy.py on loopback) and the target's ca_file;
    the image's blobs and manifest go through the tunnel, and the tag is on the registry's disk."""
    with docker_registry(tmp_path / "registry", password=PASSWORD, tls=tls) as registry, \
            connect_proxy(tmp_path) as (proxy, log):
        project = _project(tmp_path / "ok", client, _https(registry, tls))
        made.append(project)
        code, out = project.run("publish", "--channel", "nightly",
                                env={**_credentials(PASSWORD), "HTTPS_PROXY": proxy, "NO_PROXY": "", "no_proxy": ""})
        assert code == 0, out
        _published(registry, project, "nightly")
        assert f"CONNECT {registry.address}" in log.read_text(), log.read_text()
        assert PASSWORD not in out
