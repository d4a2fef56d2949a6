"""moto's S3 server on 127.0.0.1, a stand-in for an S3-compatible store (it speaks the S3 API with
conditional writes and checksums, and checks no credentials): what the `s3` target kind's tests
publish to, no real store being reachable from the machine the suite runs on."""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

BUCKET = "ember-downloads"
# release.yaml's static tree target, which a test points at the bucket instead (point_release_yaml).
STATIC_TARGET = "    kind: static\n    url: http://127.0.0.1:8083/whl/\n    path: dist/site/whl\n"
KEY_ENVS = ("SHIPYARD_S3_KEY_ID", "SHIPYARD_S3_SECRET")


@dataclass(frozen=True)
class S3StandIn:
    endpoint: str
    client: Any  # a boto3 S3 client of it

    def target(self, prefix: str, *, layout: str = "wheels") -> str:
        """An s3 target's lines for the bucket under `prefix` (`one/whl/`), in `layout`."""
        return (f"    kind: s3\n    url: https://download.example.org/whl/\n    bucket: {BUCKET}\n"
                f"    prefix: {prefix}\n    layout: {layout}\n    endpoint_url: {self.endpoint}\n"
                f"    region: us-east-1\n"
                f"    username_env: {KEY_ENVS[0]}\n    password_env: {KEY_ENVS[1]}\n")

    @staticmethod
    def credentials() -> dict[str, str]:
        """The environment the target's credentials come from (moto checks none; a secret anyway)."""
        return {KEY_ENVS[0]: "test", KEY_ENVS[1]: secrets.token_urlsafe(18)}

    def object_bytes(self, key: str) -> bytes:
        return bytes(self.client.get_object(Bucket=BUCKET, Key=key)["Body"].read())


@contextmanager
def s3_standin() -> Iterator[S3StandIn]:
    """The server with the bucket, stopped at the end."""
    import boto3
    from moto.server import ThreadedMotoServer

    # Its web server logs every request at INFO: thousands of lines in a benchmark or the fault suite.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test",
                              aws_secret_access_key="test")
        client.create_bucket(Bucket=BUCKET)
        # Anyone reads it over HTTP, as a bucket behind a download site is read (a policy, not ACLs).
        client.put_bucket_policy(Bucket=BUCKET, Policy=json.dumps({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{BUCKET}/*"}]}))
        yield S3StandIn(endpoint, client)
    finally:
        server.stop()
