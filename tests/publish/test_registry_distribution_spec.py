"""Registries done as the distribution spec says (#52 item 6, and item 1 for registries), against
Debian's docker-registry and no docker engine: images are written by the registry's API
(support.registry_images), and every `shipyard` here runs with DOCKER_HOST at a socket that does
not exist, so a step that needed an engine would fail.

- `tags/list` is read page after page (`Link`, `n`): a published tag past the first page is a
  conflict, and the conflict check is a HEAD of the exact tag, not a GET of every tag's manifest;
- promotion copies the manifest by digest (blobs mounted across repositories, or copied between
  registries), the digest byte for byte the same;
- two publishers writing one published tag at once: one wins, the other fails with exit 8 naming
  both, and the tag serves the winner's manifest.
"""

from __future__ import annotations

import io
import tarfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import pytest
from support.publish_project import PublishProject
from support.publish_servers import Registry, docker_registry
from support.registry_images import PushedImage, push_image, recording_proxy, tag_image
from support.synthetic_release import VERSION, image_record, write_manifest

from shipyard.errors import ImmutableFileError, PublishError
from shipyard.plumbing.retry import RetryPolicy
from shipyard.publish.credentials import Credentials
from shipyard.publish.image_copy import Repository, copy_image
from shipyard.publish.journal import Journal
from shipyard.publish.plan import PublishFile
from shipyard.publish.registry import RegistryBackend, SourceImage
from shipyard.publish.registry_client import RegistryClient
from shipyard.publish.target import TargetContext
from shipyard.release.destinations import PublishTarget

NO_ENGINE = "unix:///nonexistent/docker.sock"  # any docker call fails: these steps need none
POLICY = RetryPolicy(tries=2, first_pause=0.05, timeout=10)


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with docker_registry(tmp_path_factory.mktemp("registry")) as server:
        yield server


def _repo() -> str:
    return f"shipyard-test-{uuid.uuid4().hex[:8]}"


def _client(registry: Registry, tmp_path: Path, address: str | None = None) -> RegistryClient:
    target = PublishTarget(name="images", kind="docker", url=address or registry.address,
                           username_env="SHIPYARD_REGISTRY_USERNAME", password_env="SHIPYARD_REGISTRY_PASSWORD")
    return RegistryClient(target, tmp_path, Credentials(registry.user, registry.password), POLICY, lambda t: t)


@dataclass(frozen=True, kw_only=True)
class Project(PublishProject):
    targets: tuple[str, ...] = ("images",)
    repo: str = field(default_factory=_repo)

    @property
    def ref(self) -> str:
        return f"{self.repo}:{VERSION}-cpu-runtime"


def _project(tmp_path: Path, registry: Registry, address: str, repo: str | None = None) -> Project:
    """release.yaml's images target at `address` (the registry, or a proxy in front of it)."""
    env = {"SHIPYARD_REGISTRY_USERNAME": registry.user, "SHIPYARD_REGISTRY_PASSWORD": registry.password,
           "DOCKER_HOST": NO_ENGINE}
    project = Project.laid_out(tmp_path, {"url: 127.0.0.1:5000": f"url: {address}"}, env, repo=repo or _repo())
    project.dist.mkdir(exist_ok=True)
    return project


def test_every_page_of_tags_is_read(registry: Registry, tmp_path: Path) -> None:
    repo = _repo()
    image = push_image(registry, repo, "t0", "paged")
    for number in range(1, 5):
        tag_image(registry, repo, image.digest, f"t{number}")
    with recording_proxy(registry) as proxy:
        client = _client(registry, tmp_path, proxy.url)
        assert client.tags(repo, "list", page_size=2) == ["t0", "t1", "t2", "t3", "t4"]
        # pages of 2, 2 and 1, each named by the Link of the one before
        assert set(proxy.seen) == {f"GET /v2/{repo}/tags/list?n=2", f"GET /v2/{repo}/tags/list?n=2&last=t1",
                                   f"GET /v2/{repo}/tags/list?n=2&last=t3"}, proxy.seen
        assert client.tags(_repo(), "list", page_size=2) == []  # no such repository


