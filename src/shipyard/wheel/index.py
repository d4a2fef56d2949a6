"""Static per-variant package indexes: PEP 503 HTML and PEP 691 JSON, sha256 on every link.

Layout: `dist/whl/<tag>/index.html` lists projects; `dist/whl/<tag>/<project>/` holds the
project's wheels beside its `index.html` and `index.json`. The variants index (publish/variants.py)
has the same layout, and its project pages also list PEP 825 variant wheels (`…-<label>.whl`) and
each version's `<name>-<version>-variants.json`.
"""

from __future__ import annotations

import hashlib
import html
import json
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from variantlib.constants import VALIDATION_WHEEL_NAME_REGEX

from shipyard.plumbing.atomic_files import copy_atomic, write_atomic
from shipyard.plumbing.hashing import sha256_of
from shipyard.plumbing.wheel_metadata import requires_python


def content_identity(wheel: Path) -> str:
    """sha256 over a wheel's payload (names and bytes), leaving out what a re-label changes on
    every commit: the build info (git sha), the SBOM (dated by the commit), RECORD and zip timestamps."""
    digest = hashlib.sha256()
    with zipfile.ZipFile(wheel) as zf:
        for name in sorted(zf.namelist()):
            if name.endswith(("/_build_info.json", ".dist-info/RECORD")) or ".dist-info/sboms/" in name:
                continue
            digest.update(name.encode() + b"\0" + hashlib.sha256(zf.read(name)).digest())
    return digest.hexdigest()


def add_wheel(wheel: Path, variant_dir: Path) -> Path:
    """Copy a wheel into its project's folder of the variant index; return the new path.
    A wheel of the same name is replaced (its bytes are a rebuild of the same cell)."""
    name, _, _, _ = parse_wheel_filename(wheel.name)
    target = variant_dir / canonicalize_name(name) / wheel.name
    target.parent.mkdir(parents=True, exist_ok=True)
    if wheel.resolve() != target.resolve():
        copy_atomic(wheel, target)
    return target


def place_wheels(wheels: Sequence[Path], dist: Path) -> None:
    """Put wheels that lie in their variant's index of another dist/ (whl/<variant tag>/<project>/)
    into `dist`'s same index, and rewrite each index that got one (record/merge.py's `place`)."""
    tags = sorted({wheel.parent.parent.name for wheel in wheels})
    for wheel in wheels:
        add_wheel(wheel, dist / "whl" / wheel.parent.parent.name)
    for tag in tags:
        write_index(dist / "whl" / tag)


def write_index(variant_dir: Path) -> list[str]:
    """(Re)write every project page and the root page of one variant index; return projects."""
    projects = sorted(p.name for p in variant_dir.iterdir() if p.is_dir() and any(p.glob("*.whl"))) \
        if variant_dir.is_dir() else []
    for project in projects:
        _write_project(variant_dir / project, project)
    for name, text in root_pages(projects).items():
        write_atomic(variant_dir / name, text)
    return projects


def root_pages(projects: Sequence[str]) -> dict[str, str]:
    """A variant index's root pages (index.html, index.json) listing `projects`, by file name."""
    links = "\n".join(f'    <a href="{quote(p)}/">{html.escape(p)}</a><br/>' for p in projects)
    return {"index.html": _page("Simple index", links),
            "index.json": json.dumps({"meta": {"api-version": "1.1"}, "projects": [{"name": p} for p in projects]},
                                     indent=1, sort_keys=True) + "\n"}


def version_in_wheel_name(filename: str) -> str:
    """The version a wheel file name carries, a PEP 825 variant wheel's (`-<label>` after its tags) too."""
    try:
        return str(parse_wheel_filename(filename)[1])
    except InvalidWheelFilename:
        match = VALIDATION_WHEEL_NAME_REGEX.fullmatch(filename)
        if match is None or match["variant_label"] is None:
            raise
        return str(parse_wheel_filename(match["base_wheel_name"] + ".whl")[1])


def _write_project(folder: Path, project: str) -> None:
    files = [index_entry(path) for path in sorted([*folder.glob("*.whl"), *folder.glob("*-variants.json")])]
    for name, text in project_pages(project, files).items():
        write_atomic(folder / name, text)


def index_entry(path: Path) -> dict[str, Any]:
    """What a project page says of one file (a wheel, or a `*-variants.json`): PEP 691's entry."""
    entry: dict[str, Any] = {"filename": path.name, "url": quote(path.name), "hashes": {"sha256": sha256_of(path)},
                             "size": path.stat().st_size}
    python = requires_python(path) if path.suffix == ".whl" else None
    if python:
        entry["requires-python"] = python
    return entry


def project_pages(project: str, files: Sequence[dict[str, Any]]) -> dict[str, str]:
    """A project's pages (index.html, index.json) listing `files` (index_entry's entries), by file
    name: the one place both are written, from a folder here or from a remote index's entries."""
    files = sorted(files, key=lambda entry: entry["filename"])
    versions = {version_in_wheel_name(e["filename"]) for e in files if e["filename"].endswith(".whl")}
    anchors = []
    for entry in files:
        python = entry.get("requires-python")
        attr = f' data-requires-python="{html.escape(python)}"' if python else ""
        anchors.append(f'    <a href="{quote(entry["filename"])}#sha256={entry["hashes"]["sha256"]}"{attr}>'
                       f'{html.escape(entry["filename"])}</a><br/>')
    return {"index.html": _page(f"Links for {project}", "\n".join(anchors)),
            "index.json": json.dumps({"meta": {"api-version": "1.1"}, "name": project, "files": list(files),
                                      "versions": sorted(versions)}, indent=1, sort_keys=True) + "\n"}


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html>\n<html>\n  <head>\n    <meta name=\"pypi:repository-version\" content=\"1.1\">\n"
            f"    <title>{html.escape(title)}</title>\n  </head>\n  <body>\n    <h1>{html.escape(title)}</h1>\n"
            f"{body}\n  </body>\n</html>\n")
