"""Reading a PyPI-compatible simple index: the PEP 691 JSON form where the server offers it, the
PEP 503 HTML form where it does not (pypiserver, many proxies). One project page at a time, and the
project list; every link made absolute, its sha256 taken from the JSON `hashes` or the `#sha256=`
fragment."""

from __future__ import annotations

import json
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import urldefrag, urljoin

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
# JSON first; the HTML forms (PEP 691's own, then plain text/html) where JSON is not served.
ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"


@dataclass(frozen=True)
class IndexedFile:
    """A file a project page links to: its name, an absolute URL (no fragment), and the sha256 the
    page states (None when it states none)."""

    filename: str
    url: str
    sha256: str | None


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []  # (href, text)
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href") or ""
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.links.append((self._href, "".join(self._text).strip()))
            self._href = None


def _anchors(body: str) -> list[tuple[str, str]]:
    parser = _Anchors()
    parser.feed(body)
    parser.close()
    return parser.links


def is_json(content_type: str) -> bool:
    return content_type.split(";")[0].strip().lower() == JSON_TYPE


def project_files(body: str, content_type: str, page_url: str) -> list[IndexedFile]:
    """The files of one project page (`page_url` is where it was read, for relative links).
    ValueError when the page is neither form."""
    if is_json(content_type):
        data = json.loads(body)
        return [IndexedFile(f["filename"], urljoin(page_url, urldefrag(f["url"])[0]),
                            (f.get("hashes") or {}).get("sha256")) for f in data["files"]]
    out = []
    for href, text in _anchors(body):
        url, fragment = urldefrag(urljoin(page_url, href))
        name, _, value = fragment.partition("=")
        # PEP 503: the link text is the file's name; the URL's last part is, too, when text is missing.
        filename = text or url.rstrip("/").rsplit("/", 1)[-1]
        out.append(IndexedFile(filename, url, value.lower() if name == "sha256" and value else None))
    return out


def project_names(body: str, content_type: str) -> list[str]:
    """The project names of the index's root page."""
    if is_json(content_type):
        return [p["name"] for p in json.loads(body)["projects"]]
    return [text for _, text in _anchors(body) if text]
