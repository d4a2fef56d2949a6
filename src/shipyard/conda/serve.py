"""A static conda channel server for tests: loopback only, a token in the path, nothing else.

conda's token convention puts the credential in the URL path: `http://host/t/<token>/<channel>/`.
`serve_channel({"ember": dist/conda, "bootstrap": …}, token=…)` serves each folder under its
name, so the channels are `<base>ember/` and `<base>bootstrap/`. The server answers GET and HEAD
for files only (with single byte-range requests, which py-rattler's sparse reads of
`info/about.json` use); no directory listings; a request without the token gets 403; a path with
`.`/`..` segments, a backslash or NUL gets 400; nothing outside the folders is reachable (the
resolved path must stay inside the resolved folder, so `dist/conda`'s symlink swap is followed
per request). The request line and headers are bounded; slow clients time out.
"""

from __future__ import annotations

import hmac
import logging
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from shipyard.errors import ServeError
from shipyard.redaction import keep_hidden, redact

log = logging.getLogger("shipyard.conda.serve")

MAX_REQUEST_LINE = 8 * 1024
MAX_HEADER_BYTES = 16 * 1024
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{16,}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
_CHUNK = 1 << 16


@contextmanager
def serve_channel(folders: Mapping[str, Path], *, token: str, port: int = 0) -> Iterator[str]:
    """Serve `folders` (name -> folder) on 127.0.0.1 for the `with` block; yield the base URL
    `http://127.0.0.1:<port>/t/<token>/`. Port 0 lets the kernel pick a free one."""
    if not _TOKEN.match(token):
        raise ServeError("serve_channel: the token must be at least 16 characters of A-Z, a-z, 0-9, '_' or '-' "
                         "(make one with secrets.token_urlsafe(24))")
    for name, folder in folders.items():
        if not _NAME.match(name):
            raise ServeError(f"serve_channel: {name!r} cannot be a channel name in a URL; use letters, digits, "
                             f"'.', '_' or '-'")
        if not folder.is_dir():
            raise ServeError(f"serve_channel: {folder} (channel {name!r}) is not a folder; build or publish the "
                             f"channel first")
    keep_hidden(token)  # from every line shown from now on, wherever a request or a message quotes it
    handler = type("ChannelHandler", (_Handler,), {"folders": dict(folders), "token": token})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="conda-channel-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/t/{token}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


class _Handler(BaseHTTPRequestHandler):
    folders: dict[str, Path]
    raw_requestline: bytes  # set by the base class before parse_request
    token: str
    timeout = 30  # seconds a client may stay silent
    disable_nagle_algorithm = True  # headers and body go out as two writes: no 40 ms delayed-ACK stall
    server_version = "shipyard-channel"
    sys_version = ""
    protocol_version = "HTTP/1.1"

    def parse_request(self) -> bool:
        if len(self.raw_requestline) > MAX_REQUEST_LINE:
            self.requestline, self.request_version, self.command = "", "HTTP/1.1", ""
            self.close_connection = True
            self.send_error(414)
            return False
        if not super().parse_request():
            return False
        if sum(len(k) + len(v) + 4 for k, v in self.headers.items()) > MAX_HEADER_BYTES:
            self.close_connection = True
            self.send_error(431)
            return False
        return True

    def do_GET(self) -> None:
        self._serve(body=True)

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        log.debug("%s %s", self.address_string(), redact(format % args))

    def _serve(self, *, body: bool) -> None:
        target = self._resolve()
        if target is None:
            return
        size = target.stat().st_size
        start, end = 0, size - 1
        status = 200
        # A single `bytes=first-last` range gets 206; several ranges or another unit get the
        # whole file (RFC 9110 lets a server ignore Range).
        wanted = _RANGE.match((self.headers.get("Range") or "").strip())
        if wanted and any(wanted.groups()):
            parsed = _byte_range(wanted.group(1), wanted.group(2), size)
            if parsed is None:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            start, end = parsed
            status = 206
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if target.name.endswith(".json")
                         else "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(max(0, end - start + 1)))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        if not body:
            return
        with target.open("rb") as fh:
            fh.seek(start)
            left = end - start + 1
            while left > 0:
                chunk = fh.read(min(_CHUNK, left))
                if not chunk:
                    break
                self.wfile.write(chunk)
                left -= len(chunk)

    def _resolve(self) -> Path | None:
        """The file a request names, or None after answering the refusal."""
        raw = urlsplit(self.path).path
        prefix = "/t/"
        given = raw[len(prefix):].split("/", 1)[0] if raw.startswith(prefix) else ""
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            self._refuse(403, "a channel token is required: /t/<token>/…")
            return None
        rest = unquote(raw[len(prefix) + len(given) + 1:])
        segments = rest.split("/")
        if segments[-1] == "":  # a folder: no listings
            self._refuse(404, "not found")
            return None
        if any(s in ("", ".", "..") or "\\" in s or "\0" in s for s in segments):
            self._refuse(400, "bad path")
            return None
        folder = self.folders.get(segments[0])
        if folder is None or len(segments) < 2:
            self._refuse(404, "not found")
            return None
        root = folder.resolve()
        target = root.joinpath(*segments[1:]).resolve()
        if not target.is_relative_to(root) or not target.is_file():
            self._refuse(404, "not found")
            return None
        return target

    def _refuse(self, code: int, text: str) -> None:
        payload = (text + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)


def _byte_range(first: str, last: str, size: int) -> tuple[int, int] | None:
    """(first, last) byte of a `bytes=first-last` range clipped to the file; None if unsatisfiable."""
    if not first:  # the last N bytes
        count = int(last)
        return (max(0, size - count), size - 1) if count and size else None
    start = int(first)
    if start >= size or (last and int(last) < start):
        return None
    return start, min(size - 1, int(last)) if last else size - 1
