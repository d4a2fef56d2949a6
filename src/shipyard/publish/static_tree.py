"""Wheels in PyTorch's download layout, for any web server: `<path>/<channel>/<tag>/<project>/`
with PEP 503 (index.html) and PEP 691 (index.json) pages, sha256 on every link; and the PEP 825
variants index `<path>/<channel>/variants/<project>/` (publish/variants.py) with each version's
`*-variants.json`.

`<path>/<channel>` is a symlink to a generation folder (shipyard.plumbing.generations). A publish stages
the next generation (hard links of the files already published, copies of the new ones), writes
every index with wheel/index.py, reads every file back and checks it against the sha256 it must
have and against its index entry, and only then swaps the symlink: a web server that resolves
the link per request shows the whole channel before or after, never between. The generation
before stays on disk so a download that began a moment before the swap still completes; a
generation staged by a publish that was killed before its swap is removed by the next one.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from shipyard.errors import PublishError, public_url
from shipyard.plumbing.file_lock import exclusive
from shipyard.plumbing.generations import current_generation, next_generation, remove_unused_generations, switch
from shipyard.plumbing.hashing import sha256_of
from shipyard.publish.plan import PublishFile
from shipyard.publish.target import Backend, Listed, copy_file, name_taken, names_taken
from shipyard.publish.variants import VARIANTS_INDEX, write_variants_json
from shipyard.wheel.index import version_in_wheel_name, write_index


class StaticTreeBackend(Backend):
    def describe(self, channel: str) -> str:
        return f"{public_url(self.target.url).rstrip('/')}/{channel}/<tag>/ ({self.folder / channel})"

    def listing(self, channel: str, *, indexes: Sequence[str] | None = None,
                projects: Sequence[str] | None = None) -> list[Listed]:
        live = current_generation(self.folder / channel)
        if live is None:
            return []
        out = []
        for tag_dir in sorted(p for p in live.iterdir() if p.is_dir()):
            if indexes is not None and tag_dir.name not in indexes:
                continue
            for page in sorted(tag_dir.glob("*/index.json")):
                if projects is not None and page.parent.name not in projects:
                    continue
                for entry in json.loads(page.read_text())["files"]:
                    if not entry["filename"].endswith(".whl"):
                        continue  # a *-variants.json: derived from the wheels, as the page is
                    out.append(Listed(tag_dir.name, entry["filename"], entry["hashes"]["sha256"], page.parent.name,
                                      version_in_wheel_name(entry["filename"]), str(page.parent / entry["filename"])))
        return out

    def fetch(self, listed: Listed, dest: Path) -> Path:
        return copy_file(Path(listed.url), dest)

    def release(self, channel: str, files: Sequence[PublishFile]) -> None:
        link = self.folder / channel
        self.folder.mkdir(parents=True, exist_ok=True)
        with exclusive(self.folder / f".{channel}.lock"):
            live = current_generation(link)
            # Under the lock, on the generation this switch replaces: another publisher may have made
            # one of these names visible since run.py read the listing. Its bytes stay.
            taken = self._taken(channel, live, files)
            if taken:
                raise names_taken(taken, outcome=f"nothing became visible on {self.target.name}, and what "
                                                 f"{link} shows is as it was")
            staged = next_generation(link)
            try:
                self._stage(staged, live, files)
                self._verify(staged, files)
                self.ctx.journal.record("staged", target=self.target.name, channel=channel, generation=staged.name,
                                        files={f"{f.index}/{f.filename}": f.sha256 for f in files})
                switch(link, staged)
            except BaseException:
                if current_generation(link) != staged:
                    shutil.rmtree(staged, ignore_errors=True)
                raise
            self.ctx.journal.record("switched", target=self.target.name, channel=channel, generation=staged.name,
                                    files={f"{f.index}/{f.filename}": f.sha256 for f in files})
            remove_unused_generations(link, previous=live)
        self.ctx.progress(f"{self.target.name}: {link}: {len(files)} files visible")

    def _taken(self, channel: str, live: Path | None, files: Sequence[PublishFile]) -> list[str]:
        """A `name_taken` line for each file that `live` holds with other bytes."""
        if live is None:
            return []
        out = []
        for f in files:
            held = live / f.index / f.project / f.filename
            if held.is_file() and (served := sha256_of(held)) != f.sha256:
                out.append(name_taken(self.target.name, f"{channel}/{f.index}", f.filename, served, f.sha256))
        return out

    def _stage(self, staged: Path, live: Path | None, files: Sequence[PublishFile]) -> None:
        staged.mkdir(mode=0o755)
        if live is not None:
            for wheel in live.glob("*/*/*.whl"):
                target = staged / wheel.relative_to(live)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.link(wheel, target)  # the same inode: published bytes are never rewritten
        for f in files:
            target = staged / f.index / f.project / f.filename
            if target.exists():
                continue  # linked from the live generation, with these bytes (_taken, under the lock)
            copy_file(f.path, target.parent)
            os.chmod(target, 0o644)
        for project in sorted((staged / VARIANTS_INDEX).glob("*/")):
            write_variants_json(project)  # from the variant wheels now staged there, before its page lists it
        for tag_dir in sorted(p for p in staged.iterdir() if p.is_dir()):
            write_index(tag_dir)

    def _verify(self, staged: Path, files: Sequence[PublishFile]) -> None:
        for f in files:
            path = staged / f.index / f.project / f.filename
            digest = sha256_of(path)
            entries = json.loads((path.parent / "index.json").read_text())["files"]
            listed = next((e["hashes"]["sha256"] for e in entries if e["filename"] == f.filename), None)
            if digest != f.sha256 or listed != f.sha256:
                raise PublishError(f"{f.filename}: {self.folder}: the staged copy reads back as sha256 {digest} "
                                   f"(index: {listed}), expected {f.sha256}; nothing became visible: check the disk, "
                                   f"then publish again")
