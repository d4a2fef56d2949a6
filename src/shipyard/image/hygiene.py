"""What must never be in an image: build secrets and credentials (in any layer, the history or
the config), pip caches and apt lists. Every layer is read, not only the final file system,
since a file deleted by a later layer still ships in the one that added it."""

from __future__ import annotations

import re
import tarfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

import docker

# Paths a clean image holds no files under (a leftover directory entry is fine).
FORBIDDEN_PATHS = (
    (re.compile(r"(^|/)\.cache/pip/."), "a pip cache"),
    (re.compile(r"(^|/)var/lib/apt/lists/[^/]+$"), "an apt list"),
    (re.compile(r"(^|/)var/cache/apt/archives/[^/]+\.deb$"), "a downloaded .deb"),
)
_IGNORED_LIST_FILES = {"lock", "partial", "auxfiles"}
# Needles shorter than this would match by chance and are never secrets worth the name.
MIN_SECRET = 6


@dataclass(frozen=True)
class Finding:
    where: str  # "layer 3 <path>", "history step 5", "config Env"
    what: str  # "a pip cache", "secret #1"

    def __str__(self) -> str:
        return f"{self.what} in {self.where}"


def secret_needles(texts: Iterable[str]) -> list[bytes]:
    """The byte strings to look for: each secret whole, and each `key = value` value in it."""
    needles: list[bytes] = []
    for text in texts:
        candidates = [text.strip()]
        for line in text.splitlines():
            if "=" in line:
                candidates.append(line.split("=", 1)[1].strip())
        for candidate in candidates:
            raw = candidate.encode()
            if len(raw) >= MIN_SECRET and raw not in needles:
                needles.append(raw)
    return needles


def scan_image(ref: str, secrets: Iterable[str] = (), client: docker.DockerClient | None = None) -> list[Finding]:
    """Every finding in `ref`'s config, history and layers. A finding names the secret only by
    its position (#1, #2 …), never by its value."""
    client = client or docker.from_env(timeout=600)
    needles = secret_needles(secrets)
    image = client.images.get(ref)
    findings: list[Finding] = []
    config = image.attrs.get("Config") or {}
    for field in ("Env", "Cmd", "Entrypoint", "Labels"):
        findings += _in_text(f"config {field}", repr(config.get(field)), needles)
    for step, entry in enumerate(image.history()):
        findings += _in_text(f"history step {step}", str(entry.get("CreatedBy", "")), needles)
    findings += _in_layers(image.save(named=False), needles)
    return findings


def _in_text(where: str, text: str, needles: list[bytes]) -> list[Finding]:
    raw = text.encode()
    return [Finding(where, f"secret #{i + 1}") for i, needle in enumerate(needles) if needle in raw]


class _Stream:
    """A read-only file over the chunks `docker save` yields."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks, self.buffer = chunks, b""

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self.buffer) < size:
            try:
                self.buffer += next(self.chunks)
            except StopIteration:
                break
        if size < 0:
            size = len(self.buffer)
        out, self.buffer = self.buffer[:size], self.buffer[size:]
        return out


def _in_layers(chunks: Iterator[bytes], needles: list[bytes]) -> list[Finding]:
    findings: list[Finding] = []
    stream: Any = _Stream(iter(chunks))
    with tarfile.open(fileobj=stream, mode="r|") as saved:
        for member in saved:
            if not member.name.endswith("layer.tar"):
                continue
            layer = saved.extractfile(member)
            if layer is not None:
                findings += _in_layer(member.name.split("/")[0][:12], layer, needles)
    return findings


def _in_layer(layer_id: str, layer: IO[bytes], needles: list[bytes]) -> list[Finding]:
    findings: list[Finding] = []
    with tarfile.open(fileobj=layer, mode="r|") as files:
        for entry in files:
            name = entry.name
            base = name.rsplit("/", 1)[-1]
            # `.wh.<name>` marks a deletion by this layer: it holds nothing.
            if entry.isfile() and base not in _IGNORED_LIST_FILES and not base.startswith(".wh."):
                for pattern, what in FORBIDDEN_PATHS:
                    if pattern.search(name):
                        findings.append(Finding(f"layer {layer_id} {name}", what))
            if needles and entry.isfile():
                handle = files.extractfile(entry)
                data = handle.read() if handle is not None else b""
                findings += [Finding(f"layer {layer_id} {name}", f"secret #{i + 1}")
                             for i, needle in enumerate(needles) if needle in data]
            if needles:
                findings += [Finding(f"layer {layer_id} file name {i + 1}", f"secret #{i + 1}")
                             for i, needle in enumerate(needles) if needle in name.encode()]
    return findings
