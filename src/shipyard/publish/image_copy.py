"""An image copied from one registry repository to another by its manifest digest, as the
distribution spec lets a client do it: no docker engine, nothing recompressed, the manifest's bytes
PUT unchanged, so the image has the same digest in both places (a promotion's promise).

Each blob the manifest names (its config, then its layers) is left alone when the destination
holds it (HEAD); else, on the same registry, mounted from the source repository (`POST
/v2/<dest>/blobs/uploads/?mount=<digest>&from=<source>`, 201: done without a byte sent); a
registry that refuses the mount (202: it opened an upload instead, as one does for a repository
the user cannot read) gets the bytes in that upload; on another registry the blob is read from the
source (checked against its digest) and uploaded. The manifest goes last, so the destination
never names a blob it lacks.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from shipyard.errors import PublishError
from shipyard.plumbing.hashing import sha256_hex, sha256_of
from shipyard.plumbing.retry import BROKEN_READS, RetryPolicy, describe, gist, retry
from shipyard.publish.registry_client import RegistryClient

MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json"
MANIFESTS = ", ".join((MANIFEST_V2, "application/vnd.oci.image.manifest.v1+json"))


class Incomplete(Exception):
    """A blob read or upload that did not end with the right bytes: started again from scratch."""


@dataclass(frozen=True)
class Repository:
    """One repository of one registry: the client that speaks to the registry and the
    repository's name in its API (under the target's namespace)."""

    api: RegistryClient
    name: str

    @property
    def where(self) -> str:
        return f"{self.api.host}/{self.name}"


def read_manifest(repo: Repository, digest: str) -> bytes:
    """The manifest `repo` serves by `digest`, whose bytes must hash to it."""
    what = f"read {repo.where}@{digest}"
    response = repo.api.request("GET", what, f"{repo.name}/manifests/{digest}", headers={"Accept": MANIFESTS})
    if response.status_code != 200:
        raise repo.api.fail(what, response)
    served = "sha256:" + sha256_hex(response.content)
    if served != digest:
        raise PublishError(f"{what}: the registry serves a manifest with digest {served}; try again")
    return response.content


def copy_image(source: Repository, digest: str, dest: Repository, tag: str, policy: RetryPolicy) -> bytes:
    """`dest:tag` names the manifest `source` serves by `digest`, every blob of it in `dest`
    first; the manifest's bytes (the same digest)."""
    body = read_manifest(source, digest)
    data = json.loads(body)
    kind = manifest_media_type(body)
    if not isinstance(data.get("config"), dict) or not isinstance(data.get("layers"), list):
        raise PublishError(f"{source.where}@{digest}: not a single-platform image manifest (media type {kind}); "
                           f"shipyard copies single-platform images")
    for blob in (data["config"], *data["layers"]):
        _blob_into(source, dest, str(blob["digest"]), policy)
    put_manifest(dest, tag, body, f"tag {dest.where}:{tag}")
    return body


def manifest_media_type(body: bytes) -> str:
    """The media type a manifest states (OCI's when it states none): its Content-Type on a PUT."""
    return str(json.loads(body).get("mediaType") or "application/vnd.oci.image.manifest.v1+json")


def put_manifest(repo: Repository, tag: str, body: bytes, what: str) -> None:
    """PUT the manifest `body` under `repo:tag` as its own media type; a refusal fails naming `what`."""
    response = repo.api.request("PUT", what, f"{repo.name}/manifests/{tag}", body=body,
                                headers={"Content-Type": manifest_media_type(body)})
    if response.status_code not in (200, 201):
        raise repo.api.fail(what, response)


def holds_blob(repo: Repository, digest: str, what: str) -> int | None:
    """The size of blob `digest` in `repo` (HEAD); None when it does not hold it."""
    head = repo.api.request("HEAD", what, f"{repo.name}/blobs/{digest}")
    if head.status_code in (401, 403):
        raise repo.api.fail(what, head)
    if head.status_code != 200:
        return None
    length = head.headers.get("Content-Length", "")
    return int(length) if length.isdigit() else 0


def _blob_into(source: Repository, dest: Repository, digest: str, policy: RetryPolicy) -> None:
    what = f"copy blob {digest[:19]} from {source.where} to {dest.where}"
    if holds_blob(dest, digest, what) is not None:
        return
    location = None
    if source.api.base == dest.api.base and source.name != dest.name:
        mount = dest.api.request("POST", what, f"{dest.name}/blobs/uploads/?mount={digest}&from={source.name}")
        if mount.status_code == 201:
            return
        if mount.status_code == 202:  # refused to mount, and opened an upload for the bytes instead
            location = mount.headers.get("Location")
    with tempfile.TemporaryDirectory(prefix="shipyard-blob-") as scratch:
        path = pull_blob(source, digest, Path(scratch) / "blob", policy)
        push_blob(dest, digest, path, policy, what, location=location)


def pull_blob(repo: Repository, digest: str, path: Path, policy: RetryPolicy) -> Path:
    """The blob `digest` of `repo` in `path`, checked against its digest. The body is streamed, so
    a connection that breaks while it is read fails after the request's own retries: such a read,
    and bytes that hash to another digest, are read again from the start, retry.py's way."""
    what = f"read {repo.where}@{digest}"

    def once() -> Path:
        response = repo.api.request("GET", what, f"{repo.name}/blobs/{digest}", stream=True)
        if response.status_code != 200:
            raise repo.api.fail(what, response)
        with response, path.open("wb") as out:
            for chunk in response.iter_content(1 << 20):
                out.write(chunk)
        got = "sha256:" + sha256_of(path)
        if got != digest:
            raise Incomplete(f"the bytes served hash to {got}")
        return path

    return retry(once, policy, label=what, errors=(Incomplete, *BROKEN_READS),
                 failure=lambda exc: gist(exc, repo.api.scrub),
                 gave_up=lambda last: f"{what}: gave up after {policy.tries} tries; last: {last}")


def push_blob(repo: Repository, digest: str, path: Path, policy: RetryPolicy, what: str, *,
              location: str | None = None) -> None:
    """The blob in `repo`: left alone when it is there, else uploaded in one PUT (into the upload
    `location` when one is open already). An upload whose answer is lost or refused midway is
    checked (HEAD) and started again as a whole."""
    opened = [location] if location else []

    def there() -> bool:
        return holds_blob(repo, digest, what) is not None

    def once() -> None:
        if there():
            return
        upload = opened.pop() if opened else None
        if upload is None:
            start = repo.api.request("POST", what, f"{repo.name}/blobs/uploads/")
            if start.status_code != 202 or "Location" not in start.headers:
                if start.status_code in (401, 403):
                    raise repo.api.fail(what, start)
                raise Incomplete(describe(start))
            upload = start.headers["Location"]
        put = repo.api.request("PUT", what, f"{upload}{'&' if '?' in upload else '?'}digest={digest}",
                               body=path, headers={"Content-Type": "application/octet-stream"})
        if put.status_code != 201 and not there():
            raise Incomplete(describe(put))

    retry(once, policy, label=what, errors=(Incomplete,), failure=str,
          gave_up=lambda last: f"{what} to {repo.api.host}: gave up after {policy.tries} tries; last "
                               f"response: {last}")
