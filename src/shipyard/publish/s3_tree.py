"""The static tree's layout in an S3 bucket (or any S3-compatible store), through boto3:
`<prefix><channel>/<tag>/<project>/` holding the wheels beside the PEP 503 and PEP 691 pages, and
`<prefix><channel>/<tag>/index.{html,json}` listing the projects, as PyTorch's download site is.

- **Immutable objects.** A wheel is written only where no object is (`If-None-Match: *`, the
  store's own conditional write). When one is there, its SHA-256 decides: the same bytes (a resumed
  run) are left as they are; other bytes stop the release with exit 8, naming both, and nothing of
  this run becomes visible.
- **Read back.** Every wheel is read back by the SHA-256 the store computed from the bytes it
  received (`ChecksumSHA256`, asked for on each write), against the manifest's.
- **Pages last.** Only then are the project pages, then each tag's root page, written: each page
  from the entries it lists now plus the new ones, and written only if it is still the page that
  was read (`If-Match` its ETag; `If-None-Match: *` for a new one). A page another publisher
  changed in between is read again and merged, so two publishers of different projects never drop
  each other's files. A reader sees a page before or after, never a file it lists that is absent.
- **Credentials.** The access key from the variables `username_env` and `password_env` name, or
  boto3's own chain (the job's OIDC role through `aws-actions/configure-aws-credentials`,
  AWS_ACCESS_KEY_ID); ca_file and proxy as for every kind (publish/connection.py).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from shipyard.errors import PublishError, public_url
from shipyard.plumbing.retry import request_proxies
from shipyard.publish.connection import target_trust
from shipyard.publish.plan import PublishFile
from shipyard.publish.target import Backend, Listed, TargetContext, name_taken, names_taken
from shipyard.wheel.index import index_entry, project_pages, root_pages, version_in_wheel_name

PAGE_ATTEMPTS = 8  # tries of one page's conditional write against other publishers
# What a conditional write answers when its condition no longer holds (AWS: 412, or 409 when two
# conditional writes of one key overlap).
CONFLICTS = ("PreconditionFailed", "ConditionalRequestConflict")


def _code(exc: Exception) -> str:
    """The store's error code of a botocore ClientError ("" for anything else)."""
    response = getattr(exc, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


def sha256_of_checksum(checksum: str) -> str:
    """S3's ChecksumSHA256 (base64 of the digest) as hex."""
    return base64.b64decode(checksum).hex()


class S3TreeBackend(Backend):
    def __init__(self, ctx: TargetContext) -> None:
        super().__init__(ctx)
        import boto3
        from botocore.config import Config

        target = ctx.target
        proxies = request_proxies(target.endpoint_url or "https://s3.amazonaws.com/", target.proxy)
        config = Config(connect_timeout=ctx.policy.timeout, read_timeout=ctx.policy.timeout,
                        retries={"max_attempts": ctx.policy.tries, "mode": "standard"}, proxies=proxies or None,
                        request_checksum_calculation="when_required")
        keys = ({"aws_access_key_id": ctx.credentials.username, "aws_secret_access_key": ctx.credentials.password}
                if target.username_env else {})
        self.client = boto3.client("s3", endpoint_url=target.endpoint_url, region_name=target.region, config=config,
                                   verify=target_trust(target, ctx.root), **keys)
        self.bucket = str(target.bucket)
        self.prefix = target.prefix

    def describe(self, channel: str) -> str:
        return f"{public_url(self.target.url).rstrip('/')}/{channel}/<tag>/ (s3://{self.bucket}/{self.prefix}{channel}/)"

    # --- keys and pages ------------------------------------------------------------------------

    def _key(self, channel: str, *parts: str) -> str:
        return self.prefix + "/".join((channel, *parts))

    def _call(self, what: str, call: Callable[[], Any]) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return call()
        except (ClientError, BotoCoreError) as exc:
            raise self._failed(what, exc) from None

    def _failed(self, what: str, exc: Exception) -> PublishError:
        """One line for a failed call: the target, the step, the bucket and the store's error code."""
        return PublishError(self.ctx.scrub(f"{self.target.name}: {what}: s3://{self.bucket}: {_code(exc) or exc}"))

    def _read_page(self, key: str) -> tuple[dict[str, Any] | None, str | None]:
        """The JSON page under `key` and its ETag; (None, None) when there is none."""
        from botocore.exceptions import ClientError

        try:
            got = self.client.get_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if _code(exc) in ("NoSuchKey", "404"):
                return None, None
            raise self._failed(f"read {key}", exc) from None
        return json.loads(got["Body"].read()), str(got["ETag"])

    def _write_pages(self, folder: str, etag: str | None, pages: dict[str, str]) -> bool:
        """Write `pages` (file name -> text) under `folder`, the JSON one only if it is still the page
        read (its `etag`, or none); False when another publisher changed it in between."""
        from botocore.exceptions import ClientError

        condition = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
        try:
            self.client.put_object(Bucket=self.bucket, Key=f"{folder}/index.json", Body=pages["index.json"].encode(),
                                   ContentType="application/vnd.pypi.simple.v1+json", **condition)
        except ClientError as exc:
            if _code(exc) in CONFLICTS:
                return False
            raise self._failed(f"write {folder}/index.json", exc) from None
        # The HTML page follows the JSON one it is made from (a reader of either sees the same files).
        self._call(f"write {folder}/index.html", lambda: self.client.put_object(
            Bucket=self.bucket, Key=f"{folder}/index.html", Body=pages["index.html"].encode(),
            ContentType="text/html"))
        return True

    # --- what the channel shows ----------------------------------------------------------------

    def listing(self, channel: str, *, indexes: Sequence[str] | None = None,
                projects: Sequence[str] | None = None) -> list[Listed]:
        pages: list[tuple[str, str]] = []
        if indexes is not None and projects is not None:
            pages = [(index, project) for index in indexes for project in projects]
        else:
            paginator = self.client.get_paginator("list_objects_v2")
            base = self._key(channel, "")
            for page in self._call("list", lambda: list(paginator.paginate(Bucket=self.bucket, Prefix=base))):
                for item in page.get("Contents", []):
                    parts = item["Key"][len(base):].split("/")
                    if len(parts) == 3 and parts[2] == "index.json" and (indexes is None or parts[0] in indexes) \
                            and (projects is None or parts[1] in projects):
                        pages.append((parts[0], parts[1]))
        out = []
        for index, project in pages:
            data, _ = self._read_page(self._key(channel, index, project, "index.json"))
            for entry in (data or {}).get("files", []):
                if entry["filename"].endswith(".whl"):
                    out.append(Listed(index, entry["filename"], entry["hashes"]["sha256"], project,
                                      version_in_wheel_name(entry["filename"]),
                                      self._key(channel, index, project, entry["filename"])))
        return out

    def fetch(self, listed: Listed, dest: Path) -> Path:
        dest.mkdir(parents=True, exist_ok=True)
        path = dest / listed.filename
        self._call(f"download {listed.filename}", lambda: self.client.download_file(self.bucket, listed.url, str(path)))
        return path

    # --- a release -----------------------------------------------------------------------------

    def release(self, channel: str, files: Sequence[PublishFile]) -> None:
        taken = [line for f in files if (line := self._put_once(channel, f))]
        if taken:
            raise names_taken(taken, outcome="no page of this run was written")
        for f in files:
            self._read_back(channel, f)
        self.ctx.journal.record("uploaded", target=self.target.name, channel=channel,
                                files={f"{f.index}/{f.filename}": f.sha256 for f in files})
        by_page: dict[tuple[str, str], list[PublishFile]] = {}
        for f in files:
            by_page.setdefault((f.index, f.project), []).append(f)
        for (index, project), new in sorted(by_page.items()):
            self._merge_page(self._key(channel, index, project), partial(_project_pages, project,
                                                                         [_entry(f) for f in new]))
        for index in sorted({f.index for f in files}):
            self._merge_page(self._key(channel, index), partial(_root_pages, {f.project for f in files
                                                                              if f.index == index}))
        self.ctx.journal.record("switched", target=self.target.name, channel=channel,
                                files={f"{f.index}/{f.filename}": f.sha256 for f in files})
        self.ctx.progress(f"{self.target.name}: {self.describe(channel)}: {len(files)} files visible")

    def _put_once(self, channel: str, f: PublishFile) -> str | None:
        """Write `f` where no object is; None when it is there now with its bytes, else the line
        naming the bytes already published under its name."""
        from botocore.exceptions import ClientError

        key = self._key(channel, f.index, f.project, f.filename)
        try:
            with f.path.open("rb") as body:
                self.client.put_object(Bucket=self.bucket, Key=key, Body=body, IfNoneMatch="*",
                                       ChecksumAlgorithm="SHA256", ContentType="application/octet-stream")
            return None
        except ClientError as exc:
            if _code(exc) not in CONFLICTS:
                raise self._failed(f"upload {f.filename}", exc) from None
        served = self._served_sha256(key, f.filename)
        return None if served == f.sha256 else name_taken(self.target.name, f"s3://{self.bucket}/{key}", f.filename,
                                                           served, f.sha256)

    def _served_sha256(self, key: str, filename: str) -> str:
        """The SHA-256 of the object under `key`: the store's checksum, else its bytes read."""
        head = self._call(f"read back {filename}", lambda: self.client.head_object(
            Bucket=self.bucket, Key=key, ChecksumMode="ENABLED"))
        if head.get("ChecksumSHA256"):
            return sha256_of_checksum(str(head["ChecksumSHA256"]))
        got = self._call(f"read back {filename}", lambda: self.client.get_object(Bucket=self.bucket, Key=key))
        return hashlib.sha256(got["Body"].read()).hexdigest()

    def _read_back(self, channel: str, f: PublishFile) -> None:
        key = self._key(channel, f.index, f.project, f.filename)
        served = self._served_sha256(key, f.filename)
        if served != f.sha256:
            raise PublishError(f"{self.target.name}: {f.filename}: s3://{self.bucket}/{key} reads back as sha256 "
                               f"{served}, expected {f.sha256}; no page lists it: publish again")

    def _merge_page(self, folder: str, pages_from: Callable[[dict[str, Any] | None], dict[str, str]]) -> None:
        """Write the pages of `folder` made by `pages_from` the page there now, again from a fresh read
        while another publisher changes it in between."""
        for _ in range(PAGE_ATTEMPTS):
            data, etag = self._read_page(f"{folder}/index.json")
            if self._write_pages(folder, etag, pages_from(data)):
                return
        raise PublishError(f"{self.target.name}: {folder}/index.json: s3://{self.bucket}: changed by another writer "
                           f"{PAGE_ATTEMPTS} times while this run merged into it; publish again (what is uploaded "
                           f"stays)")


def _entry(f: PublishFile) -> dict[str, Any]:
    entry = index_entry(f.path)
    if entry["hashes"]["sha256"] != f.sha256:
        raise PublishError(f"{f.path}: sha256 {entry['hashes']['sha256']} is not {f.sha256}, the one the release "
                           f"records; the file changed after it was checked: build it again")
    return entry


def _project_pages(project: str, new: list[dict[str, Any]], page: dict[str, Any] | None) -> dict[str, str]:
    """A project's pages: the entries of its page now (`page`) with `new` in, one per file name (a
    resumed run's files are there already, with the same bytes)."""
    names = {e["filename"] for e in new}
    return project_pages(project, [e for e in (page or {}).get("files", []) if e["filename"] not in names] + new)


def _root_pages(mine: set[str], page: dict[str, Any] | None) -> dict[str, str]:
    """A tag's root pages: the projects of its page now (`page`) and `mine`."""
    return root_pages(sorted({p["name"] for p in (page or {}).get("projects", [])} | mine))
