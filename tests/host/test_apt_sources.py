"""One reader of the machine's apt sources serves the base image and the CUDA toolkit downloads."""

from __future__ import annotations

from pathlib import Path

from shipyard.host.apt_sources import AptSource, apt_sources, debian_mirror
from shipyard.host.docker_base import apt_mirror


def test_the_base_image_and_the_toolkits_read_the_same_mirror(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    # A Latin-1 comment (a hand-edited file) must not stop either reader.
    (tmp_path / "sources.list.d" / "debian.sources").write_bytes(
        b"# Miroir fran\xe7ais\n"
        b"Types: deb\nURIs: http://disabled.example.org/debian\nSuites: bookworm\nComponents: main\nEnabled: no\n\n"
        b"Types: deb-src\nURIs: http://source.example.org/debian\nSuites: bookworm\nComponents: main\n\n"
        b"Types: deb\nURIs: http://mirror.example.org/debian/\nSuites: bookworm\n bookworm-updates\n"
        b"Components: main non-free\n")
    (tmp_path / "sources.list").write_text(
        "deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
        "http://old.example.org/debian bullseye main  # the older builder\n")
    assert apt_sources(tmp_path) == [
        AptSource(("http://mirror.example.org/debian/",), ("bookworm", "bookworm-updates"), ("main", "non-free")),
        AptSource(("http://old.example.org/debian",), ("bullseye",), ("main",))]
    assert apt_mirror("bookworm", tmp_path) == debian_mirror(tmp_path) == "http://mirror.example.org/debian"
    assert apt_mirror("bullseye", tmp_path) == "http://old.example.org/debian"
