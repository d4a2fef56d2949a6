"""Images in a docker registry: per channel, one published tag per image, written last,
`<url>/<repo>:<tag>-<channel>` (ember's CPU runtime image on nightly:
`127.0.0.1:5000/ember:1.7.0-cpu-runtime-nightly`), which never moves, and one moving tag per kind of
image, `<url>/<repo>:<channel>-<kind>` (`127.0.0.1:5000/ember:nightly-cpu-runtime`), which follows
the newest version (image/tags.py names them all).

An image's manifest record (package type `docker`) names it by its version tag
(`ember:1.7.0-cpu-runtime`) and gives its image id as sha256; the image id is the digest of the
image's config, which the registry manifest names too, so "the bytes the manifest records" is
checkable on the registry without pulling a layer. A publish, per image:

1. pushes the local image (found by its id, not by a tag that may have moved) under a staging
   tag, `<tag>-<channel>-stage-<id[:12]>`, over the registry's HTTP API: the engine saves the
   image (`docker save`), each layer is gzipped the same way every time (no timestamp, one
   level), each blob the registry does not hold yet is uploaded, then the manifest is PUT; an
   image whose blobs the registry holds, and which this machine pushed before (layer_blobs.py),
   is neither saved nor gzipped again: a HEAD of each blob, then the same manifest;
2. reads the pushed manifest back by its digest, checks the digest of the bytes served, that its
   config is the recorded image id, and the config blob's own sha256;
3. when every image of the release is staged and verified, writes each published tag with one PUT
   of exactly those manifest bytes, then reads the tag back;
4. when every published tag of the release (of every target) is there, `advance` moves each image's
   moving tag to it: the same PUT and read-back, unless it names that manifest already (no PUT) or
   an image of a newer version (left, and said). So a user never pulls a moving tag whose siblings
   are not published yet, and a late publish of an older version never takes it back. The version
   of the image a moving tag names is the version of the published tag of this channel and kind
   that names the same manifest; only versions newer than the one published are read (most runs
   read none).

A tag names a complete, verified image or nothing, and a published tag is never moved: run.py
refuses an image whose published tag already names another id (naming both), and leaves one that
names the same id alone; what the tag names is asked with a HEAD of that exact tag (`shown`), and
its manifest read only when its digest is new to the run and the journal. A registry has no
conditional write, so step 3 is: HEAD (another manifest: refused), PUT, read back at once and
after one pause per release; a rival's manifest there means the rival won, and this publisher
fails (exit 8) naming both and writes nothing over it. Staging tags stay (a registry can delete a
manifest, not a tag). A killed publish is finished by running it again: the same image gives the
same blobs and the same manifest bytes, blobs already there are not sent again, and an image the
journal records as verified under its staging tag is not pushed again. A run killed before the moving tags finds
every image unchanged, and `advance`, which reads the registry rather than the journal, moves them.

Promotion needs no engine: `fetch` reads the source channel's manifest by digest and its config
blob (each checked against its digest) and hands on a `SourceImage`, which step 1 copies by digest
under the staging tag (image_copy.py: blobs mounted or copied, the manifest's bytes unchanged), so
the digest is the same in every channel, byte for byte.

Every request goes through registry_client.RegistryClient (HTTPS with the target's CA bundle,
basic or bearer-token auth as the registry asks, retry.py's retries). Why not the engine's own
push and pull: the engine trusts a registry's CA only through /etc/docker/certs.d on the host,
takes credentials per call but its own retry and auth logic, and would be a second client with
its own failure modes; the engine is used only to save images, which touches no network.
Repositories are never enumerated (`_catalog` is not served to most users): a channel is read
per repository the manifest names (tags/list, every page, then a HEAD per tag).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import tarfile
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, ClassVar

import docker
from docker.models.images import Image
from packaging.version import InvalidVersion, Version

from shipyard.errors import ImmutableFileError, PublishError
from shipyard.host.docker_base import ensure_docker_engine
from shipyard.image.tags import kind_of, moving_tag, published_tag, published_version, staging_tag
from shipyard.plumbing.atomic_files import write_atomic
from shipyard.plumbing.hashing import sha256_hex, sha256_of
from shipyard.plumbing.retry import describe
from shipyard.publish.image_copy import (
    MANIFEST_V2,
    MANIFESTS,
    Repository,
    copy_image,
    holds_blob,
    pull_blob,
    push_blob,
    put_manifest,
    read_manifest,
)
from shipyard.publish.layer_blobs import known_blobs, remember_blobs
from shipyard.publish.plan import PublishFile
from shipyard.publish.registry_client import RegistryClient
from shipyard.publish.target import Backend, Listed, TargetContext
from shipyard.release.destinations import registry_base

_CONFIG = "application/vnd.docker.container.image.v1+json"
_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"
# HEADs in flight at once when a run reads many tags (every published and moving tag of a release):
# one at a time, an unchanged re-publish of 100 images waited 300 round trips, each with the
# registry checking the password (a bcrypt hash per request with htpasswd).
_READERS = 4


def channel_reference(target_url: str, name: str, channel: str) -> str:
    """What a user pulls: `127.0.0.1:5000` and `ember:1.7.0-cpu-runtime` on `nightly` →
    `127.0.0.1:5000/ember:1.7.0-cpu-runtime-nightly` (under the url's namespace, when it has one)."""
    _, host, namespace = registry_base(target_url)
    tag = published_tag(name, channel)
    return f"{host}/{namespace}/{tag}" if namespace else f"{host}/{tag}"


@dataclass(frozen=True)
class SourceImage:
    """What promotion's `fetch` hands on: the image by manifest digest in the source channel's
    repository, which `release` copies by digest (image_copy.py) instead of pushing from an engine."""

    repo: str  # as the manifest record names it (ember), not its name in the API
    digest: str  # the manifest's
    image_id: str  # sha256:<config digest>, checked against the config blob's bytes

    SUFFIX: ClassVar[str] = ".image-source.json"

    def write(self, path: Path) -> Path:
        write_atomic(path, json.dumps({"repo": self.repo, "digest": self.digest, "image_id": self.image_id}) + "\n")
        return path

    @classmethod
    def read(cls, path: Path) -> SourceImage | None:
        """The source a promotion's fetch wrote at `path`; None for any other file (a publish's)."""
        if not path.name.endswith(cls.SUFFIX) or not path.is_file():
            return None
        data = json.loads(path.read_text())
        return cls(str(data["repo"]), str(data["digest"]), str(data["image_id"]))


class RegistryBackend(Backend):
    def __init__(self, ctx: TargetContext) -> None:
        super().__init__(ctx)
        self.api = RegistryClient(ctx.target, ctx.root, ctx.credentials, ctx.policy, ctx.scrub)
        self.host = f"{self.api.host}/{self.api.namespace}" if self.api.namespace else self.api.host
        self._client: docker.DockerClient | None = None
        # The `n` tags/list is asked for (None: the registry's own page size); every page is read.
        self.tags_page_size: int | None = None
        # How long a publisher waits after writing a published tag before it reads the tag back a
        # second time: a rival's PUT that landed after this one's first read-back shows then.
        self.settle_seconds = min(1.0, ctx.policy.first_pause * 2)
        self._configs: dict[str, str] = {}  # manifest digest → its config's digest, as read this run
        self._journal_read = False  # the journal's digests are in _configs
        # (repo, published tag) → the manifest digest it named when this run read or wrote it: a
        # published tag never moves, so `advance` does not ask again what `shown` or `release` saw.
        self._published_digests: dict[tuple[str, str], str] = {}

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            ensure_docker_engine(required=True)  # else: the fix, not the SDK's traceback
            self._client = docker.from_env(timeout=max(600, int(self.ctx.policy.timeout)))
        return self._client

    def describe(self, channel: str) -> str:
        return f"{self.host}/<repo>:<tag>-{channel}, the newest: <repo>:{channel}-<kind>"

    # --- the registry's API ------------------------------------------------------------------

    def _repo(self, repo: str) -> str:
        """The repository's name in the API: under the url's namespace (ghcr.io/acme → acme/ember)."""
        return f"{self.api.namespace}/{repo}" if self.api.namespace else repo

    def _repository(self, repo: str) -> Repository:
        return Repository(self.api, self._repo(repo))

    def _tags(self, repo: str) -> list[str]:
        """Every tag of `repo`, every page of them."""
        return self.api.tags(self._repo(repo), f"list the tags of {repo}", self.tags_page_size)

    def _config_of(self, repo: str, digest: str) -> str:
        """The config digest (the image id) of the manifest `digest`: from this run's reads or the
        journal's records (a digest names one manifest for ever), else one GET of it by digest."""
        if digest not in self._configs and not self._journal_read:
            self._journal_read = True
            for entry in (*self.ctx.journal.events("switched"), *self.ctx.journal.events("verified")):
                manifest = entry.get("digest") or entry.get("sha256")
                image_id = entry.get("sha256") if "digest" in entry else entry.get("image_id")
                if isinstance(manifest, str) and isinstance(image_id, str):
                    self._configs.setdefault(manifest, "sha256:" + image_id.removeprefix("sha256:"))
        if digest not in self._configs:
            body = read_manifest(self._repository(repo), digest)
            self._configs[digest] = self._config_digest(body, f"{self.host}/{repo}@{digest}")
        return self._configs[digest]

    def _manifest(self, repo: str, reference: str) -> tuple[bytes, str, str]:
        """(the manifest's bytes, its media type, its digest as computed from those bytes)."""
        what = f"read {repo}:{reference}" if ":" not in reference else f"read {repo}@{reference}"
        response = self.api.request("GET", what, f"{self._repo(repo)}/manifests/{reference}",
                                    headers={"Accept": MANIFESTS})
        if response.status_code != 200:
            raise self.api.fail(what, response)
        kind = response.headers.get("Content-Type", "").split(";")[0]
        return response.content, kind, "sha256:" + sha256_hex(response.content)

    @staticmethod
    def _config_digest(body: bytes, where: str) -> str:
        data = json.loads(body)
        config = (data.get("config") or {}).get("digest")
        if not config:
            raise PublishError(f"{where}: the registry serves a manifest without a config (media type "
                               f"{data.get('mediaType')!r}); shipyard publishes single-platform images")
        return str(config)

    # --- Backend ----------------------------------------------------------------------------

    def listing(self, channel: str, *, indexes: Sequence[str] | None = None,
                projects: Sequence[str] | None = None) -> list[Listed]:
        """Every `<repo>:<tag>-<channel>` of the repositories `projects` (every page of their tags)
        with the image id its manifest names: a HEAD per tag, and a GET only of a manifest digest
        neither this run nor the journal knows. A registry is read per repository: most do not list
        their repositories."""
        if projects is None:
            raise TypeError("a registry is listed per repository: pass projects")
        out = []
        suffix = f"-{channel}"
        for repo in projects:
            for tag in self._tags(repo):
                if not tag.endswith(suffix):
                    continue
                digest = self._digest(repo, tag)
                if digest is None:  # deleted since the list was read
                    continue
                config = self._config_of(repo, digest)
                name = tag.removesuffix(suffix)
                out.append(Listed("image", f"{repo}:{name}", config.removeprefix("sha256:"), repo,
                                  name.split("-", 1)[0], f"{self.host}/{repo}@{digest}"))
        return out

    def shown(self, channel: str, files: Sequence[PublishFile]) -> dict[tuple[str, str], str]:
        """The image id each file's published tag names now: a HEAD of that exact tag (its
        Docker-Content-Digest), no list of tags, and a GET of its manifest only when the digest is
        not known (a registry counts manifest GETs against pull limits, HEADs not)."""
        refs = [(f, self._published_ref(f, channel)) for f in files]
        digests = self._digests([ref for _, ref in refs])
        out = {}
        for f, ref in refs:
            digest = digests[ref]
            if digest is not None:
                self._published_digests[ref] = digest
                out[f.index, f.filename] = self._config_of(ref[0], digest).removeprefix("sha256:")
        return out

    @staticmethod
    def _published_ref(f: PublishFile, channel: str) -> tuple[str, str]:
        """(repo, the published tag of `f` in `channel`)."""
        repo, name = f.filename.split(":", 1)
        return repo, published_tag(name, channel)

    def fetch(self, listed: Listed, dest: Path) -> Path:
        """The listed image as promotion copies it: by manifest digest, registry to registry, with
        no engine (`SourceImage`, in `dest`); its config blob is read and checked against the id."""
        digest = listed.url.rsplit("@", 1)[1]
        repo = listed.project
        where = f"{self.host}/{repo}@{digest}"
        body = read_manifest(self._repository(repo), digest)
        config = self._config_digest(body, where)
        dest.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="config-", dir=dest) as scratch:
            self._blob(repo, config, Path(scratch) / "config.json")  # checked against its digest
        source = SourceImage(repo, digest, config)
        return source.write(dest / f"{listed.filename.replace(':', '_').replace('/', '_')}{SourceImage.SUFFIX}")

    def _blob(self, repo: str, digest: str, path: Path) -> Path:
        """The blob `digest` of `repo` in `path`, checked against its digest (image_copy.pull_blob)."""
        return pull_blob(self._repository(repo), digest, path, self.ctx.policy)

    def fetched_sha256(self, path: Path) -> str:
        """The id of the image `fetch` found: its config's digest, the config blob checked against it."""
        source = SourceImage.read(path)
        return source.image_id.removeprefix("sha256:") if source is not None else f"no image source in {path}"

    def release(self, channel: str, files: Sequence[PublishFile]) -> None:
        """Every image staged and verified first, then the channel tags, one PUT each: the
        release's images appear together, and none before all of them are verified. A registry
        has no conditional write: after one pause, each tag this run wrote is read again, and one
        a rival publisher wrote meanwhile ends the run (exit 8), the rival's manifest left as it is."""
        staged = [(f, *self._stage(channel, f)) for f in files]
        written = []
        for f, digest, body in staged:
            repo, name = f.filename.split(":", 1)
            tag = published_tag(name, channel)
            written.append((f, digest, repo, tag, self._publish_tag(repo, tag, body, digest, f)))
        if any(put for *_, put in written):  # a rival whose PUT came after this run's read-back shows now
            time.sleep(self.settle_seconds)
        for f, digest, repo, tag, put in written:
            if put:
                self._still_published(repo, tag, digest, f)
            self._published_digests[repo, tag] = digest
            self.ctx.journal.record("switched", target=self.target.name, channel=channel, image=f.filename,
                                    ref=f"{self.host}/{repo}:{tag}", digest=digest, sha256=f.sha256)
        self.ctx.progress(f"{self.target.name}: {self.host}/<repo>:<tag>-{channel}: {len(files)} images visible")

    def advance(self, channel: str, files: Sequence[PublishFile]) -> list[str]:
        """Each image's moving tag `<repo>:<channel>-<kind>` to the manifest its published tag names
        (every published tag of the release is there): one PUT of those bytes, read back; nothing
        when it names that manifest already, and left, said, when it names a newer version."""
        said = []
        newer: dict[tuple[str, str], list[tuple[Version, str]]] = {}  # (repo, kind) → published tags, newest first
        ordered = sorted(files, key=lambda f: _version(f.version) or Version("0"))  # the newest moves last
        # What every moving tag names now, and each published tag this run has not read yet, read
        # up front a few at a time; a moving tag this loop writes is known from then on.
        reads = [self._published_ref(f, channel) for f in ordered]
        reads = [r for r in reads if r not in self._published_digests]
        for f in ordered:
            kind = kind_of(f.filename, f.version)
            if kind is not None:
                repo = f.filename.split(":", 1)[0]
                reads.append((repo, moving_tag(repo, channel, kind).split(":", 1)[1]))
        now = self._digests(reads)
        for f in ordered:
            repo, name = f.filename.split(":", 1)
            kind = kind_of(f.filename, f.version)
            if kind is None:  # not `<version>-<kind>`: no kind of image for a moving tag to follow
                said.append(f"{self.host}/{f.filename}: no moving tag (its tag does not start with its version "
                            f"{f.version})")
                continue
            moving = moving_tag(repo, channel, kind).split(":", 1)[1]
            ref = f"{self.host}/{repo}:{moving}"
            published = (repo, published_tag(name, channel))
            digest = self._published_digests.get(published) or now[published]
            if digest is None:
                raise PublishError(f"{f.artifact}: {self.host}/{repo}:{published_tag(name, channel)} is not served "
                                   f"after it was published; publish again")
            current = now[repo, moving]
            if current == digest:
                continue
            if current is not None:
                if (repo, kind) not in newer:
                    newer[repo, kind] = self._published(repo, kind, channel)
                held = next((v for v, tag in newer[repo, kind] if v > (_version(f.version) or Version("0"))
                             and self._digest(repo, tag) == current), None)
                if held is not None:
                    said.append(f"{ref} left at {held}, newer than {f.version}")
                    continue
            body, _, served = self._manifest(repo, digest)
            if served != digest:
                raise PublishError(f"{f.artifact}: {self.host}/{repo}@{digest} reads back as {served}; publish again")
            self._write_tag(repo, moving, body, digest, f)
            now[repo, moving] = digest
            self.ctx.journal.record("moved", target=self.target.name, channel=channel, image=f.filename,
                                    ref=ref, digest=digest, was=current)
            said.append(f"{ref} moved to {f.version} ({digest})" + (f", was {current}" if current else ""))
        return said

    def _published(self, repo: str, kind: str, channel: str) -> list[tuple[Version, str]]:
        """(version, tag) of every published tag of this kind and channel, newest first."""
        out = []
        for tag in self._tags(repo):
            version = _version(published_version(tag, kind, channel) or "")
            if version is not None:
                out.append((version, tag))
        return sorted(out, reverse=True)

    def preflight(self, files: Sequence[PublishFile]) -> None:
        """The engine answers and holds every image by the id the manifest records (a promotion
        copies by digest and needs no engine)."""
        for f in files:
            if SourceImage.read(f.path) is None:
                self._local_image(f)

    def _local_image(self, f: PublishFile) -> Image:
        try:
            return self.client.images.get(f"sha256:{f.sha256}")
        except docker.errors.ImageNotFound:
            raise PublishError(f"{f.artifact}: the docker engine holds no image sha256:{f.sha256} (the image id "
                               f"dist/manifest.json records); nothing was uploaded: build it again (shipyard image "
                               f"build) or publish on the machine that built it") from None

    def _stage(self, channel: str, f: PublishFile) -> tuple[str, bytes]:
        """The image under its staging tag, verified: (manifest digest, manifest bytes). Not pushed
        again when the journal and the registry agree it is there."""
        repo, name = f.filename.split(":", 1)
        staging = staging_tag(name, channel, f.sha256)
        stage_ref = f"{self.host}/{repo}:{staging}"
        digest = self.ctx.journal.verified(stage_ref).get(f.filename)
        if digest is not None and self._tag_has(repo, staging, digest):
            return digest, self._verify(repo, digest, f)
        source = SourceImage.read(f.path)
        if source is not None:  # a promotion: the source channel's manifest, byte for byte
            body = copy_image(self._repository(source.repo), source.digest, self._repository(repo), staging,
                              self.ctx.policy)
            digest = "sha256:" + sha256_hex(body)
        else:
            digest = self._push(f, repo, staging)
        self.ctx.journal.record("stage", target=self.target.name, channel=channel, image=f.filename,
                                ref=stage_ref, digest=digest, sha256=f.sha256)
        body = self._verify(repo, digest, f)
        self.ctx.journal.record("verified", target=self.target.name, where=stage_ref, file=f.filename,
                                sha256=digest, image_id=f.sha256)
        return digest, body

    def _push(self, f: PublishFile, repo: str, tag: str) -> str:
        """Push the local image with id `f.sha256` as `<repo>:<tag>`: its blobs, then its manifest;
        the manifest's digest. The same image always gives the same bytes, so a re-run (or a
        promotion) gives the same digest and sends no blob the registry holds; when the registry
        holds them all and this machine knows which they are (layer_blobs), it neither saves nor
        gzips the image."""
        image = self._local_image(f)
        config, layers = self._held(f, image, repo) or self._upload_saved(f, image, repo)
        manifest = {"schemaVersion": 2, "mediaType": MANIFEST_V2, "config": config, "layers": layers}
        body = json.dumps(manifest, indent=3).encode()
        digest = "sha256:" + sha256_hex(body)
        put_manifest(self._repository(repo), tag, body, f"push {f.artifact} as {self.host}/{repo}:{tag}")
        return digest

    def _held(self, f: PublishFile, image: Image, repo: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        """The manifest's config and layers, when the registry holds the config and the blob this
        machine recorded for each layer of the image; else None (the full push)."""
        blobs = known_blobs(image.attrs["RootFS"]["Layers"])
        if blobs is None:
            return None
        sizes = []
        for digest in (f"sha256:{f.sha256}", *blobs):
            size = holds_blob(self._repository(repo), digest, f"push {f.artifact}")
            if not size:
                return None  # not held (or held without a length to put in the manifest)
            sizes.append(size)
        return ({"mediaType": _CONFIG, "size": sizes[0], "digest": f"sha256:{f.sha256}"},
                [{"mediaType": _LAYER, "size": size, "digest": digest}
                 for size, digest in zip(sizes[1:], blobs, strict=True)])

    def _upload_saved(self, f: PublishFile, image: Image, repo: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Save the image, gzip each layer the same way every time, upload the blobs the registry
        lacks, and record each layer's blob (layer_blobs): the manifest's config and layers."""
        diff_ids = image.attrs["RootFS"]["Layers"]
        with tempfile.TemporaryDirectory(prefix="shipyard-push-") as scratch:
            folder = Path(scratch)
            config, layers = self._saved(image, f, folder)
            described, made = [], {}
            for number, layer in enumerate(layers):
                packed = layer.with_suffix(".gz")
                plain = hashlib.sha256()
                with layer.open("rb") as source, packed.open("wb") as sink, \
                        gzip.GzipFile(filename="", mode="wb", fileobj=sink, mtime=0, compresslevel=6) as out:
                    while chunk := source.read(1 << 20):
                        plain.update(chunk)
                        out.write(chunk)
                layer.unlink()
                digest = "sha256:" + sha256_of(packed)
                self._upload_blob(f, repo, digest, packed)
                described.append({"mediaType": _LAYER, "size": packed.stat().st_size, "digest": digest})
                if number < len(diff_ids) and diff_ids[number] == f"sha256:{plain.hexdigest()}":
                    made[diff_ids[number]] = digest
            self._upload_blob(f, repo, f"sha256:{f.sha256}", config)
            config_size = config.stat().st_size
        remember_blobs(made)
        return {"mediaType": _CONFIG, "size": config_size, "digest": f"sha256:{f.sha256}"}, described

    def _saved(self, image: Image, f: PublishFile, folder: Path) -> tuple[Path, list[Path]]:
        """`docker save` of the image, unpacked: (its config, its layers as uncompressed tars, in order)."""
        archive = folder / "image.tar"
        try:
            with archive.open("wb") as out:
                for chunk in image.save(named=False):
                    out.write(chunk)
        except docker.errors.APIError as exc:
            raise PublishError(f"{f.artifact}: docker save sha256:{f.sha256}: {exc.explanation or exc}") from None
        with tarfile.open(archive) as tar:
            entry = json.load(_member(tar, "manifest.json"))[0]
            config = folder / "config.json"
            config.write_bytes(_member(tar, entry["Config"]).read())
            layers = []
            for number, name in enumerate(entry["Layers"]):
                layer = folder / f"{number}.tar"
                with layer.open("wb") as out:
                    shutil.copyfileobj(_member(tar, name), out, 1 << 20)
                layers.append(layer)
        archive.unlink()
        if "sha256:" + sha256_of(config) != f"sha256:{f.sha256}":
            raise PublishError(f"{f.artifact}: the engine saves image sha256:{f.sha256} with a config that hashes to "
                               f"sha256:{sha256_of(config)}: this engine keeps images in the containerd image "
                               f"store, where an image's id is its manifest's digest, not its config's, and "
                               f"dist/manifest.json records the id; nothing became visible: publish from an engine "
                               f"with the classic image store (\"features\": {{\"containerd-snapshotter\": false}} "
                               f"in /etc/docker/daemon.json, dockerd restarted), where shipyard image build records "
                               f"ids the registry can check; then publish from that engine")
        return config, layers

    def _upload_blob(self, f: PublishFile, repo: str, digest: str, path: Path) -> None:
        """The blob in the registry: left alone when it is there, else uploaded (image_copy.push_blob)."""
        push_blob(self._repository(repo), digest, path, self.ctx.policy, f"push {f.artifact}: blob {digest[:19]}")

    def _tag_has(self, repo: str, tag: str, digest: str) -> bool:
        response = self.api.request("HEAD", f"read {repo}:{tag}", f"{self._repo(repo)}/manifests/{tag}",
                                    headers={"Accept": MANIFESTS})
        return response.status_code == 200 and response.headers.get("Docker-Content-Digest") == digest

    def _digests(self, refs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str | None]:
        """`_digest` of each (repo, tag), up to _READERS HEADs in flight at once. The first goes
        alone: its 401 settles the auth the registry asks for (basic, or a token) before the others
        go out with it."""
        unique = list(dict.fromkeys(refs))
        if not unique:
            return {}
        out = {unique[0]: self._digest(*unique[0])}
        with ThreadPoolExecutor(max_workers=_READERS) as pool:
            out.update(zip(unique[1:], pool.map(lambda ref: self._digest(*ref), unique[1:]), strict=True))
        return out

    def _digest(self, repo: str, tag: str) -> str | None:
        """The manifest digest the registry serves under `repo:tag`; None when there is no such tag."""
        what = f"read {self.host}/{repo}:{tag}"
        response = self.api.request("HEAD", what, f"{self._repo(repo)}/manifests/{tag}",
                                    headers={"Accept": MANIFESTS})
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise self.api.fail(what, response)
        return response.headers.get("Docker-Content-Digest")

    def _verify(self, repo: str, digest: str, f: PublishFile) -> bytes:
        """The manifest the registry serves by `digest`: its bytes hash to it, its config is the
        image id the manifest records, and the config blob hashes to that id."""
        where = f"{self.host}/{repo}@{digest}"
        body, _, served = self._manifest(repo, digest)
        config = self._config_digest(body, where)
        blob = self.api.request("GET", f"read the config of {where}", f"{self._repo(repo)}/blobs/{config}")
        blob_digest = ("sha256:" + sha256_hex(blob.content) if blob.status_code == 200
                       else describe(blob))
        if served != digest or config != f"sha256:{f.sha256}" or blob_digest != config:
            raise PublishError(f"{f.artifact}: {where} reads back as manifest {served} with config {config} "
                               f"(blob: {blob_digest}); the manifest records image id sha256:{f.sha256}; nothing "
                               f"became visible under a channel tag: check the registry, then publish again")
        return body

    def _publish_tag(self, repo: str, tag: str, body: bytes, digest: str, f: PublishFile) -> bool:
        """The published tag, written as a registry allows it: refused when it names another
        manifest already; else one PUT, read back. Whether this run wrote it (`release` reads it
        once more after a pause)."""
        held = self._digest(repo, tag)
        if held == digest:  # a re-run, or a rival with the very same image
            return False
        if held is None:
            self._put_tag(repo, tag, body, f)
        self._still_published(repo, tag, digest, f)
        return True

    def _still_published(self, repo: str, tag: str, digest: str, f: PublishFile) -> None:
        """The tag names manifest `digest`; another manifest there means a rival publisher wrote the
        tag meanwhile and won: ImmutableFileError naming both, and the tag is left as it wrote it."""
        held = self._digest(repo, tag)
        if held is None:
            raise PublishError(f"{f.artifact}: {self.host}/{repo}:{tag} is not served after it was written; "
                               f"publish again")
        if held != digest:
            winner = self._config_of(repo, held).removeprefix("sha256:")
            raise ImmutableFileError(
                f"{self.target.name}: {f.artifact}: {self.host}/{repo}:{tag} was published meanwhile by another "
                f"publisher with manifest "
                f"{held} (image sha256 {winner}); this one is manifest {digest} (image sha256 {f.sha256}); the tag "
                f"is left as the other publisher wrote it: publish a new version (or build number) instead")

    def _put_tag(self, repo: str, tag: str, body: bytes, f: PublishFile) -> None:
        put_manifest(self._repository(repo), tag, body, f"tag {f.artifact} as {repo}:{tag}")

    def _write_tag(self, repo: str, tag: str, body: bytes, digest: str, f: PublishFile) -> None:
        """One PUT of the verified manifest's bytes under a moving tag, then read it back."""
        self._put_tag(repo, tag, body, f)
        if not self._tag_has(repo, tag, digest):
            raise PublishError(f"{f.artifact}: {self.host}/{repo}:{tag} does not read back as {digest} after it "
                               f"was written; publish again")


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _member(tar: tarfile.TarFile, name: str) -> IO[bytes]:
    """A file of a `docker save` archive (a symlink to another layer's tar followed)."""
    data = tar.extractfile(name)
    if data is None:
        raise PublishError(f"docker save wrote {name} as no regular file; save the image again")
    return data