def test_a_published_tag_past_the_first_page_is_a_conflict_found_by_one_head(
        registry: Registry, tmp_path: Path) -> None:
    """A registry that pages tags/list by default (here: 2 a page) and a channel with more
    published tags than a page: the tag on page 3 is the image's own, with another id."""
    project = _project(tmp_path, registry, registry.address)
    for number in range(4):  # older nightlies, listed before 1.7.0's tag
        push_image(registry, project.repo, f"0.{number}.0-cpu-runtime-nightly", f"old {number}")
    served = push_image(registry, project.repo, f"{VERSION}-cpu-runtime-nightly", "published first")
    other = "sha256:" + "1" * 64
    write_manifest(project.dist, [image_record(project.ref, other)])
    with recording_proxy(registry, default_page=2) as proxy:
        code, out = _project(tmp_path, registry, proxy.url, project.repo).run("publish", "--channel", "nightly")
    assert code == 8, out
    flat = " ".join(out.split())
    assert (f"{project.ref} is published with sha256 {served.image_id.removeprefix('sha256:')}; this one has "
            f"sha256 {other.removeprefix('sha256:')}") in flat, out
    assert registry.served_digest(project.repo, f"{VERSION}-cpu-runtime-nightly") == served.digest
    # A HEAD of the exact tag, a GET of its manifest by digest (to learn its image id): no list of
    # tags, no other tag's manifest (the first try of each goes without credentials: the 401 asks).
    assert set(proxy.seen) == {f"HEAD /v2/{project.repo}/manifests/{VERSION}-cpu-runtime-nightly",
                               f"GET /v2/{project.repo}/manifests/{served.digest}"}, proxy.seen


def test_a_moving_tag_does_not_go_back_when_the_newer_version_is_past_the_first_page(
        registry: Registry, tmp_path: Path) -> None:
    """The older nightly published again (a late re-run) on a registry that pages tags/list by
    default: the newer nightly's tag, which the moving tag names, is on page 2."""
    project = _project(tmp_path, registry, registry.address)
    older, newer = f"{VERSION}.dev20261201", f"{VERSION}.dev20261202"
    for number in range(2):  # page 1
        push_image(registry, project.repo, f"0.{number}.0-cpu-runtime-nightly", f"old {number}")
    first = push_image(registry, project.repo, f"{older}-cpu-runtime-nightly", "first night")
    second = push_image(registry, project.repo, f"{newer}-cpu-runtime-nightly", "second night")
    tag_image(registry, project.repo, second.digest, "nightly-cpu-runtime")
    write_manifest(project.dist, [image_record(f"{project.repo}:{older}-cpu-runtime", first.image_id,
                                               version=older)], older)
    with recording_proxy(registry, default_page=2) as proxy:
        code, out = _project(tmp_path, registry, proxy.url, project.repo).run("publish", "--channel", "nightly")
    assert code == 0, out
    flat = " ".join(out.split())
    assert "nightly: 0 files published, 1 already there" in flat, out
    assert f"{proxy.url}/{project.repo}:nightly-cpu-runtime left at {newer}, newer than {older}" in flat, out
    assert registry.served_digest(project.repo, "nightly-cpu-runtime") == second.digest


def test_promotion_copies_the_manifest_by_digest_without_an_engine(registry: Registry, tmp_path: Path) -> None:
    project = _project(tmp_path, registry, registry.address)
    nightly = push_image(registry, project.repo, f"{VERSION}-cpu-runtime-nightly", "promoted")
    write_manifest(project.dist, [image_record(project.ref, nightly.image_id)])
    for source, channel in (("nightly", "test"), ("test", "release")):
        code, out = project.run("promote", VERSION, "--from", source, "--to", channel)
        assert code == 0, out
        assert registry.served_digest(project.repo, f"{VERSION}-cpu-runtime-{channel}") == nightly.digest
        assert registry.served_digest(project.repo, f"{channel}-cpu-runtime") == nightly.digest  # its moving tag
    code, out = project.run("promote", VERSION, "--from", "nightly", "--to", "test")  # again: nothing to do
    assert code == 0, out
    assert "0 files published, 1 already there" in " ".join(out.split()), out


def _blob_requests(proxy_seen: list[str]) -> list[str]:
    return [line for line in proxy_seen if "/blobs/" in line and not line.startswith("HEAD ")]


def test_an_image_is_copied_by_digest_mounting_blobs_within_a_registry_and_copying_them_across(
        registry: Registry, tmp_path: Path) -> None:
    source_repo, other_repo = _repo(), _repo()
    image = push_image(registry, source_repo, "1.7.0", "copied")
    with recording_proxy(registry) as proxy:
        api = _client(registry, tmp_path, proxy.url)
        body = copy_image(Repository(api, source_repo), image.digest, Repository(api, other_repo), "1.7.0-test",
                          POLICY)
        # Both blobs mounted from the source repository: no byte of them read or sent.
        assert sorted(_blob_requests(proxy.seen)) == sorted(
            f"POST /v2/{other_repo}/blobs/uploads/?mount={d}&from={source_repo}" for d in (image.image_id, image.layer))
    assert registry.served_digest(other_repo, "1.7.0-test") == image.digest
    with docker_registry(tmp_path / "second") as second:
        far = _client(second, tmp_path)
        copied = copy_image(Repository(_client(registry, tmp_path), source_repo), image.digest,
                            Repository(far, source_repo), "1.7.0", POLICY)
        assert copied == body
        assert second.served_digest(source_repo, "1.7.0") == image.digest  # byte for byte the same manifest
        assert second.blob_on_disk(image.layer) == registry.blob_on_disk(image.layer)


