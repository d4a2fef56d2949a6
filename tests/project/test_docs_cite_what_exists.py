"""The docs cite what exists: every path and `shipyard.x.y` name docs/architecture.md cites, and
every relative link in README.md and docs/*.md (with its #anchor, as GitHub renders headings).

Pure file reads: a moved module or a moved README section fails here, naming the citation, instead
of leaving a newcomer at a dead end.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
PACKAGE = SRC / "shipyard"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
MARKDOWN = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))

# Paths the page names on purpose although they do not exist: what a run writes (never committed),
# and the files of the imagined sdist kind and of a design it rejects ("Where a new artifact kind
# plugs in", "The one protocol").
WRITTEN_BY_A_RUN = ("dist/", ".shipyard/")
IMAGINED = {"src/shipyard/sdist/", "cli/sdist.py", "wheel/kind.py"}
# A kind of file every Python project may have, not a file of this repository.
KINDS_OF_FILE = {"setup.cfg"}

FENCE = re.compile(r"^```.*?^```", re.S | re.M)
SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
DOTTED = re.compile(r"\bshipyard(?:\.\w+)+(?::\w+)?")
PATHLIKE = re.compile(r"^[\w.\-/]+$")
FILE_SUFFIXES = (".py", ".md", ".toml", ".yaml", ".yml", ".cfg", ".sh", ".json", ".txt")


def _blocks(text: str) -> list[str]:
    """The places a bare file name is read in: each table row on its own, else each paragraph
    (`runner.py` in the `testing/` row means src/shipyard/testing/runner.py)."""
    blocks: list[str] = []
    for paragraph in re.split(r"\n\s*\n", FENCE.sub("", text)):
        lines = paragraph.splitlines()
        blocks.extend(line for line in lines if line.lstrip().startswith("|"))
        prose = [line for line in lines if not line.lstrip().startswith("|")]
        if prose:
            blocks.append("\n".join(prose))
    return blocks


def _cited_path(span: str) -> str | None:
    """The path a backtick span cites, or None when it is no path (a command, a name, a placeholder)."""
    span = span.split("::", 1)[0]
    if not PATHLIKE.match(span) or "<" in span or span.startswith(("http", "-", ".venv")):
        return None
    if "/" in span or span.endswith(FILE_SUFFIXES):
        return span
    return None


def _folders_of(paths: list[str]) -> list[Path]:
    """The folders a block names (`ci/`, and `resources/pytest_plugin/`), under the root or the package."""
    folders = []
    for path in paths:
        folder = path if path.endswith("/") else path.rpartition("/")[0]
        if folder:
            folders += [ROOT / folder, PACKAGE / folder]
    return folders


def _exists(path: str, folders: list[Path]) -> bool:
    bases = [ROOT, PACKAGE] + ([] if "/" in path.rstrip("/") else folders)
    return any((base / path).exists() for base in bases)


def stale_paths(text: str) -> list[str]:
    stale = []
    for block in _blocks(text):
        cited = [path for span in SPAN.findall(block) if (path := _cited_path(span)) is not None]
        cited += [target.split("#", 1)[0] for target in LINK.findall(block)
                  if not re.match(r"^[a-z]+:", target) and not target.startswith("#")]
        folders = _folders_of(cited)
        for path in cited:
            if path.startswith(WRITTEN_BY_A_RUN) or path in IMAGINED or path in KINDS_OF_FILE:
                continue
            link_target = (ARCHITECTURE.parent / path).exists()
            if not link_target and not _exists(path, folders):
                stale.append(path)
    return stale


def _defines(module: Path, name: str) -> bool:
    source = module.read_text()
    return re.search(rf"^(?:def|class|async def) {name}\b|^{name}\s*[:=]", source, re.M) is not None


def _module_file(dotted: str) -> Path | None:
    relative = Path(*dotted.split("."))
    for candidate in (SRC / relative.with_suffix(".py"), SRC / relative / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def stale_names(text: str) -> list[str]:
    """Dotted names that are no module, nor a name one defines (`shipyard.plumbing.build_cache.cache_key`)."""
    stale = []
    for span in SPAN.findall(FENCE.sub("", text)):
        for name in DOTTED.findall(span):
            module_name, _, attribute = name.partition(":")
            if (module := _module_file(module_name)) is not None:
                if attribute and not _defines(module, attribute):
                    stale.append(name)
                continue
            parent, _, last = module_name.rpartition(".")
            parent_file = _module_file(parent)
            if attribute or parent_file is None or not _defines(parent_file, last):
                stale.append(name)
    return stale


def github_anchors(text: str) -> set[str]:
    """The ids GitHub gives a page's headings: lowercase, punctuation dropped, blanks to hyphens,
    a repeated one suffixed -1, -2, …"""
    anchors: set[str] = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", FENCE.sub("", text), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        anchor, n = slug, 0
        while anchor in anchors:
            n += 1
            anchor = f"{slug}-{n}"
        anchors.add(anchor)
    return anchors


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if re.match(r"^[a-z]+:", target):
            continue  # a URL: not ours to check offline
        file_part, _, anchor = target.partition("#")
        destination = (page.parent / file_part).resolve() if file_part else page
        if not destination.exists():
            broken.append(f"{target} (no file {file_part})")
        elif anchor and destination.suffix == ".md" and anchor not in github_anchors(destination.read_text()):
            broken.append(f"{target} (no heading #{anchor} in {destination.relative_to(ROOT)})")
    return broken


def test_architecture_cites_only_paths_that_exist() -> None:
    stale = stale_paths(ARCHITECTURE.read_text())
    assert not stale, "docs/architecture.md cites paths that do not exist: " + ", ".join(stale)


def test_architecture_cites_only_modules_and_names_that_exist() -> None:
    stale = stale_names(ARCHITECTURE.read_text())
    assert not stale, "docs/architecture.md cites shipyard names that do not exist: " + ", ".join(stale)


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_points_at_a_file_and_heading_that_exist(page: Path) -> None:
    broken = broken_links(page)
    assert not broken, f"{page.relative_to(ROOT)}: links to nothing: " + "; ".join(broken)


def test_the_checks_see_a_stale_citation() -> None:
    """The checks above would pass on a page they cannot read: show them one that is wrong."""
    page = ("| `plumbing/` | running commands (`command.py`, `commands.py`), `record/gone.py` |\n\n"
            "`shipyard.record.manifest`, `shipyard.record.gone`, `shipyard.cli:main`, `shipyard.cli:gone`\n")
    assert stale_paths(page) == ["commands.py", "record/gone.py"]
    assert stale_names(page) == ["shipyard.record.gone", "shipyard.cli:gone"]
    assert "a-tour-of-releaseyaml" in github_anchors("## A tour of `release.yaml`\n")
