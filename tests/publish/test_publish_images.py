"""shipyard publish and promote for images (#13): Debian's docker-registry with htpasswd auth on
127.0.0.1, tiny one-layer images made with `docker import` and recorded in a synthetic manifest as
`shipyard image build` records its images (name = version tag, sha256 = image id). What a user
sees is what `docker pull` gets from each channel's tag."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import docker
import pytest
from support.publish_project import PublishProject
from support.publish_servers import Registry, docker_registry
from support.release_copy import point_release_yaml
from support.synthetic_release import VERSION, image_record, import_image, remove_images, write_manifest

from shipyard.cli import main
from shipyard.record.manifest import ArtifactRecord

pytestmark = pytest.mark.slow
SECRET = "s3cr3t-Rk7uWq4Tn-registry"


@pytest.fixture(scope="module")
def registry(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with docker_registry(tmp_path_factory.mktemp("registry")) as server:
        yield server


@pytest.fixture(scope="module")
def client(docker_engine: None) -> docker.DockerClient:
    return docker.from_env(timeout=300)


@dataclass(frozen=True, kw_only=True)
class Project(PublishProject):
    targets: tuple[str, ...] = ("images",)
    repo: str = field(default_factory=lambda: f"shipyard-test-{uuid.uuid4().hex[:8]}")  # the test's own repository
    made: list[str] = field(default_factory=list)  # the ids of the images the test imported

    def remove_images(self, client: docker.DockerClient) -> None:
        remove_images(client, self.repo, self.made)

    @property
    def ref(self) -> str:
        return f"{self.repo}:{VERSION}-cpu-runtime"


@pytest.fixture
def project(registry: Registry, client: docker.DockerClient, tmp_path: Path) -> Iterator[Project]:
    credentials = {"SHIPYARD_REGISTRY_USERNAME": registry.user, "SHIPYARD_REGISTRY_PASSWORD": registry.password}
    made = Project.laid_out(tmp_path, {"url: 127.0.0.1:5000": f"url: {registry.address}"}, credentials)
    made.dist.mkdir()
    yield made
    made.remove_images(client)


def _image(project: Project, payload: str, **record: str) -> str:
    """A new image under the project's ref, recorded alone in dist/manifest.json; its id."""
    image_id = import_image(project.dist.parent / "images", project.ref, payload)
    project.made.append(image_id)
    write_manifest(project.dist, [image_record(project.ref, image_id, **record)])
    return image_id


def _pulled_id(client: docker.DockerClient, registry: Registry, repo: str, tag: str) -> str:
    """`docker pull <registry>/<repo>:<tag>` on an engine holding no image of `repo`: the id it gets."""
    for image in client.api.images():  # one call: the shared engine may drop an image meanwhile
        if any(repo in ref for ref in (image.get("RepoTags") or []) + (image.get("RepoDigests") or [])):
            client.images.remove(image["Id"], force=True)
    return str(client.images.pull(f"{registry.address}/{repo}", tag=tag, auth_config=registry.auth()).id)


def _saved_since(client: docker.DockerClient, image_id: str, since_ns: int) -> int:
    """How many times the engine saved image `image_id` (`docker save`, as a full push does) since `since_ns`."""
    events = client.events(since=since_ns // 10**9, until=int(time.time()) + 1,
                           filters={"type": "image", "event": "save"}, decode=True)
    return sum(1 for e in events if e.get("timeNano", 0) >= since_ns
               and e.get("id", "").removeprefix("sha256:") == image_id.removeprefix("sha256:"))


