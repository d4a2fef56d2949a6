"""Conda packages in a static channel per release channel: `<path>/<channel>/<subdir>/`, served by
a web server at `<url><channel>/` with conda's token in the path (`/t/<token>/`).

Each channel folder is written by conda/channel.publish_packages: the next generation is staged,
indexed with py-rattler, every package checked against its repodata entry (sha256 and size) and
its staged copy against the manifest's sha256 (run.py checked the file too, but it may change
before it is copied), then the channel's symlink is swapped, so a solver sees the release whole
or not at all. The generation live before the swap stays for downloads in flight; one staged by
a killed publish is removed by the next. With the channel's lock held, before staging, a name the
live generation holds with other bytes stops the publish (exit 8, both sha256s named): of two
publishers racing under one name, the first to switch wins and the channel keeps its packages.
After the swap, every new package is downloaded back over HTTP, through the web server, with the
token.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from shipyard.conda.channel import NameTaken, publish_packages
from shipyard.errors import ImmutableFileError, PublishError
from shipyard.plumbing.generations import current_generation
from shipyard.plumbing.hashing import sha256_hex
from shipyard.plumbing.retry import with_retries
from shipyard.publish.connection import target_session
from shipyard.publish.plan import PublishFile
from shipyard.publish.target import Backend, Listed, copy_file, name_taken, names_taken


def conda_channel_url(target_url: str, channel: str, *, token: str | None) -> str:
    """`<url><channel>/`, with `/t/<token>/` after the host when a token is given: where a solver
    reads a conda target's channel (the get-started page shows it too)."""
    parts = urlsplit(target_url.rstrip("/") + f"/{channel}/")
    path = f"/t/{token}{parts.path}" if token else parts.path
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


class CondaChannelBackend(Backend):
    def channel_url(self, channel: str, *, token: str | None) -> str:
        return conda_channel_url(self.target.url, channel, token=token)

    def describe(self, channel: str) -> str:
        return self.channel_url(channel, token="<token>")

    def listing(self, channel: str, *, indexes: Sequence[str] | None = None,
                projects: Sequence[str] | None = None) -> list[Listed]:
        live = current_generation(self.folder / channel)
        if live is None:
            return []
        out = []
        for repodata in sorted(live.glob("*/repodata.json")):
            data = json.loads(repodata.read_text())
            for filename, record in sorted({**data.get("packages", {}), **data.get("packages.conda", {})}.items()):
                if projects is not None and record["name"] not in projects:
                    continue
                out.append(Listed("conda", filename, record["sha256"], record["name"], record["version"],
                                  str(repodata.parent / filename)))
        return out

    def fetch(self, listed: Listed, dest: Path) -> Path:
        return copy_file(Path(listed.url), dest)

    def release(self, channel: str, files: Sequence[PublishFile]) -> None:
        self.ctx.journal.record("stage", target=self.target.name, channel=channel,
                                files={f.filename: f.sha256 for f in files})
        update = publish_packages(self.folder / channel, [f.path for f in files],
                                  expected={f.filename: f.sha256 for f in files}, keep_previous=True,
                                  taken=partial(self._taken, channel))
        self.ctx.journal.record("switched", target=self.target.name, channel=channel,
                                generation=update.generation.name, files={f.filename: f.sha256 for f in files})
        self._read_back(channel, files)
        self.ctx.progress(f"{self.target.name}: {self.describe(channel)}: {len(files)} packages visible")

    def _taken(self, channel: str, held: Sequence[NameTaken]) -> ImmutableFileError:
        """Another publisher made these names visible first (or they were published before run.py
        read the listing): its packages stay, this run stops."""
        return names_taken([name_taken(self.target.name, f"{channel}/{h.key.split('/')[0]}", h.key.split("/", 1)[1],
                                       h.served, h.offered) for h in held],
                           outcome=f"nothing became visible on {self.target.name}, and the channel is as it was")

    def _read_back(self, channel: str, files: Sequence[PublishFile]) -> None:
        """Every new package as a user's solver downloads it: through the web server, with the token."""
        base = self.channel_url(channel, token=self.ctx.credentials.token)
        listed = {entry.filename: entry for entry in self.listing(channel)}
        session = target_session(self.target, self.ctx.root, self.ctx.policy)
        for f in files:
            subdir = Path(listed[f.filename].url).parent.name
            response = with_retries(f"download {f.filename}", self.target.url,
                                    lambda url=f"{base}{subdir}/{f.filename}": session.get(url),  # type: ignore[misc]
                                    self.ctx.policy, scrub=self.ctx.scrub)
            digest = sha256_hex(response.content) if response.status_code == 200 else f"HTTP {response.status_code}"
            if digest != f.sha256:
                raise PublishError(f"{f.filename}: {self.target.url}: the web server serves {digest} for "
                                   f"{channel}/{subdir}, the channel holds sha256 {f.sha256}; check that it serves "
                                   f"{self.folder} (release.yaml: publish.{self.target.name}.path)")
            self.ctx.journal.record("verified", target=self.target.name, where=channel, file=f.filename,
                                    sha256=f.sha256)
