"""Images in a docker registry, one tag per channel, written last: `<url>/<repo>:<tag>-<channel>`
(ember's CPU runtime image on nightly: `127.0.0.1:5000/ember:1.7.0-cpu-runtime-nightly`).

An image's manifest record (package type `docker`) names it by its version tag
(`ember:1.7.0-cpu-runtime`) and gives its image id as sha256; the image id is the digest of the
image's config, which the registry manifest names too, so "the bytes the manifest records" is
checkable on the registry without pulling a layer. A publish, per image:

1. pushes the local image (found by its id, not by a tag that may have moved) under a staging
   tag, `<tag>-<channel>-stage-<id[:12]>`, with image.registry.push_image (the docker SDK, the
   credentials in its auth header only);
2. reads the pushed manifest back by its digest, checks the digest of the bytes served, that its
   config is the recorded image id, and the config blob's own sha256;
3. when every image of the release is staged and verified, writes each channel tag with one PUT
   of exactly those manifest bytes, then reads the tag back.

A tag names a complete, verified image or nothing, and a channel tag is never moved: run.py
refuses an image whose channel tag already names another id (naming both), and leaves one that
names the same id alone. Staging tags stay (a registry can delete a manifest, not a tag). A
killed publish is finished by running it again: pushes are idempotent, and an image the journal
records as verified under its staging tag is not pushed again.

Promotion pulls the image by digest from the source channel, checks its id, and publishes it as
above: the same layers and config, so the same manifest digest, without a rebuild.

The registry's HTTP API (tags, manifests, blobs) is read with requests through retry.py, with
the target's credentials as basic auth (Debian's docker-registry with htpasswd); pushes and
pulls go through the docker engine, which retries layer transfers itself; a push that fails
anyway (a 5xx on its ping or manifest PUT, a reset, a registry restarting) is tried again whole,
as many times as the retry policy allows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import docker
import requests
from docker.models.images import Image

from shipyard.errors import PublishError, ToolError
from shipyard.host.docker_base import ensure_docker_engine
from shipyard.image.registry import RegistryError, push_image
from shipyard.plumbing.atomic_files import write_atomic
from shipyard.plumbing.hashing import sha256_hex
from shipyard.publish.plan import PublishFile
from shipyard.publish.retry import bounded_session, describe, retry, with_retries
from shipyard.publish.target import Backend, Listed, TargetContext

_MANIFESTS = ", ".join(("application/vnd.docker.distribution.manifest.v2+json",
                        "application/vnd.oci.image.manifest.v1+json"))


def channel_tag(name: str, channel: str) -> str:
    """`ember:1.7.0-cpu-runtime` on `test` → `ember:1.7.0-cpu-runtime-test`."""
    return f"{name}-{channel}"


def staging_tag(name: str, channel: str, image_id: str) -> str:
    """The tag an image is pushed and verified under before its channel tag exists: the same
    name on every re-run of the same image, another one for another image."""
    return f"{channel_tag(name, channel)}-stage-{image_id[:12]}"


class RegistryBackend(Backend):
    def __init__(self, ctx: TargetContext) -> None:
        super().__init__(ctx)
        self.host = ctx.target.url.split("://", 1)[-1].rstrip("/")
        self.api = f"http://{self.host}/v2"  # the registries shipyard targets listen on 127.0.0.1
        self.session = bounded_session(ctx.policy)
        if ctx.credentials.username or ctx.credentials.password:
            self.session.auth = ctx.credentials.basic_auth()
        self._client: docker.DockerClient | None = None

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            ensure_docker_engine(required=True)  # else: the fix, not the SDK's traceback
            self._client = docker.from_env(timeout=max(600, int(self.ctx.policy.timeout)))
        return self._client

    def describe(self, channel: str) -> str:
        return f"{self.host}/<repo>:<tag>-{channel}"

    # --- the registry's API ------------------------------------------------------------------

    def _request(self, method: str, what: str, url: str, **kwargs: Any) -> requests.Response:
        return with_retries(what, self.target.url, lambda: self.session.request(method, url, **kwargs),
                            self.ctx.policy, scrub=self.ctx.scrub)

    def _fail(self, what: str, response: requests.Response) -> PublishError:
        hint = (f"; check {self.target.username_env} and {self.target.password_env} (release.yaml: "
                f"publish.{self.target.name})" if response.status_code in (401, 403) else "")
        return PublishError(self.ctx.scrub(f"{what}: {self.target.url}: {describe(response)}{hint}"))

    def _repositories(self) -> list[str]:
        response = self._request("GET", "list repositories", f"{self.api}/_catalog")
        if response.status_code != 200:
            raise self._fail("list repositories", response)
        return sorted(response.json().get("repositories") or [])

    def _tags(self, repo: str) -> list[str]:
        response = self._request("GET", f"list the tags of {repo}", f"{self.api}/{repo}/tags/list")
        if response.status_code == 404:
            return []
        if response.status_code != 200:
            raise self._fail(f"list the tags of {repo}", response)
        return sorted(response.json().get("tags") or [])

    def _manifest(self, repo: str, reference: str) -> tuple[bytes, str, str]:
        """(the manifest's bytes, its media type, its digest as computed from those bytes)."""
        what = f"read {repo}:{reference}" if ":" not in reference else f"read {repo}@{reference}"
        response = self._request("GET", what, f"{self.api}/{repo}/manifests/{reference}",
                                 headers={"Accept": _MANIFESTS})
        if response.status_code != 200:
            raise self._fail(what, response)
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
        """Every `<repo>:<tag>-<channel>` with the image id its manifest names."""
        out = []
        suffix = f"-{channel}"
        for repo in (projects if projects is not None else self._repositories()):
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
        """Pull the listed image by manifest digest; `dest/<repo>_<tag>.id` holds the id it has."""
        repository, digest = listed.url.split("@", 1)
        try:
            image = self.client.images.pull(repository, tag=digest, auth_config=self._auth())
        except docker.errors.APIError as exc:
            raise PublishError(self.ctx.scrub(f"pull {listed.url}: {exc.explanation or exc}")) from None
        marker = dest / f"{listed.filename.replace(':', '_').replace('/', '_')}.id"
        write_atomic(marker, str(image.id) + "\n")
        return marker

    def fetched_sha256(self, path: Path) -> str:
        """The id of the pulled image `fetch` recorded, as the engine holds it now."""
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
            self._write_channel_tag(repo, channel_tag(name, channel), body, digest, f)
            self.ctx.journal.record("switched", target=self.target.name, channel=channel, image=f.filename,
                                    ref=f"{self.host}/{repo}:{channel_tag(name, channel)}", digest=digest,
                                    sha256=f.sha256)
        self.ctx.progress(f"{self.target.name}: {self.describe(channel)}: {len(files)} images visible")

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

    def _auth(self) -> dict[str, str] | None:
        creds = self.ctx.credentials
        return {"username": creds.username or "", "password": creds.password or ""} if creds.password else None

    def _push(self, f: PublishFile, repo: str, tag: str) -> str:
        """Push the local image with id `f.sha256` as `<repo>:<tag>`; the manifest digest. The engine
        retries a layer upload itself, not its ping or the manifest PUT: a failed push is tried
        again as a whole (it is idempotent), `policy.tries` times. A refusal of the credentials is
        tried again too: the listing before it was let in with them, and an engine whose ping
        failed pushes without them."""
        image = self._local_image(f)
        local = f"{repo}:{tag}"
        image.tag(repo, tag)
        tries = self.ctx.policy.tries

        def gave_up(last: str) -> str:
            hint = (f"; check {self.target.username_env} and {self.target.password_env} (release.yaml: "
                    f"publish.{self.target.name})" if "unauthorized" in last.lower() else "")
            return f"{f.artifact}: push to {self.host}: gave up after {tries} tries; last response: {last}{hint}"

        try:
            return retry(lambda: push_image(local, self.target, client=self.client).digest, self.ctx.policy,
                         label=f"push {local}", errors=(RegistryError, ToolError),
                         failure=lambda exc: self.ctx.scrub(str(exc)), gave_up=gave_up)
        finally:
            try:  # the staging tag was only the push's handle
                self.client.images.remove(local, noprune=True)
            except docker.errors.APIError:
                pass

    def _tag_has(self, repo: str, tag: str, digest: str) -> bool:
        response = self._request("HEAD", f"read {repo}:{tag}", f"{self.api}/{repo}/manifests/{tag}",
                                 headers={"Accept": _MANIFESTS})
        return response.status_code == 200 and response.headers.get("Docker-Content-Digest") == digest

    def _verify(self, repo: str, digest: str, f: PublishFile) -> bytes:
        """The manifest the registry serves by `digest`: its bytes hash to it, its config is the
        image id the manifest records, and the config blob hashes to that id."""
        where = f"{self.host}/{repo}@{digest}"
        body, _, served = self._manifest(repo, digest)
        config = self._config_digest(body, where)
        blob = self._request("GET", f"read the config of {where}", f"{self.api}/{repo}/blobs/{config}")
        blob_digest = ("sha256:" + sha256_hex(blob.content) if blob.status_code == 200
                       else describe(blob))
        if served != digest or config != f"sha256:{f.sha256}" or blob_digest != config:
            raise PublishError(f"{f.artifact}: {where} reads back as manifest {served} with config {config} "
                               f"(blob: {blob_digest}); the manifest records image id sha256:{f.sha256}; nothing "
                               f"became visible under a channel tag: check the registry, then publish again")
        return body

    def _write_channel_tag(self, repo: str, tag: str, body: bytes, digest: str, f: PublishFile) -> None:
        """One PUT of the verified manifest's bytes under the channel tag, then read it back."""
        kind = self._media_type(body)
        url = f"{self.api}/{repo}/manifests/{tag}"
        response = self._request("PUT", f"tag {repo}:{tag}", url, data=body, headers={"Content-Type": kind})
        if response.status_code not in (200, 201):
            raise self._fail(f"tag {f.artifact} as {repo}:{tag}", response)
        if not self._tag_has(repo, tag, digest):
            raise PublishError(f"{f.artifact}: {self.host}/{repo}:{tag} does not read back as {digest} after it "
                               f"was written; publish again")

    @staticmethod
    def _media_type(body: bytes) -> str:
        return str(json.loads(body).get("mediaType") or "application/vnd.oci.image.manifest.v1+json")
