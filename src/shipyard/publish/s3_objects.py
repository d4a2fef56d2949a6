"""The objects of an `s3` target's bucket (or any S3-compatible store), through boto3: what both of
its layouts (a wheel tree, publish/s3_tree.py; a conda channel, publish/s3_conda.py) do with them.

- **Immutable objects.** A package is written only where no object is (`If-None-Match: *`, the
  store's own conditional write). When one is there, its SHA-256 decides: the same bytes (a resumed
  run) are left as they are; other bytes are named (`put_once`), and the caller stops the release
  with exit 8 before any index changes.
- **Read back.** Every package is read back by the SHA-256 the store computed from the bytes it
  received (`ChecksumSHA256`, asked for on each write), against the manifest's.
- **Indexes last, merged.** An index (a project page, a repodata.json) is written from what it
  lists now plus the new entries, and only if it is still the index that was read (`If-Match` its
  ETag; `If-None-Match: *` for a new one). One that another publisher changed in between is read
  and merged again (`merge_json`), so two publishers never drop each other's entries.
- **Credentials.** The access key from the variables `username_env` and `password_env` name, or
  boto3's own chain (the job's OIDC role through `aws-actions/configure-aws-credentials`,
  AWS_ACCESS_KEY_ID); ca_file and proxy as for every kind (publish/connection.py).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from shipyard.errors import PublishError
from shipyard.plumbing.retry import RetryPolicy, gist, request_proxies, retry, retry_after
from shipyard.publish.connection import target_trust
from shipyard.publish.plan import PublishFile
from shipyard.publish.target import TargetContext, name_taken
from shipyard.redaction import keep_hidden

MERGE_ATTEMPTS = 8  # tries of one index's conditional write against other publishers
# What a conditional write answers when its condition no longer holds (AWS: 412, or 409 when two
# conditional writes of one key overlap).
CONFLICTS = ("PreconditionFailed", "ConditionalRequestConflict")
JsonIndex = dict[str, Any]


def error_code(exc: Exception) -> str:
    """The store's error code of a botocore ClientError ("" for anything else)."""
    response = getattr(exc, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


def sha256_of_checksum(checksum: str) -> str:
    """S3's ChecksumSHA256 (base64 of the digest) as hex."""
    return base64.b64decode(checksum).hex()


def rate_limit_pause(policy: RetryPolicy) -> Callable[..., float | None]:
    """A botocore `needs-retry` handler for a bare HTTP 429: botocore's retry modes retry 5xx and
    the store's own throttling codes (SlowDown), not a 429 without them, which a proxy, a CDN or an
    S3-compatible store in front of one answers. It is tried again within the policy's tries, after
    the wait its Retry-After asks (else the policy's pause); a wait longer than the policy's
    deadline is not waited for: the call fails on the 429 at once."""
    pauses = policy.pauses()

    def pause(response: Any = None, attempts: int = 1, **_: Any) -> float | None:
        answer = response[0] if response else None
        if answer is None or answer.status_code != 429 or attempts >= policy.tries:
            return None
        asked = retry_after(answer)
        wait = pauses[min(attempts, len(pauses)) - 1] if asked is None else asked
        return None if wait > policy.deadline else wait

    return pause


STS_AUDIENCE = "sts.amazonaws.com"  # what AWS (and MinIO's STS) expects a GitHub ID token to be for


def _assumed_role(ctx: TargetContext, config: Any, verify: str | bool) -> dict[str, str]:
    """The temporary credentials of the target's role (role_arn, or its role_arn_env's value), for
    GitHub's ID token (AssumeRoleWithWebIdentity at the store's STS: endpoint_url's, else the
    region's), hidden from every later line."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    from shipyard.publish.trusted_publishing import github_id_token

    target = ctx.target
    role = str(target.role_arn or ctx.credentials.role_arn)
    token = github_id_token(target, ctx.policy, STS_AUDIENCE)
    sts = boto3.client("sts", endpoint_url=target.endpoint_url, region_name=target.region or "us-east-1",
                       config=config, verify=verify, aws_access_key_id="", aws_secret_access_key="")
    try:
        answer = sts.assume_role_with_web_identity(RoleArn=role, RoleSessionName="shipyard-publish",
                                                   WebIdentityToken=token, DurationSeconds=3600)
    except (ClientError, BotoCoreError) as exc:
        raise PublishError(ctx.scrub(f"{target.name}: assume role {role} with the job's OIDC token: "
                                     f"{error_code(exc) or exc}; the role's trust policy must allow this repository's "
                                     f"token (audience {STS_AUDIENCE})")) from None
    found = answer["Credentials"]
    keep_hidden(found["SecretAccessKey"], found["SessionToken"])
    return {"aws_access_key_id": found["AccessKeyId"], "aws_secret_access_key": found["SecretAccessKey"],
            "aws_session_token": found["SessionToken"]}


class S3Objects:
    """The target's bucket under its prefix; every failure one line naming the target, the step,
    the bucket and the store's error code."""

    def __init__(self, ctx: TargetContext) -> None:
        import boto3
        from botocore.config import Config

        target = ctx.target
        proxies = request_proxies(target.endpoint_url or "https://s3.amazonaws.com/", target.proxy)
        config = Config(connect_timeout=ctx.policy.timeout, read_timeout=ctx.policy.timeout,
                        retries={"total_max_attempts": ctx.policy.tries, "mode": "standard"}, proxies=proxies or None,
                        request_checksum_calculation="when_required")
        verify = target_trust(target, ctx.root)
        keys: dict[str, str | None] = {}
        if target.assumes_role:
            keys = dict(_assumed_role(ctx, config, verify))
        elif target.username_env:
            keys = {"aws_access_key_id": ctx.credentials.username, "aws_secret_access_key": ctx.credentials.password}
        self.client = boto3.client("s3", endpoint_url=target.endpoint_url, region_name=target.region, config=config,
                                   verify=verify, **keys)
        self.client.meta.events.register_first("needs-retry.s3", rate_limit_pause(ctx.policy))
        self.ctx = ctx
        self.bucket = str(target.bucket)
        self.prefix = target.prefix

    def key(self, channel: str, *parts: str) -> str:
        return self.prefix + "/".join((channel, *parts))

    def where(self, key: str = "") -> str:
        return f"s3://{self.bucket}/{key}"

    def failed(self, what: str, exc: Exception) -> PublishError:
        """The one line of a failed call; one that botocore tried again (5xx, 429, a broken
        connection: its standard retry mode, within the policy's tries) says it gave up."""
        from botocore.exceptions import ConnectionError as BrokenConnection
        from botocore.exceptions import HTTPClientError

        response = getattr(exc, "response", None)
        tries = 1
        if isinstance(response, dict):
            tries += int(response.get("ResponseMetadata", {}).get("RetryAttempts", 0))
        elif isinstance(exc, BrokenConnection | HTTPClientError):
            tries = self.ctx.policy.tries
        last = error_code(exc) or str(exc)
        said = f"gave up after {tries} tries; last response: {last}" if tries > 1 else last
        return PublishError(self.ctx.scrub(f"{self.ctx.target.name}: {what}: s3://{self.bucket}: {said}"))

    def call(self, what: str, call: Callable[[], Any]) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return call()
        except (ClientError, BotoCoreError) as exc:
            raise self.failed(what, exc) from None

    def keys_under(self, base: str) -> Iterator[str]:
        """Every key that starts with `base`, all pages of the listing."""
        paginator = self.client.get_paginator("list_objects_v2")
        for page in self.call(f"list {base}", lambda: list(paginator.paginate(Bucket=self.bucket, Prefix=base))):
            for item in page.get("Contents", []):
                yield str(item["Key"])

    def download(self, key: str, dest: Path) -> Path:
        dest.parent.mkdir(parents=True, exist_ok=True)
        from botocore.exceptions import BotoCoreError, ClientError
        from s3transfer.exceptions import RetriesExceededError  # boto3's downloads: retried there, then this

        try:
            self.client.download_file(self.bucket, key, str(dest))
        except (ClientError, BotoCoreError, RetriesExceededError) as exc:
            raise self.failed(f"download {dest.name}", exc) from None
        return dest

    # --- packages ------------------------------------------------------------------------------

    def put_once(self, key: str, f: PublishFile) -> str | None:
        """Write `f` under `key` where no object is; None when it is there now with its bytes, else
        the line naming the bytes already published under its name."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            with f.path.open("rb") as body:
                self.client.put_object(Bucket=self.bucket, Key=key, Body=body, IfNoneMatch="*",
                                       ChecksumAlgorithm="SHA256", ContentType="application/octet-stream")
            return None
        except BotoCoreError as exc:  # a connection that kept breaking: botocore tried again
            raise self.failed(f"upload {f.filename}", exc) from None
        except ClientError as exc:
            if error_code(exc) not in CONFLICTS:
                raise self.failed(f"upload {f.filename}", exc) from None
        served = self.served_sha256(key, f.filename)
        return None if served == f.sha256 else name_taken(self.ctx.target.name, self.where(key), f.filename, served,
                                                           f.sha256)

    def served_sha256(self, key: str, filename: str) -> str:
        """The SHA-256 of the object under `key`: the store's checksum, else its bytes read."""
        head = self.call(f"read back {filename}", lambda: self.client.head_object(
            Bucket=self.bucket, Key=key, ChecksumMode="ENABLED"))
        if head.get("ChecksumSHA256"):
            return sha256_of_checksum(str(head["ChecksumSHA256"]))
        got = self.get_bytes(f"read back {filename}", key)
        if got is None:
            raise PublishError(f"{self.ctx.target.name}: {filename}: {self.where(key)} is gone right after its "
                               f"HEAD; publish again")
        return hashlib.sha256(got[0]).hexdigest()

    def read_back(self, key: str, f: PublishFile) -> None:
        served = self.served_sha256(key, f.filename)
        if served != f.sha256:
            raise PublishError(f"{self.ctx.target.name}: {f.filename}: {self.where(key)} reads back as sha256 "
                               f"{served}, expected {f.sha256}; no index lists it: publish again")

    # --- indexes -------------------------------------------------------------------------------

    def get_bytes(self, what: str, key: str) -> tuple[bytes, str] | None:
        """The object under `key` and its ETag; None when there is none. botocore tries a GET again
        itself, but not a body whose connection breaks while it is read (after the call returned):
        the GET and its read are tried again together, within the policy's tries."""
        from botocore.exceptions import BotoCoreError, ClientError

        def attempt() -> tuple[bytes, str] | None:
            try:
                got = self.client.get_object(Bucket=self.bucket, Key=key)
            except ClientError as exc:
                if error_code(exc) in ("NoSuchKey", "404"):
                    return None
                raise self.failed(what, exc) from None
            except BotoCoreError as exc:  # the GET itself: botocore tried it again already
                raise self.failed(what, exc) from None
            return bytes(got["Body"].read()), str(got["ETag"])  # a cut body raises a BotoCoreError

        name = self.ctx.target.name
        return retry(attempt, self.ctx.policy, label=f"{name}: {what}", errors=(BotoCoreError,),
                     failure=lambda exc: gist(exc, self.ctx.scrub),
                     gave_up=lambda last: self.ctx.scrub(f"{name}: {what}: s3://{self.bucket}: gave up after "
                                                         f"{self.ctx.policy.tries} tries; last response: {last}"))

    def read_json(self, key: str) -> tuple[JsonIndex | None, str | None]:
        """The JSON object under `key` and its ETag; (None, None) when there is none."""
        got = self.get_bytes(f"read {key}", key)
        if got is None:
            return None, None
        return json.loads(got[0]), got[1]

    def put(self, key: str, body: bytes, content_type: str, *, etag: str | None = None,
            conditional: bool = False) -> bool:
        """Write `body` under `key`; with `conditional`, only if it is still the object of `etag` (or
        none is there, for no etag): False when another writer changed it in between."""
        from botocore.exceptions import BotoCoreError, ClientError

        condition = ({"IfMatch": etag} if etag else {"IfNoneMatch": "*"}) if conditional else {}
        try:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=body, ContentType=content_type, **condition)
        except BotoCoreError as exc:  # a connection that kept breaking: botocore tried again
            raise self.failed(f"write {key}", exc) from None
        except ClientError as exc:
            if conditional and error_code(exc) in CONFLICTS:
                return False
            raise self.failed(f"write {key}", exc) from None
        return True

    def merge_json(self, key: str, made_from: Callable[[JsonIndex | None], Mapping[str, tuple[bytes, str]]]) -> None:
        """Write the index `key` and the files beside it that `made_from` makes of the index there
        now (file key -> body and content type; `key`'s own entry first, written only over the index
        read), again from a fresh read while another writer changes it in between."""
        for _ in range(MERGE_ATTEMPTS):
            data, etag = self.read_json(key)
            files = dict(made_from(data))
            body, content_type = files.pop(key)
            if self.put(key, body, content_type, etag=etag, conditional=True):
                # The files made from the same index follow it (a reader of either sees the same entries).
                for other, (other_body, other_type) in files.items():
                    self.put(other, other_body, other_type)
                return
        raise PublishError(f"{self.ctx.target.name}: {self.where(key)}: changed by another writer {MERGE_ATTEMPTS} "
                           f"times while this run merged into it; publish again (what is uploaded stays)")