def _backend(registry: Registry, tmp_path: Path, name: str) -> RegistryBackend:
    target = PublishTarget(name="images", kind="docker", url=registry.address,
                           username_env="SHIPYARD_REGISTRY_USERNAME", password_env="SHIPYARD_REGISTRY_PASSWORD")
    ctx = TargetContext(target=target, root=tmp_path, credentials=Credentials(registry.user, registry.password),
                        policy=POLICY, journal=Journal(tmp_path / f"{name}.jsonl"), scrub=lambda t: t,
                        progress=lambda _: None)
    return RegistryBackend(ctx)


def _staged(tmp_path: Path, repo: str, image: PushedImage, name: str) -> PublishFile:
    """`repo:1.7.0-cpu-runtime` to publish from the image at `repo@image.digest` (what promotion's fetch hands on)."""
    path = SourceImage(repo, image.digest, image.image_id).write(tmp_path / f"{name}{SourceImage.SUFFIX}")
    filename = f"{repo}:{VERSION}-cpu-runtime"
    return PublishFile("image", filename, path, image.image_id.removeprefix("sha256:"), repo, VERSION, filename)


def _race(backends: list[RegistryBackend], files: list[PublishFile]) -> list[BaseException | None]:
    """Each backend releases its file to nightly, both at the same moment; what each raised."""
    start = threading.Barrier(len(backends))
    outcomes: list[BaseException | None] = [None] * len(backends)

    def publish(n: int) -> None:
        start.wait()
        try:
            backends[n].release("nightly", [files[n]])
        except BaseException as exc:  # noqa: BLE001 - the outcome is what the test reads
            outcomes[n] = exc

    threads = [threading.Thread(target=publish, args=(n,)) for n in range(len(backends))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


def test_two_publishers_writing_one_published_tag_at_once_one_wins_and_the_other_fails_naming_both(
        registry: Registry, tmp_path: Path) -> None:
    """Two threads, each with its own backend and journal, release another image under the same
    published tag at the same moment (backend level: two `shipyard publish` processes would need
    two images in an engine). A registry has no conditional write: each writes, reads back, and
    reads again after a pause."""
    for round_number in range(10):
        repo = _repo()
        images = [push_image(registry, repo, f"source-{n}", f"rival {n} of round {round_number}") for n in (0, 1)]
        outcomes = _race([_backend(registry, tmp_path, f"{round_number}-{n}") for n in (0, 1)],
                         [_staged(tmp_path, repo, image, f"{round_number}-{n}") for n, image in enumerate(images)])
        assert sum(o is None for o in outcomes) == 1, outcomes
        winner = outcomes.index(None)
        loser = outcomes[1 - winner]
        assert isinstance(loser, ImmutableFileError) and loser.exit_code == 8, loser
        assert registry.served_digest(repo, f"{VERSION}-cpu-runtime-nightly") == images[winner].digest
        message = str(loser)
        for image in images:  # the winner's manifest and image id, and its own
            assert image.digest in message and image.image_id.removeprefix("sha256:") in message, message


class _SavedByContainerdStore:
    """An image as an engine with the containerd image store holds it: its id is its manifest's
    digest, and `docker save` still gives its config and layers."""

    attrs: ClassVar[dict[str, object]] = {"RootFS": {"Layers": []}}

    def save(self, named: bool = False) -> Iterator[bytes]:
        config = b'{"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}}'
        listing = b'[{"Config": "config.json", "Layers": []}]'
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w") as tar:
            for name, data in (("config.json", config), ("manifest.json", listing)):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        yield archive.getvalue()


def test_an_image_of_the_containerd_store_is_refused_saying_what_to_do(registry: Registry, tmp_path: Path) -> None:
    repo = _repo()
    image_id = "d" * 64  # the manifest's digest, which such an engine calls the image's id
    f = PublishFile("image", f"{repo}:{VERSION}-cpu-runtime", tmp_path, image_id, repo, VERSION,
                    f"{repo}:{VERSION}-cpu-runtime")
    with pytest.raises(PublishError) as refused:
        _backend(registry, tmp_path, "containerd")._upload_saved(f, _SavedByContainerdStore(), repo)
    message = str(refused.value)
    assert "containerd image store" in message and "nothing became visible" in message, message
    assert '"containerd-snapshotter": false' in message and "/etc/docker/daemon.json" in message, message
    assert registry.tags(repo) == []