def test_an_image_goes_nightly_test_release_and_docker_pull_gets_the_recorded_id(
        project: Project, registry: Registry, client: docker.DockerClient) -> None:
    image_id = _image(project, "first")
    started = time.time_ns()
    code, out = project.run("publish", "--channel", "nightly")
    assert code == 0, out
    assert _saved_since(client, image_id, started) == 1  # saved to learn its layers' blobs
    assert "nightly: 1 files published" in " ".join(out.split()), out
    digest = registry.served_digest(project.repo, f"{VERSION}-cpu-runtime-nightly")
    assert digest is not None
    assert _pulled_id(client, registry, project.repo, f"{VERSION}-cpu-runtime-nightly") == image_id
    # Promotion copies the manifest by digest, registry to registry: the engine is not asked.
    for source, channel in (("nightly", "test"), ("test", "release")):
        started = time.time_ns()
        code, out = project.run("promote", VERSION, "--from", source, "--to", channel)
        assert code == 0, out
        # the registry holds every blob, and this machine knows which: no save, no gzip (layer_blobs)
        assert _saved_since(client, image_id, started) == 0
        assert registry.served_digest(project.repo, f"{VERSION}-cpu-runtime-{channel}") == digest  # the same manifest
        assert _pulled_id(client, registry, project.repo, f"{VERSION}-cpu-runtime-{channel}") == image_id
        assert registry.served_digest(project.repo, f"{channel}-cpu-runtime") == digest  # its moving tag
    staging = {f"{VERSION}-cpu-runtime-{c}-stage-{image_id.removeprefix('sha256:')[:12]}"
               for c in ("nightly", "test", "release")}
    assert set(registry.tags(project.repo)) == staging | {f"{VERSION}-cpu-runtime-{c}"
                                                           for c in ("nightly", "test", "release")} | {
        f"{c}-cpu-runtime" for c in ("nightly", "test", "release")}
    journal = [line for line in (project.root / ".shipyard" / "publish" / "images.jsonl").read_text().splitlines()
               if '"switched"' in line]
    assert len(journal) == 3 and all(digest in line for line in journal), journal


def test_republishing_the_same_image_pushes_nothing(project: Project, registry: Registry) -> None:
    _image(project, "same")
    assert project.run("publish", "--channel", "nightly")[0] == 0
    tags = registry.tags(project.repo)
    journal = (project.root / ".shipyard" / "publish" / "images.jsonl").read_text()
    code, out = project.run("publish", "--channel", "nightly")
    assert code == 0, out
    assert "nightly: 0 files published, 1 already there" in " ".join(out.split()), out
    assert registry.tags(project.repo) == tags
    assert (project.root / ".shipyard" / "publish" / "images.jsonl").read_text() == journal


def _nightly(project: Project, version: str, payload: str) -> tuple[str, ArtifactRecord]:
    """A new image `<repo>:<version>-cpu-runtime`, recorded alone in dist/manifest.json as the
    nightly `version` is: its id and its record."""
    ref = f"{project.repo}:{version}-cpu-runtime"
    image_id = import_image(project.dist.parent / "images", ref, payload)
    project.made.append(image_id)
    record = image_record(ref, image_id, version=version)
    write_manifest(project.dist, [record], version)
    return image_id, record


def test_the_moving_tag_follows_the_newest_nightly_and_never_goes_back(
        project: Project, registry: Registry, client: docker.DockerClient) -> None:
    older, newer = f"{VERSION}.dev20261201", f"{VERSION}.dev20261202"
    moving = "nightly-cpu-runtime"
    where = f"{registry.address}/{project.repo}:{moving}"
    first, first_record = _nightly(project, older, "first night")
    code, out = project.run("publish", "--channel", "nightly")
    assert code == 0, out
    a = registry.served_digest(project.repo, f"{older}-cpu-runtime-nightly")
    assert a is not None and registry.served_digest(project.repo, moving) == a
    assert f"{where} moved to {older} ({a})" in " ".join(out.split()), out
    assert _pulled_id(client, registry, project.repo, moving) == first

    second, second_record = _nightly(project, newer, "second night")
    code, out = project.run("publish", "--channel", "nightly")
    assert code == 0, out
    b = registry.served_digest(project.repo, f"{newer}-cpu-runtime-nightly")
    assert b not in (None, a) and registry.served_digest(project.repo, moving) == b
    assert f"{where} moved to {newer} ({b}), was {a}" in " ".join(out.split()), out
    assert _pulled_id(client, registry, project.repo, moving) == second  # what `docker pull` gets now
    assert registry.served_digest(project.repo, f"{older}-cpu-runtime-nightly") == a  # published tags stay

    # The older nightly published again (a late or repeated run): it is there, and the moving tag stays.
    write_manifest(project.dist, [first_record], older)
    tags = registry.tags(project.repo)
    code, out = project.run("publish", "--channel", "nightly")
    assert code == 0, out
    flat = " ".join(out.split())
    assert "nightly: 0 files published, 1 already there" in flat, out
    assert f"{where} left at {newer}, newer than {older}" in flat, out
    assert registry.served_digest(project.repo, moving) == b and registry.tags(project.repo) == tags

    # The newest again: nothing written, nothing journaled.
    write_manifest(project.dist, [second_record], newer)
    journal = (project.root / ".shipyard" / "publish" / "images.jsonl").read_text()
    code, out = project.run("publish", "--channel", "nightly")
    assert code == 0, out
    assert "nightly: 0 files published, 1 already there" in " ".join(out.split()), out
    assert moving not in out, out
    assert registry.served_digest(project.repo, moving) == b and registry.tags(project.repo) == tags
    assert (project.root / ".shipyard" / "publish" / "images.jsonl").read_text() == journal


