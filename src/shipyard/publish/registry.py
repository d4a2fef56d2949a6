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
names the same id alone. Staging tags stay (a registry can delete a manifest, not a tag). A
killed publish is finished by running it again: the same image gives the same blobs and the same
manifest bytes, blobs already there are not sent again, and an image the journal records as
verified under its staging tag is not pushed again. A run killed before the moving tags finds
every image unchanged, and `advance`, which reads the registry rather than the journal, moves them.

Promotion reads the image by digest from the source channel (manifest, config and layers, each
checked against its digest), loads it into the engine (`docker load`), checks its id, and
publishes it as above: the same layers and config, so the same manifest digest, without a rebuild.

Every request goes through registry_client.RegistryClient (HTTPS with the target's CA bundle,
basic or bearer-token auth as the registry asks, retry.py's retries). Why not the engine's own
push and pull: the engine trusts a registry's CA only through /etc/docker/certs.d on the host,
takes credentials per call but its own retry and auth logic, and would be a second client with
its own failure modes; the engine is used only to save and load images, which touches no network.
Repositories are never enumerated (`_catalog` is not served to most users): a channel is read
per repository the manifest names (tags/list, then the manifests).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import docker
import requests
from docker.models.images import Image
from packaging.version import InvalidVersion, Version

from shipyard.errors import PublishError
from shipyard.host.docker_base import ensure_docker_engine
from shipyard.image.tags import kind_of, moving_tag, published_tag, published_version, staging_tag
from shipyard.plumbing.atomic_files import write_atomic
from shipyard.plumbing.hashing import sha256_hex, sha256_of
from shipyard.plumbing.retry import BROKEN_READS, describe, gist, retry
from shipyard.publish.layer_blobs import known_blobs, remember_blobs
from shipyard.publish.plan import PublishFile
from shipyard.publish.registry_client import RegistryClient
from shipyard.publish.target import Backend, Listed, TargetContext
from shipyard.release.destinations import registry_base

MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json"
_MANIFESTS = ", ".join((MANIFEST_V2, "application/vnd.oci.image.manifest.v1+json"))
_CONFIG = "application/vnd.docker.container.image.v1+json"
_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"


def channel_reference(target_url: str, name: str, channel: str) -> str:
    """What a user pulls: `127.0.0.1:5000` and `ember:1.7.0-cpu-runtime` on `nightly` →
    `127.0.0.1:5000/ember:1.7.0-cpu-runtime-nightly` (under the url's namespace, when it has one)."""
    _, host, namespace = registry_base(target_url)
    tag = published_tag(name, channel)
    return f"{host}/{namespace}/{tag}" if namespace else f"{host}/{tag}"


class _Incomplete(Exception):
    """A blob upload that did not end with the blob in the registry: started again from scratch."""


class RegistryBackend(Backend):
    def __init__(self, ctx: TargetContext) -> None:
        super().__init__(ctx)
        self.api = RegistryClient(ctx.target, ctx.root, ctx.credentials, ctx.policy, ctx.scrub)
        self.host = f"{self.api.host}/{self.api.namespace}" if self.api.namespace else self.api.host
        self._client: docker.DockerClient | None = None

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

    def _tags(self, repo: str) -> list[str]:
        response = self.api.request("GET", f"list the tags of {repo}", f"{self._repo(repo)}/tags/list")
        if response.status_code == 404:
            return []
        if response.status_code != 200:
            raise self.api.fail(f"list the tags of {repo}", response)
        return sorted(response.json().get("tags") or [])

    def _manifest(self, repo: str, reference: str) -> tuple[bytes, str, str]:
        """(the manifest's bytes, its media type, its digest as computed from those bytes)."""
        what = f"read {repo}:{reference}" if ":" not in reference else f"read {repo}@{reference}"
        response = self.api.request("GET", what, f"{self._repo(repo)}/manifests/{reference}",
                                    headers={"Accept": _MANIFESTS})
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
        """Every `<repo>:<tag>-<channel>` of the repositories `projects` with the image id its
        manifest names. A registry is read per repository: most do not list their repositories."""
        if projects is None:
            raise TypeError("a registry is listed per repository: pass projects")
        out = []
        suffix = f"-{channel}"
        for repo in projects:
            for tag in self._tags(repo):
                if not tag.endswith(suffix):
                    continue
                body, _, digest = self._manifest(repo, tag)
                config = self._config_digest(body, f"{self.host}/{repo}:{tag}")
                name = tag.removesuffix(suffix)
                out.append(Listed("image", f"{repo}:{name}", config.removeprefix("sha256:"), repo,
                                  name.split("-", 1)[0], f"{self.host}/{repo}@{digest}"))
        return out

    def fetch(self, listed: Listed, dest: Path) -> Path:
        """Read the listed image by manifest digest and load it into the engine; `dest/<repo>_<tag>.id`
        holds the id it has there."""
        digest = listed.url.rsplit("@", 1)[1]
        repo = listed.project
        where = f"{self.host}/{repo}@{digest}"
        body, _, served = self._manifest(repo, digest)
        if served != digest:
            raise PublishError(f"pull {where}: the registry serves a manifest with digest {served}; try again")
        manifest = json.loads(body)
        dest.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="pull-", dir=dest) as scratch:
            folder = Path(scratch)
            config = self._blob(repo, self._config_digest(body, where), folder / "config.json")
            layers = []
            for number, layer in enumerate(manifest.get("layers") or []):
                blob = self._blob(repo, layer["digest"], folder / f"{number}.blob")
                layers.append(self._unpacked(blob, str(layer.get("mediaType", "")), where))
            archive = folder / "image.tar"
            with tarfile.open(archive, "w") as tar:  # `docker save`'s own layout, which `docker load` reads
                tar.add(config, arcname="config.json")
                for number, layer_tar in enumerate(layers):
                    tar.add(layer_tar, arcname=f"{number}/layer.tar")
                entry = json.dumps([{"Config": "config.json", "RepoTags": None,
                                     "Layers": [f"{n}/layer.tar" for n in range(len(layers))]}]).encode()
                (folder / "manifest.json").write_bytes(entry)
                tar.add(folder / "manifest.json", arcname="manifest.json")
            try:
                with archive.open("rb") as data:
                    self.client.images.load(data)
            except docker.errors.APIError as exc:
                raise PublishError(self.api.scrub(f"load {where} into the docker engine: "
                                                  f"{exc.explanation or exc}")) from None
        image_id = self._config_digest(body, where)  # the engine names a loaded image by its config's digest
        marker = dest / f"{listed.filename.replace(':', '_').replace('/', '_')}.id"
        write_atomic(marker, image_id + "\n")
        return marker

    def _blob(self, repo: str, digest: str, path: Path) -> Path:
        """The blob `digest` of `repo` in `path`, checked against its digest. The body is streamed,
        so a connection that breaks while it is read fails after the request's own retries: such a
        read, and bytes that hash to another digest, are read again from the start, retry.py's way."""
        what = f"read {self.host}/{repo}@{digest}"

        def once() -> Path:
            response = self.api.request("GET", what, f"{self._repo(repo)}/blobs/{digest}", stream=True)
            if response.status_code != 200:
                raise self.api.fail(what, response)
            with response, path.open("wb") as out:
                for chunk in response.iter_content(1 << 20):
                    out.write(chunk)
            got = "sha256:" + sha256_of(path)
            if got != digest:
                raise _Incomplete(f"the bytes served hash to {got}")
            return path

        return retry(once, self.ctx.policy, label=what, errors=(_Incomplete, *BROKEN_READS),
                     failure=lambda exc: gist(exc, self.api.scrub),
                     gave_up=lambda last: f"{what}: gave up after {self.ctx.policy.tries} tries; last: {last}")

    @staticmethod
    def _unpacked(blob: Path, media_type: str, where: str) -> Path:
        """A layer as the uncompressed tar `docker load` takes."""
        with blob.open("rb") as head:
            magic = head.read(2)
        if magic != b"\x1f\x8b":
            if "zstd" in media_type:
                raise PublishError(f"{where}: a zstd layer ({media_type}); shipyard reads gzip and plain tar layers")
            return blob
        out = blob.with_suffix(".tar")
        with gzip.open(blob, "rb") as source, out.open("wb") as sink:
            shutil.copyfileobj(source, sink, 1 << 20)
        return out

    def fetched_sha256(self, path: Path) -> str:
        """The id of the image `fetch` loaded, as the engine holds it now."""
        image_id = path.read_text().strip()
        try:
            return str(self.client.images.get(image_id).id).removeprefix("sha256:")
        except docker.errors.ImageNotFound:
            return f"no image {image_id} in the engine"

    def release(self, channel: str, files: Sequence[PublishFile]) -> None:
        """Every image staged and verified first, then the channel tags, one PUT each: the
        release's images appear together, and none before all of them are verified."""
        staged = [(f, *self._stage(channel, f)) for f in files]
        for f, digest, body in staged:
            repo, name = f.filename.split(":", 1)
            self._write_tag(repo, published_tag(name, channel), body, digest, f)
            self.ctx.journal.record("switched", target=self.target.name, channel=channel, image=f.filename,
                                    ref=f"{self.host}/{repo}:{published_tag(name, channel)}", digest=digest,
                                    sha256=f.sha256)
        self.ctx.progress(f"{self.target.name}: {self.host}/<repo>:<tag>-{channel}: {len(files)} images visible")

    def advance(self, channel: str, files: Sequence[PublishFile]) -> list[str]:
        """Each image's moving tag `<repo>:<channel>-<kind>` to the manifest its published tag names
        (every published tag of the release is there): one PUT of those bytes, read back; nothing
        when it names that manifest already, and left, said, when it names a newer version."""
        said = []
        newer: dict[tuple[str, str], list[tuple[Version, str]]] = {}  # (repo, kind) → published tags, newest first
        for f in sorted(files, key=lambda f: _version(f.version) or Version("0")):  # the newest moves last
            repo, name = f.filename.split(":", 1)
            kind = kind_of(f.filename, f.version)
            if kind is None:  # not `<version>-<kind>`: no kind of image for a moving tag to follow
                said.append(f"{self.host}/{f.filename}: no moving tag (its tag does not start with its version "
                            f"{f.version})")
                continue
            moving = moving_tag(repo, channel, kind).split(":", 1)[1]
            ref = f"{self.host}/{repo}:{moving}"
            digest = self._digest(repo, published_tag(name, channel))
            if digest is None:
                raise PublishError(f"{f.artifact}: {self.host}/{repo}:{published_tag(name, channel)} is not served "
                                   f"after it was published; publish again")
            current = self._digest(repo, moving)
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
        """The engine answers and holds every image by the id the manifest records."""
        for f in files:
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
        what = f"push {f.artifact} as {self.host}/{repo}:{tag}"
        response = self.api.request("PUT", what, f"{self._repo(repo)}/manifests/{tag}", body=body,
                                    headers={"Content-Type": MANIFEST_V2})
        if response.status_code not in (200, 201):
            raise self.api.fail(what, response)
        return digest

    def _held(self, f: PublishFile, image: Image, repo: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        """The manifest's config and layers, when the registry holds the config and the blob this
        machine recorded for each layer of the image; else None (the full push)."""
        blobs = known_blobs(image.attrs["RootFS"]["Layers"])
        if blobs is None:
            return None
        sizes = []
        for digest in (f"sha256:{f.sha256}", *blobs):
            head = self._blob_head(repo, digest, f"push {f.artifact}")
            length = head.headers.get("Content-Length", "") if head is not None else ""
            if not length.isdigit():
                return None  # not held (or held without a length to put in the manifest)
            sizes.append(int(length))
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
                               f"sha256:{sha256_of(config)}; an engine whose image ids are not config digests "
                               f"(the containerd image store) is not supported")
        return config, layers

    def _upload_blob(self, f: PublishFile, repo: str, digest: str, path: Path) -> None:
        """The blob in the registry: left alone when it is there, else uploaded in one PUT. An upload
        whose answer is lost or refused midway is checked (HEAD) and started again as a whole."""
        what = f"push {f.artifact}: blob {digest[:19]}"
        api = self._repo(repo)

        def there() -> bool:
            return self._blob_head(repo, digest, what) is not None

        def once() -> None:
            if there():
                return
            start = self.api.request("POST", what, f"{api}/blobs/uploads/")
            if start.status_code != 202 or "Location" not in start.headers:
                if start.status_code in (401, 403):
                    raise self.api.fail(what, start)
                raise _Incomplete(describe(start))
            location = start.headers["Location"]
            put = self.api.request("PUT", what, f"{location}{'&' if '?' in location else '?'}digest={digest}",
                                   body=path, headers={"Content-Type": "application/octet-stream"})
            if put.status_code != 201 and not there():
                raise _Incomplete(describe(put))

        retry(once, self.ctx.policy, label=what, errors=(_Incomplete,), failure=str,
              gave_up=lambda last: f"{what} to {self.host}: gave up after {self.ctx.policy.tries} tries; last "
                                   f"response: {last}")

    def _blob_head(self, repo: str, digest: str, what: str) -> requests.Response | None:
        """The registry's answer to a HEAD of blob `digest` in `repo`; None when it does not hold it."""
        head = self.api.request("HEAD", what, f"{self._repo(repo)}/blobs/{digest}")
        if head.status_code in (401, 403):
            raise self.api.fail(what, head)
        return head if head.status_code == 200 else None

    def _tag_has(self, repo: str, tag: str, digest: str) -> bool:
        response = self.api.request("HEAD", f"read {repo}:{tag}", f"{self._repo(repo)}/manifests/{tag}",
                                    headers={"Accept": _MANIFESTS})
        return response.status_code == 200 and response.headers.get("Docker-Content-Digest") == digest

    def _digest(self, repo: str, tag: str) -> str | None:
        """The manifest digest the registry serves under `repo:tag`; None when there is no such tag."""
        what = f"read {self.host}/{repo}:{tag}"
        response = self.api.request("HEAD", what, f"{self._repo(repo)}/manifests/{tag}",
                                    headers={"Accept": _MANIFESTS})
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

    def _write_tag(self, repo: str, tag: str, body: bytes, digest: str, f: PublishFile) -> None:
        """One PUT of the verified manifest's bytes under a published or moving tag, then read it back."""
        kind = self._media_type(body)
        response = self.api.request("PUT", f"tag {repo}:{tag}", f"{self._repo(repo)}/manifests/{tag}", body=body,
                                    headers={"Content-Type": kind})
        if response.status_code not in (200, 201):
            raise self.api.fail(f"tag {f.artifact} as {repo}:{tag}", response)
        if not self._tag_has(repo, tag, digest):
            raise PublishError(f"{f.artifact}: {self.host}/{repo}:{tag} does not read back as {digest} after it "
                               f"was written; publish again")

    @staticmethod
    def _media_type(body: bytes) -> str:
        return str(json.loads(body).get("mediaType") or "application/vnd.oci.image.manifest.v1+json")


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
