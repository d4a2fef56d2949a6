"""The static tree's layout in an `s3` target's bucket (`layout: wheels`, the default):
`<prefix><channel>/<tag>/<project>/` holding the wheels beside the PEP 503 and PEP 691 pages, and
`<prefix><channel>/<tag>/index.{html,json}` listing the projects, as PyTorch's download site is.

The wheels go first, each written once and read back (publish/s3_objects.py); then each project
page, then each tag's root page, merged over the page read. A reader sees a page before or after,
never a file it lists that is absent.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from shipyard.errors import PublishError, public_url
from shipyard.publish.plan import PublishFile
from shipyard.publish.s3_objects import JsonIndex, S3Objects
from shipyard.publish.target import Backend, Listed, TargetContext, names_taken
from shipyard.wheel.index import index_entry, project_pages, root_pages, version_in_wheel_name

JSON_PAGE = "application/vnd.pypi.simple.v1+json"


class S3TreeBackend(Backend):
    def __init__(self, ctx: TargetContext) -> None:
        super().__init__(ctx)
        self.objects = S3Objects(ctx)

    def describe(self, channel: str) -> str:
        where = self.objects.where(self.objects.key(channel, ""))
        return f"{public_url(self.target.url).rstrip('/')}/{channel}/<tag>/ ({where})"

    def listing(self, channel: str, *, indexes: Sequence[str] | None = None,
                projects: Sequence[str] | None = None) -> list[Listed]:
        objects = self.objects
        pages: list[tuple[str, str]] = []
        if indexes is not None and projects is not None:
            pages = [(index, project) for index in indexes for project in projects]
        else:
            base = objects.key(channel, "")
            for key in objects.keys_under(base):
                parts = key[len(base):].split("/")
                if len(parts) == 3 and parts[2] == "index.json" and (indexes is None or parts[0] in indexes) \
                        and (projects is None or parts[1] in projects):
                    pages.append((parts[0], parts[1]))
        out = []
        for index, project in pages:
            data, _ = objects.read_json(objects.key(channel, index, project, "index.json"))
            for entry in (data or {}).get("files", []):
                if entry["filename"].endswith(".whl"):
                    out.append(Listed(index, entry["filename"], entry["hashes"]["sha256"], project,
                                      version_in_wheel_name(entry["filename"]),
                                      objects.key(channel, index, project, entry["filename"])))
        return out

    def fetch(self, listed: Listed, dest: Path) -> Path:
        return self.objects.download(listed.url, dest / listed.filename)

    def release(self, channel: str, files: Sequence[PublishFile]) -> None:
        objects = self.objects
        taken = [line for f in files
                 if (line := objects.put_once(objects.key(channel, f.index, f.project, f.filename), f))]
        if taken:
            raise names_taken(taken, outcome="no page of this run was written")
        for f in files:
            objects.read_back(objects.key(channel, f.index, f.project, f.filename), f)
        self.ctx.journal.record("uploaded", target=self.target.name, channel=channel,
                                files={f"{f.index}/{f.filename}": f.sha256 for f in files})
        by_page: dict[tuple[str, str], list[PublishFile]] = {}
        for f in files:
            by_page.setdefault((f.index, f.project), []).append(f)
        for (index, project), new in sorted(by_page.items()):
            folder = objects.key(channel, index, project)
            objects.merge_json(f"{folder}/index.json", partial(_pages, folder, partial(
                _project_pages, project, [_entry(f) for f in new])))
        for index in sorted({f.index for f in files}):
            folder = objects.key(channel, index)
            objects.merge_json(f"{folder}/index.json", partial(_pages, folder, partial(
                _root_pages, {f.project for f in files if f.index == index})))
        self.ctx.journal.record("switched", target=self.target.name, channel=channel,
                                files={f"{f.index}/{f.filename}": f.sha256 for f in files})
        self.ctx.progress(f"{self.target.name}: {self.describe(channel)}: {len(files)} files visible")


def _pages(folder: str, make: Any, page: JsonIndex | None) -> dict[str, tuple[bytes, str]]:
    """The JSON page first (the one written over the page read), then the HTML one."""
    pages = make(page)
    return {f"{folder}/index.json": (pages["index.json"].encode(), JSON_PAGE),
            f"{folder}/index.html": (pages["index.html"].encode(), "text/html")}


def _entry(f: PublishFile) -> dict[str, Any]:
    entry = index_entry(f.path)
    if entry["hashes"]["sha256"] != f.sha256:
        raise PublishError(f"{f.path}: sha256 {entry['hashes']['sha256']} is not {f.sha256}, the one the release "
                           f"records; the file changed after it was checked: build it again")
    return entry


def _project_pages(project: str, new: list[dict[str, Any]], page: JsonIndex | None) -> dict[str, str]:
    """A project's pages: the entries of its page now (`page`) with `new` in, one per file name (a
    resumed run's files are there already, with the same bytes)."""
    names = {e["filename"] for e in new}
    return project_pages(project, [e for e in (page or {}).get("files", []) if e["filename"] not in names] + new)


def _root_pages(mine: set[str], page: JsonIndex | None) -> dict[str, str]:
    """A tag's root pages: the projects of its page now (`page`) and `mine`."""
    return root_pages(sorted({p["name"] for p in (page or {}).get("projects", [])} | mine))
