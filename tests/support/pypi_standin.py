"""A loopback stand-in for PyPI's upload API and its PEP 691 JSON simple index, held in memory: for
tests that need an index which starts in no time and decides per upload whether the uploader may
(an upload token that expired, as PyPI's do), or takes its time storing each file.

- POST / (what twine sends: multipart/form-data, `:action=file_upload`, the file as `content`,
  basic auth) stores the file; 403 when `accepts(user, password)` says no (PyPI's answer to an
  invalid or expired token), 400 "File already exists" for a name it holds. Each upload waits
  `upload_pause` seconds after the auth check, as a large file takes time to arrive and store.
- GET /simple/<project>/ answers the project's files in PEP 691 JSON with their sha256; 404 for a
  project it does not hold. GET /files/<filename> serves the bytes. With `stale_reads`, the first
  that many reads of a page after an upload to its project answer the page as it was before that
  upload, as a CDN in front of PyPI serves its cached copy for a while.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.parser import BytesParser
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name
from support.publish_servers import QuietHandler, loopback_server

if TYPE_CHECKING:
    from support.registry_auth import Tls

JSON_TYPE = "application/vnd.pypi.simple.v1+json"


@dataclass
class PypiStandIn:
    accepts: Callable[[str, str], bool]
    upload_pause: float = 0.0
    files: dict[str, bytes] = field(default_factory=dict)  # filename -> bytes
    projects: dict[str, list[str]] = field(default_factory=dict)  # canonical project -> filenames
    refused: list[str] = field(default_factory=list)  # filenames whose upload was refused (403)
    uploaded: list[str] = field(default_factory=list)  # filenames in the order they were stored
    url: str = ""
    stale_reads: int = 0
    stale: dict[str, tuple[int, list[str]]] = field(default_factory=dict)  # project -> (reads left, files shown)
    page_reads: int = 0

    @property
    def simple(self) -> str:
        return f"{self.url}simple/"

    def sha256s(self) -> dict[str, str]:
        return {name: hashlib.sha256(data).hexdigest() for name, data in self.files.items()}

    def upload(self, authorization: str, content_type: str, body: bytes) -> tuple[int, str]:
        form = BytesParser().parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + body)
        fields: dict[str, bytes] = {}
        filename = ""
        for part in form.get_payload():  # type: ignore[union-attr]
            name = part.get_param("name", header="content-disposition")
            fields[str(name)] = part.get_payload(decode=True) or b""
            if name == "content":
                filename = part.get_filename() or ""
        user, _, password = (base64.b64decode(authorization.removeprefix("Basic ")).decode()
                             .partition(":") if authorization.startswith("Basic ") else ("", "", ""))
        if not self.accepts(user, password):
            self.refused.append(filename)
            return 403, "Invalid or non-existent authentication information."
        time.sleep(self.upload_pause)
        if filename in self.files:
            return 400, "File already exists."
        project = canonicalize_name(fields["name"].decode())
        if self.stale_reads:
            self.stale[project] = (self.stale_reads, list(self.projects.get(project, [])))
        self.files[filename] = fields["content"]
        self.projects.setdefault(project, []).append(filename)
        self.uploaded.append(filename)
        return 200, "OK"

    def page(self, project: str) -> tuple[int, object]:
        self.page_reads += 1
        names = self.projects.get(canonicalize_name(project))
        left, shown = self.stale.get(canonicalize_name(project), (0, []))
        if left > 0:
            self.stale[canonicalize_name(project)] = (left - 1, shown)
            names = shown or None
        if names is None:
            return 404, {"message": "not found"}
        sha256s = self.sha256s()
        return 200, {"meta": {"api-version": "1.0"}, "name": project, "files": [
            {"filename": n, "url": f"{self.url}files/{n}", "hashes": {"sha256": sha256s[n]}} for n in names]}


@contextmanager
def pypi_standin(accepts: Callable[[str, str], bool], upload_pause: float = 0.0,
                 stale_reads: int = 0, tls: Tls | None = None) -> Iterator[PypiStandIn]:
    standin = PypiStandIn(accepts, upload_pause, stale_reads=stale_reads)

    class Handler(QuietHandler):
        def _send(self, status: int, data: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, text = standin.upload(self.headers.get("Authorization", ""),
                                          self.headers.get("Content-Type", ""), body)
            self._send(status, text.encode(), "text/plain")

        def do_GET(self) -> None:  # noqa: N802
            if self.path.startswith("/files/"):
                data = standin.files.get(self.path.removeprefix("/files/"))
                self._send(200 if data is not None else 404, data or b"", "application/octet-stream")
                return
            status, payload = standin.page(self.path.removeprefix("/simple/").strip("/"))
            self._send(status, json.dumps(payload).encode(), JSON_TYPE)

    with loopback_server(Handler, tls=tls) as url:
        standin.url = f"{url}/"
        yield standin