def test_another_image_under_a_published_channel_tag_is_refused_naming_both_ids(
        project: Project, registry: Registry) -> None:
    first = _image(project, "first").removeprefix("sha256:")
    assert project.run("publish", "--channel", "nightly")[0] == 0
    tag = f"{VERSION}-cpu-runtime-nightly"
    digest = registry.served_digest(project.repo, tag)
    tags = registry.tags(project.repo)
    second = _image(project, "rebuilt").removeprefix("sha256:")  # the same tag, another image
    assert first != second
    code, out = project.run("publish", "--channel", "nightly")
    assert code == 8, out
    flat = " ".join(out.split())
    assert f"{project.ref} is published with sha256 {first}; this one has sha256 {second}" in flat, out
    assert "nothing was uploaded" in flat
    assert registry.served_digest(project.repo, tag) == digest and registry.tags(project.repo) == tags


def test_a_failing_stable_feature_keeps_an_image_from_test(project: Project, registry: Registry) -> None:
    _image(project, "gated", stable="failed")
    code, out = project.run("publish", "--channel", "test")
    assert code == 9, out
    assert "ember.kernels (stable)" in " ".join(out.split()), out
    assert registry.tags(project.repo) == []
    code, out = project.run("publish", "--channel", "nightly")
    assert code == 0, out
    assert "marked: published to nightly with a stable feature not proven" in " ".join(out.split()), out


