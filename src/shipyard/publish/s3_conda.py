"""A conda channel in an `s3` target's bucket (`layout: conda`): `<prefix><channel>/<subdir>/`
holding the packages beside `repodata.json` and `repodata.json.zst`, as conda and rattler read a
channel over HTTP from the bucket's url (a CDN or the bucket's website), always with a `noarch`
subdir.

The packages go first, each written once and read back (publish/s3_objects.py). The new packages'
repodata entries are py-rattler's: they are indexed in a folder of their own (conda/rattler_glue.py,
as the local channel is), and merged into each subdir's repodata.json over the one read; the .zst
follows the JSON it is made from. A solver sees a package listed only once it is there.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import zstandard

from shipyard.conda.channel import package_subdir
from shipyard.conda.rattler_glue import index_channel
from shipyard.errors import PublishError, public_url
from shipyard.publish.plan import PublishFile
from shipyard.publish.s3_objects import JsonIndex, S3Objects
from shipyard.publish.target import Backend, Listed, TargetContext, names_taken

GROUPS = ("packages", "packages.conda")  # .tar.bz2 and .conda entries of a repodata.json


class S3CondaBackend(Backend):
    def __init__(self, ctx: TargetContext) -> None:
        super().__init__(ctx)
        self.objects = S3Objects(ctx)

    def describe(self, channel: str) -> str:
        where = self.objects.where(self.objects.key(channel, ""))
        return f"{public_url(self.target.url).rstrip('/')}/{channel}/ ({where})"

    def listing(self, channel: str, *, indexes: Sequence[str] | None = None,
                projects: Sequence[str] | None = None) -> list[Listed]:
        objects = self.objects
        base = objects.key(channel, "")
        out = []
        for key in sorted(objects.keys_under(base)):
            parts = key[len(base):].split("/")
            if len(parts) != 2 or parts[1] != "repodata.json":
                continue
            data, _ = objects.read_json(key)
            for filename, record in sorted(_entries(data).items()):
                if projects is None or record["name"] in projects:
                    out.append(Listed("conda", filename, record["sha256"], record["name"], record["version"],
                                      objects.key(channel, parts[0], filename)))
        return out

    def fetch(self, listed: Listed, dest: Path) -> Path:
        return self.objects.download(listed.url, dest / listed.filename)

    def release(self, channel: str, files: Sequence[PublishFile]) -> None:
        objects = self.objects
        subdirs = {f.filename: package_subdir(f.path) for f in files}
        taken = [line for f in files if (line := objects.put_once(objects.key(channel, subdirs[f.filename],
                                                                               f.filename), f))]
        if taken:
            raise names_taken(taken, outcome="no repodata of this run was written")
        for f in files:
            objects.read_back(objects.key(channel, subdirs[f.filename], f.filename), f)
        self.ctx.journal.record("uploaded", target=self.target.name, channel=channel,
                                files={f.filename: f.sha256 for f in files})
        new = _new_entries(files, subdirs)
        for subdir in sorted({*new, "noarch"}):  # a channel always has a noarch subdir
            folder = objects.key(channel, subdir)
            objects.merge_json(f"{folder}/repodata.json", partial(_repodata, folder, subdir, new.get(subdir, {})))
        self.ctx.journal.record("switched", target=self.target.name, channel=channel,
                                files={f.filename: f.sha256 for f in files})
        self.ctx.progress(f"{self.target.name}: {self.describe(channel)}: {len(files)} packages visible")


def _entries(data: JsonIndex | None) -> dict[str, dict[str, Any]]:
    return {name: record for group in GROUPS for name, record in (data or {}).get(group, {}).items()}


def _new_entries(files: Sequence[PublishFile], subdirs: dict[str, str]) -> dict[str, dict[str, dict[str, Any]]]:
    """The repodata entries of the new packages, by subdir and group, as py-rattler indexes them;
    each checked against the sha256 the release records."""
    with tempfile.TemporaryDirectory(prefix="shipyard-s3-conda-") as scratch:
        folder = Path(scratch)
        for f in files:
            (folder / subdirs[f.filename]).mkdir(exist_ok=True)
            shutil.copyfile(f.path, folder / subdirs[f.filename] / f.filename)
        index_channel(folder)
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for repodata in sorted(folder.glob("*/repodata.json")):
            data = json.loads(repodata.read_bytes())
            for group in GROUPS:
                for name, record in data.get(group, {}).items():
                    out.setdefault(repodata.parent.name, {}).setdefault(group, {})[name] = record
    expected = {f.filename: f.sha256 for f in files}
    for groups in out.values():
        for records in groups.values():
            for name, record in records.items():
                if record.get("sha256") != expected.get(name):
                    raise PublishError(f"{name}: the index gives sha256 {record.get('sha256')}, the release records "
                                       f"{expected.get(name)}; the file changed after it was checked: build it again")
    return out


def _repodata(folder: str, subdir: str, new: dict[str, dict[str, Any]],
              present: JsonIndex | None) -> dict[str, tuple[bytes, str]]:
    """The subdir's repodata.json (the entries there now with the new ones in) and its .zst."""
    data: dict[str, Any] = dict(present or {})
    data.setdefault("info", {"subdir": subdir})
    data.setdefault("repodata_version", 1)
    for group in GROUPS:
        data[group] = {**data.get(group, {}), **new.get(group, {})}
    data.setdefault("removed", [])
    plain = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return {f"{folder}/repodata.json": (plain, "application/json"),
            f"{folder}/repodata.json.zst": (zstandard.ZstdCompressor().compress(plain), "application/zstd")}
