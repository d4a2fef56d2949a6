"""Registry tests without a docker engine: tiny images written into a real registry by its HTTP
API (a config blob, one gzipped layer blob, a manifest), and a recording proxy in front of the
registry that pages `tags/list` as the distribution spec says (`n`, `last`, a `Link` to the next
page): Debian's docker-registry (distribution 2.8) answers every tag at once and ignores `n`,
where distribution 3, Docker Hub and other registries page."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlencode, urlsplit

import requests
from support.publish_servers import MANIFEST_V2, QuietHandler, Registry, loopback_server


@dataclass(frozen=True)
class PushedImage:
    digest: str  # the manifest's: what the registry's Docker-Content-Digest says
    image_id: str  # sha256:<hex> of the config: what `shipyard image build` records as the image's sha256
    layer: str  # the layer blob's digest


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _upload(base: str, auth: tuple[str, str], repo: str, data: bytes) -> str:
    digest = _digest(data)
    start = requests.post(f"{base}/v2/{repo}/blobs/uploads/", auth=auth, timeout=30)
    assert start.status_code == 202, start.text
    location = start.headers["Location"]
    location = location if location.startswith("http") else base + location
    put = requests.put(f"{location}{'&' if '?' in location else '?'}digest={digest}", data=data, auth=auth,
                       headers={"Content-Type": "application/octet-stream"}, timeout=30)
    assert put.status_code == 201, put.text
    return digest


def push_image(registry: Registry, repo: str, tag: str, payload: str) -> PushedImage:
    """A one-layer image holding `payload` as `registry/repo:tag`, written by the API."""
    base = f"http://{registry.address}"
    auth = (registry.user, registry.password)
    plain = io.BytesIO()
    with tarfile.open(fileobj=plain, mode="w") as tar:
        data = payload.encode()
        info = tarfile.TarInfo("etc/shipyard-test-image")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    packed = gzip.compress(plain.getvalue(), mtime=0)
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                         "rootfs": {"type": "layers", "diff_ids": [_digest(plain.getvalue())]}}).encode()
    layer = _upload(base, auth, repo, packed)
    image_id = _upload(base, auth, repo, config)
    manifest = json.dumps({"schemaVersion": 2, "mediaType": MANIFEST_V2,
                           "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                                      "size": len(config), "digest": image_id},
                           "layers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                                       "size": len(packed), "digest": layer}]}, indent=3).encode()
    put = requests.put(f"{base}/v2/{repo}/manifests/{tag}", data=manifest, auth=auth,
                       headers={"Content-Type": MANIFEST_V2}, timeout=30)
    assert put.status_code == 201, put.text
    return PushedImage(_digest(manifest), image_id, layer)


def tag_image(registry: Registry, repo: str, digest: str, tag: str) -> None:
    """`repo:tag` names the manifest `digest` (one more tag on an image the registry holds)."""
    base = f"http://{registry.address}/v2/{repo}/manifests"
    auth = (registry.user, registry.password)
    body = requests.get(f"{base}/{digest}", auth=auth, headers={"Accept": MANIFEST_V2}, timeout=30)
    put = requests.put(f"{base}/{tag}", data=body.content, auth=auth, headers={"Content-Type": MANIFEST_V2},
                       timeout=30)
    assert put.status_code == 201, put.text


@dataclass
class RecordingProxy:
    url: str = ""  # host:port, what release.yaml's docker target names
    seen: list[str] = field(default_factory=list)  # "METHOD /v2/…?query" of every request passed on

    def count(self, method: str, part: str) -> int:
        return sum(1 for line in self.seen if line.startswith(method + " ") and part in line)


@contextmanager
def recording_proxy(registry: Registry, *, default_page: int | None = None) -> Iterator[RecordingProxy]:
    """An HTTP proxy to `registry` that records every request; with `default_page`, a `tags/list`
    that asks for no page size gets that many tags a page (and a `Link` to the next), as a registry
    that pages by default answers."""
    proxy = RecordingProxy()
    upstream = f"http://{registry.address}"
    session = requests.Session()

    class Handler(QuietHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self) -> None:
            proxy.seen.append(f"{self.command} {self.path}")
            parts = urlsplit(self.path)
            query = parse_qs(parts.query)
            page = int(query.get("n", [default_page or 0])[0])
            path = parts.path if page and parts.path.endswith("/tags/list") else self.path
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("content-length", "connection")}
            answer = session.request(self.command, upstream + path, data=body, headers=headers,
                                     allow_redirects=False, timeout=30)
            data = answer.content
            extra = {}
            if page and path.endswith("/tags/list") and answer.status_code == 200:
                listed = json.loads(data)
                tags = sorted(listed.get("tags") or [])
                after = query.get("last", [""])[0]
                tags = [t for t in tags if t > after] if after else tags
                listed["tags"] = tags[:page]
                data = json.dumps(listed).encode()
                if len(tags) > page:
                    extra["Link"] = f'<{path}?{urlencode({"n": page, "last": tags[page - 1]})}>; rel="next"'
            self.send_response(answer.status_code)
            for name, value in extra.items():
                self.send_header(name, value)
            for name, value in answer.headers.items():
                if name.lower() not in ("content-length", "transfer-encoding", "connection", "content-encoding"):
                    self.send_header(name, value)
            length_out = answer.headers.get("Content-Length", "0") if self.command == "HEAD" else str(len(data))
            self.send_header("Content-Length", length_out)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = _forward  # noqa: N815 - http.server's names

    with loopback_server(Handler) as url:
        proxy.url = url.removeprefix("http://")
        yield proxy