def test_the_registry_password_appears_in_no_output_and_no_written_file(
        client: docker.DockerClient, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """A registry whose password is a known secret; every image path run, failures included."""
    caplog.set_level(logging.DEBUG)
    with docker_registry(tmp_path / "registry", password=SECRET) as registry:
        project = Project.laid_out(tmp_path, {"url: 127.0.0.1:5000": f"url: {registry.address}"}, {})
        root = project.root
        project.dist.mkdir()
        monkeypatch.setenv("SHIPYARD_REGISTRY_USERNAME", registry.user)
        monkeypatch.setenv("SHIPYARD_REGISTRY_PASSWORD", SECRET)

        def shipyard(*args: str) -> int:
            return main(["-v", "--root", str(root), *args, "--target", "images", "--dist", str(project.dist),
                         "--tries", "2", "--first-pause", "0.05", "--timeout", "5"])

        try:
            _image(project, "secret")
            codes = [shipyard("publish", "--channel", "nightly"), shipyard("publish", "--channel", "nightly"),
                     shipyard("promote", VERSION, "--from", "nightly", "--to", "test")]
            _image(project, "other bytes")
            codes.append(shipyard("publish", "--channel", "nightly"))  # immutability failure
            write_manifest(project.dist, [image_record(project.ref, "sha256:" + "0" * 64)])
            codes.append(shipyard("publish", "--channel", "release"))  # no such image in the engine
            _image(project, "refused")
            monkeypatch.setenv("SHIPYARD_REGISTRY_PASSWORD", "wrong-" + SECRET)  # a refused login
            codes.append(shipyard("publish", "--channel", "release"))
        finally:
            project.remove_images(client)
    assert codes[:3] == [0, 0, 0] and all(c != 0 for c in codes[3:]), codes
    captured = capsys.readouterr()
    shown = captured.out + captured.err + caplog.text
    assert "is published with sha256" in shown and "holds no image" in shown and "401" in shown, shown
    assert SECRET not in shown
    written = [p for folder in (root, project.dist) for p in folder.rglob("*") if p.is_file() and not p.is_symlink()]
    assert any(p.name.endswith(".jsonl") for p in written)
    assert [p for p in written if SECRET.encode() in p.read_bytes()] == []


class _Killed(BaseException):
    """Stands for a kill -9 at one chosen point: nothing after it runs, no handler sees it."""


def test_a_publish_killed_before_the_channel_tag_or_the_moving_tag_is_finished_by_a_rerun_without_pushing_again(
        project: Project, registry: Registry, monkeypatch: pytest.MonkeyPatch) -> None:
    from shipyard.publish.registry import RegistryBackend

    image_id = _image(project, "resumed").removeprefix("sha256:")
    for name, value in project.env.items():
        monkeypatch.setenv(name, value)

    def killed(*args: object, **kwargs: object) -> None:
        raise _Killed

    args = ["--root", str(project.root), "publish", "--channel", "nightly", "--target", "images",
            "--dist", str(project.dist)]
    with monkeypatch.context() as patch:
        patch.setattr(RegistryBackend, "_publish_tag", killed)
        with pytest.raises(_Killed):
            main(args)
    tag = f"{VERSION}-cpu-runtime-nightly"
    assert registry.tags(project.repo) == [f"{tag}-stage-{image_id[:12]}"]  # pushed, verified, not visible
    with monkeypatch.context() as patch:  # killed after every published tag, before the moving tags
        patch.setattr(RegistryBackend, "advance", killed)
        with pytest.raises(_Killed):
            main(args)
    assert registry.tags(project.repo) == [tag, f"{tag}-stage-{image_id[:12]}"]
    assert main(args) == 0
    digest = registry.served_digest(project.repo, tag)
    assert digest == registry.served_digest(project.repo, f"{tag}-stage-{image_id[:12]}")
    assert registry.served_digest(project.repo, "nightly-cpu-runtime") == digest
    events = [line.split('"event": "')[1].split('"')[0]
              for line in (project.root / ".shipyard" / "publish" / "images.jsonl").read_text().splitlines()]
    assert events == ["stage", "verified", "switched", "moved"], events  # the re-runs did not push again


def test_a_flaky_registry_is_tried_again_and_one_that_keeps_failing_is_named(
        project: Project, registry: Registry) -> None:
    from support.fault_proxy import FaultProxy

    image_id = _image(project, "flaky")
    port = int(registry.address.rsplit(":", 1)[1])
    faults = {1: "503", 2: "reset"}  # the publisher's first connections (its listing); it keeps the third

    with FaultProxy(port, lambda number, line: faults.get(number, "pass")) as proxy:
        point_release_yaml(project.root, {"url: 127.0.0.1:5000": f"url: 127.0.0.1:{proxy.port}"})
        code, out = project.run("publish", "--channel", "nightly", tries=3)
        assert code == 0, out
        assert proxy.injected == {"503": 1, "reset": 1}
        assert _pulled_id(docker.from_env(), registry, project.repo, f"{VERSION}-cpu-runtime-nightly") == image_id
        proxy.plan = lambda n, line: "503"
        code, out = project.run("publish", "--channel", "test")
    assert code == 7, out
    flat = " ".join(out.split())
    assert f"127.0.0.1:{proxy.port}: gave up after 2 tries; last response: HTTP 503 Service Unavailable" in flat, out


def test_a_layer_whose_download_breaks_midway_during_a_promotion_is_read_again(
        project: Project, registry: Registry, client: docker.DockerClient) -> None:
    """A promotion reads the image's blobs by digest: a connection that breaks after a blob's
    headers, while its body streams, is read again from the start, never a traceback (exit 1: the
    fault suite met it with seed 340911)."""
    from support.fault_proxy import FaultProxy

    image_id = _image(project, "cut")
    code, out = project.run("publish", "--channel", "nightly")
    assert code == 0, out
    port = int(registry.address.rsplit(":", 1)[1])
    cut: list[str] = []

    def plan(number: int, line: str) -> str:
        if line.startswith("GET ") and "/blobs/" in line and not cut:
            cut.append(line)
            return "cut-body"
        return "pass"

    with FaultProxy(port, plan) as proxy:
        point_release_yaml(project.root, {"url: 127.0.0.1:5000": f"url: 127.0.0.1:{proxy.port}"})
        code, out = project.run("promote", VERSION, "--from", "nightly", "--to", "test")
    assert code == 0, out
    assert proxy.injected == {"cut-body": 1}, cut
    assert _pulled_id(client, registry, project.repo, f"{VERSION}-cpu-runtime-test") == image_id


def test_an_image_missing_from_the_engine_stops_the_publish_before_any_push(
        project: Project, registry: Registry) -> None:
    image_id = _image(project, "present")
    missing = "sha256:" + "0" * 64
    write_manifest(project.dist, [image_record(project.ref, image_id),
                                  image_record(f"{project.repo}:{VERSION}-cpu-devel", missing)])
    code, out = project.run("publish", "--channel", "nightly")
    assert code == 7, out
    flat = " ".join(out.split())
    assert f"{project.repo}:{VERSION}-cpu-devel: the docker engine holds no image {missing}" in flat, out
    assert "nothing was uploaded" in flat
    assert registry.tags(project.repo) == []  # not even the image that is there
