"""This machine's apt sources, read one way for every caller: deb822 `*.sources` files first,
then one-line `sources.list` and `*.list` files, in file order."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class AptSource:
    """One enabled binary (`deb`) source: its URIs, suites and components."""

    uris: tuple[str, ...]
    suites: tuple[str, ...]
    components: tuple[str, ...]


def apt_sources(apt_dir: Path = Path("/etc/apt")) -> list[AptSource]:
    """Every enabled `deb` source under `apt_dir`; disabled stanzas and `deb-src` lines are left out."""
    found = []
    for path in sorted((apt_dir / "sources.list.d").glob("*.sources")):
        for stanza in _deb822_stanzas(path.read_text(errors="replace")):
            if stanza.get("enabled", "yes").lower() == "no" or "deb" not in stanza.get("types", "").split():
                continue
            found.append(AptSource(*(tuple(stanza.get(k, "").split()) for k in ("uris", "suites", "components"))))
    for path in [apt_dir / "sources.list", *sorted((apt_dir / "sources.list.d").glob("*.list"))]:
        if not path.is_file():
            continue
        for line in path.read_text(errors="replace").splitlines():
            # deb [options] URI suite component...
            words = re.sub(r"\[[^\]]*\]", " ", line.split("#", 1)[0]).split()
            if len(words) >= 3 and words[0] == "deb":
                found.append(AptSource((words[1],), (words[2],), tuple(words[3:])))
    return found


def _deb822_stanzas(text: str) -> Iterator[dict[str, str]]:
    stanza: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        if not line.strip():
            if stanza:
                yield stanza
            stanza, key = {}, None
        elif line[0] in " \t" and key:
            stanza[key] += " " + line.strip()
        elif ":" in line:
            key, value = line.split(":", 1)
            key = key.strip().lower()
            stanza[key] = value.strip()
    if stanza:
        yield stanza
