"""Wheels on a devpi server: one index per channel and variant, made visible by one switch.

Users install from `<url>/<user>/<channel>-<tag>/+simple/` (ember's cpu wheels of the nightly
channel: `<user>/nightly-cpu`) and, for the PyPI flavour, `<user>/<channel>/+simple/`. Those
visible indexes hold no files of their own: they inherit from staging indexes through devpi's
`bases`. A publish uploads (with twine) into a new staging index named after the sha256 of what
it holds (`<user>/<channel>-<tag>-stage-<digest>`), downloads every file back and checks its
sha256, and only then adds the staging index to the visible index's bases with one PATCH: a
reader sees all of the new files or none. Every index is non-volatile, so devpi itself also
refuses other bytes under a published name. A re-run finds the same staging index (same files,
same name), skips what is there and verified (journal), and finishes the switch.

Racing publishers. Two publishers with other bytes under one name stage into two staging indexes
(their names differ with the bytes), so before its switch each takes its names in
`<visible>-stage-names`, a non-volatile index no reader sees: devpi takes a name there once (the same
bytes again: 200; other bytes: 409), in one server transaction, so the first to take it makes it
visible and the other stops (exit 8) naming both sha256s, its staging index never visible.

Bounded bases. Adding each publish's staging index to the bases would grow them by one per
publish forever (devpi walks every base on every read). So a visible index has at most two
bases: its archive (`<visible>-stage-archive`, no bases of its own, holding every file published
before) and the newest staging index. Before a switch, the files of every other base are copied
into the archive on the server (devpi's push, per project version; file by file where the archive
holds part of a version already) and read back there; the one PATCH then sets the bases to
[archive, new staging]. Nothing visible is hidden at any moment (what leaves the bases is in the
archive first), and the chain is one level deep. The folded staging indexes stay (devpi refuses
to delete a non-volatile index) but no reader walks them.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import requests
from packaging.utils import canonicalize_name

from shipyard.errors import ImmutableFileError, PublishError
from shipyard.plumbing.atomic_files import write_atomic
from shipyard.plumbing.hashing import sha256_hex
from shipyard.plumbing.retry import describe, with_retries
from shipyard.publish import twine_upload
from shipyard.publish.connection import target_session
from shipyard.publish.credentials import Credentials
from shipyard.publish.plan import PLAIN_INDEX, PublishFile, distribution_version
from shipyard.publish.target import Backend, Listed, TargetContext, listed_within, name_taken, names_taken

_JSON = "application/vnd.pypi.simple.v1+json"
_INDEX = {"type": "stage", "bases": [], "volatile": False}


class DevpiBackend(Backend):
    def __init__(self, ctx: TargetContext) -> None:
        super().__init__(ctx)
        self.base = ctx.target.url.rstrip("/")
        self.user = ctx.credentials.username or ""
        self.reader = target_session(ctx.target, ctx.root, ctx.policy)  # anonymous: devpi indexes are world-readable
        self.writer = target_session(ctx.target, ctx.root, ctx.policy)  # logged in by _log_in before a write

    # --- names -----------------------------------------------------------------------------

    def index_name(self, channel: str, index: str) -> str:
        return f"{self.user}/{channel}" if index == PLAIN_INDEX else f"{self.user}/{channel}-{index}"

    def staging_name(self, channel: str, index: str, files: Sequence[PublishFile]) -> str:
        digest = sha256_hex("".join(f"{f.filename} {f.sha256}\n" for f in sorted(
            files, key=lambda f: f.filename)).encode())[:16]
        return f"{self.index_name(channel, index)}-stage-{digest}"

    def describe(self, channel: str) -> str:
        index = f"{self.base}/{self.user}/{channel}"
        return f"{index}-<tag>/+simple/ (PyPI flavour: {index}/+simple/)"

    # --- reading -----------------------------------------------------------------------------

    def _get(self, url: str, what: str, accept: str = "application/json") -> requests.Response:
        return with_retries(what, self.base, lambda: self.reader.get(url, headers={"Accept": accept}),
                            self.ctx.policy, scrub=self.ctx.scrub)

    def _project_files(self, index_name: str, project: str) -> list[dict[str, Any]]:
        url = f"{self.base}/{index_name}/+simple/{project}/"
        response = self._get(url, f"list {project} in {index_name}", _JSON)
        if response.status_code == 404:
            return []
        self._expect(response, f"list {project} in {index_name}")
        return [{**f, "url": urljoin(url, f["url"])} for f in response.json().get("files", [])]

    def _indexes(self) -> list[str]:
        response = self._get(f"{self.base}/{self.user}", f"list the indexes of {self.user}")
        if response.status_code == 404:
            return []
        self._expect(response, f"list the indexes of {self.user}")
        return sorted(response.json()["result"].get("indexes", {}))

    def _projects(self, index_name: str) -> list[str]:
        response = self._get(f"{self.base}/{index_name}/+simple/", f"list the projects of {index_name}", _JSON)
        if response.status_code == 404:
            return []
        self._expect(response, f"list the projects of {index_name}")
        return [p["name"] for p in response.json().get("projects", [])]

    def listing(self, channel: str, *, indexes: Sequence[str] | None = None,
                projects: Sequence[str] | None = None) -> list[Listed]:
        if indexes is None:
            prefix = f"{channel}-"
            indexes = [PLAIN_INDEX if name == channel else name[len(prefix):] for name in self._indexes()
                       if (name == channel or name.startswith(prefix)) and "-stage-" not in name]
        out = []
        for index in indexes:
            name = self.index_name(channel, index)
            for project in projects if projects is not None else self._projects(name):
                for entry in self._project_files(name, canonicalize_name(project)):
                    version = distribution_version(entry["filename"])
                    if version is None:
                        continue  # not a distribution shipyard publishes: not its business
                    out.append(Listed(index, entry["filename"], entry["hashes"]["sha256"], canonicalize_name(project),
                                      str(version), entry["url"]))
        return out

    def fetch(self, listed: Listed, dest: Path) -> Path:
        data = self._download(listed.url, listed.filename)
        path = dest / listed.filename
        write_atomic(path, data)
        return path

    def _download(self, url: str, filename: str) -> bytes:
        response = self._get(url, f"download {filename}", "*/*")
        self._expect(response, f"download {filename}")
        return response.content

    # --- writing -----------------------------------------------------------------------------

    def _log_in(self) -> None:
        """Trade the password for a devpi login token, once per publish. devpi checks a password
        with argon2 on every request that carries it (about 0.15 s of the server's CPU each), a
        token by its signature alone, and takes the token where the password goes (basic auth: so
        twine's uploads carry it too). The token is a secret of the run like the password: every
        message of this backend scrubs both."""
        if self.writer.auth is not None:
            return
        user, password = self.ctx.credentials.basic_auth()
        login = {"user": user, "password": password}
        response = with_retries(f"log in as {user}", self.base,
                                lambda: self.reader.post(f"{self.base}/+login", json=login),
                                self.ctx.policy, scrub=self.ctx.scrub)
        self._expect(response, f"log in as {user}")
        token = response.json()["result"]["password"]
        # Credentials hand the token to the one scrubber (redaction.py) as they are made.
        self.ctx = dataclasses.replace(self.ctx, credentials=Credentials(user, token))
        self.writer.auth = (user, token)

    def release(self, channel: str, files: Sequence[PublishFile]) -> None:
        self._log_in()
        by_index: dict[str, list[PublishFile]] = {}
        for f in files:
            by_index.setdefault(f.index, []).append(f)
        for index, group in sorted(by_index.items()):
            self._release_index(channel, index, group)

    def _release_index(self, channel: str, index: str, files: list[PublishFile]) -> None:
        visible = self.index_name(channel, index)
        staging = self.staging_name(channel, index, files)
        journal = self.ctx.journal
        journal.record("stage", target=self.target.name, channel=channel, index=visible, staging=staging,
                       files={f.filename: f.sha256 for f in files})
        self._ensure_index(staging)
        projects = sorted({f.project for f in files})
        staged = {e["filename"]: e for p in projects for e in self._project_files(staging, p)}
        for f in files:
            if f.filename in staged:
                self._same_bytes(f, staged[f.filename]["hashes"]["sha256"], staging)
                continue
            self.ctx.progress(f"{self.target.name}: upload {f.filename} to {staging}")
            self._upload(f, staging)
            journal.record("uploaded", target=self.target.name, where=staging, file=f.filename, sha256=f.sha256)
        # Read every file back from the server before anything becomes visible.
        verified = journal.verified(staging)
        staged = self._listed(staging, files)
        for f in files:
            if verified.get(f.filename) == f.sha256:
                continue
            entry = staged[f.filename]
            digest = sha256_hex(self._download(entry["url"], f.filename))
            if digest != f.sha256:
                raise PublishError(f"{f.filename}: {self.base}: {staging} serves sha256 {digest}, expected "
                                   f"{f.sha256}; nothing became visible: check the server's storage, then "
                                   f"publish again")
            journal.record("verified", target=self.target.name, where=staging, file=f.filename, sha256=f.sha256)
        self._claim(channel, index, files)
        self._ensure_index(visible)
        self._switch(visible, staging)
        journal.record("switched", target=self.target.name, channel=channel, index=visible, staging=staging,
                       files={f.filename: f.sha256 for f in files})
        self.ctx.progress(f"{self.target.name}: {visible}: {len(files)} files visible")

    def _listed(self, staging: str, files: Sequence[PublishFile]) -> dict[str, dict[str, Any]]:
        """Every file's entry in `staging`, once it lists them all (read again, with growing pauses,
        for up to the policy's `visible_within` seconds: a devpi replica shows an upload late)."""
        projects = sorted({f.project for f in files})
        staged, missing = listed_within(
            files, lambda: {e["filename"]: e for p in projects for e in self._project_files(staging, p)},
            self.ctx.policy, label=f"{self.target.name}: {self.base}/{staging}: list the uploads")
        if missing:
            raise PublishError(f"{self.target.name}: {self.base}: not visible yet: {', '.join(missing)} uploaded to "
                               f"{staging}, and it did not list it within {self.ctx.policy.visible_within:g} s; "
                               f"nothing became visible: publish again later to resume, or wait longer with "
                               f"--visible-within")
        return staged

    def _claim(self, channel: str, index: str, files: Sequence[PublishFile]) -> None:
        """Take every file's name in `<visible>-stage-names` before the switch, with devpi's own
        conditional write: a non-volatile index takes a file name once, answering an upload of the
        same bytes again 200 and of other bytes 409. No reader sees that index (no index has it as
        a base); it only decides which of two publishers racing with other bytes under one name
        makes it visible: the other stops here (exit 8), before its switch, naming both sha256s."""
        names = f"{self.index_name(channel, index)}-stage-names"
        self._ensure_index(names)
        held = {e["filename"]: e["hashes"]["sha256"] for p in sorted({f.project for f in files})
                for e in self._project_files(names, p)}
        taken = []
        for f in files:
            served = held.get(f.filename)
            if served is None:
                response = twine_upload.upload(self.ctx, f"{self.base}/{names}/", self.base, f)
                if response.status_code != 409:
                    self._expect(response, f"take the name {f.filename} in {names}")
                    continue
                served = {e["filename"]: e["hashes"]["sha256"]
                          for e in self._project_files(names, f.project)}.get(f.filename)
            if served is not None and served != f.sha256:
                taken.append(name_taken(self.target.name, f"{self.base}/{self.index_name(channel, index)}", f.filename,
                                        served, f.sha256))
        if taken:
            raise names_taken(taken, outcome=f"nothing became visible on {self.target.name}; the index keeps what "
                                             f"it shows")

    def _same_bytes(self, f: PublishFile, served: str, where: str) -> None:
        if served != f.sha256:
            raise names_taken([name_taken(self.target.name, f"{self.base}/{where}", f.filename, served, f.sha256)],
                              outcome="nothing became visible")

    def _ensure_index(self, name: str) -> None:
        response = self._get(f"{self.base}/{name}", f"look up index {name}")
        if response.status_code == 200:
            return
        response = with_retries(f"create index {name}", self.base,
                                lambda: self.writer.put(f"{self.base}/{name}", json=_INDEX), self.ctx.policy,
                                scrub=self.ctx.scrub)
        if response.status_code == 409 or (response.status_code == 400 and "exists" in response.text):
            return  # a try whose answer was lost made it
        self._expect(response, f"create index {name}")

    def _switch(self, visible: str, staging: str) -> None:
        """`visible`'s bases become [its archive, `staging`], every other base folded into the archive first."""
        response = self._get(f"{self.base}/{visible}", f"look up index {visible}")
        self._expect(response, f"look up index {visible}")
        archive = f"{visible}-stage-archive"
        wanted = [archive, staging]
        bases = list(response.json()["result"].get("bases", []))
        if bases == wanted:
            return
        self._ensure_index(archive)
        for older in bases:
            if older not in wanted:
                self._fold(older, archive)
        response = with_retries(f"make {staging} visible in {visible}", self.base,
                                lambda: self.writer.patch(f"{self.base}/{visible}",
                                                          json=[f"bases={','.join(wanted)}"]),
                                self.ctx.policy, scrub=self.ctx.scrub)
        self._expect(response, f"make {staging} visible in {visible}")

    def _fold(self, source: str, archive: str) -> None:
        """Every file of the index `source` also in `archive`, with the same sha256 (read back)."""
        for project in self._projects(source):
            held = {e["filename"]: e["hashes"]["sha256"] for e in self._project_files(archive, project)}
            versions: dict[str, list[dict[str, Any]]] = {}
            for entry in self._project_files(source, project):
                versions.setdefault(distribution_version(entry["filename"]) or "", []).append(entry)
            for version, entries in sorted(versions.items()):
                for entry in entries:
                    if entry["filename"] in held and held[entry["filename"]] != entry["hashes"]["sha256"]:
                        raise ImmutableFileError(
                            f"{entry['filename']}: {self.base}/{archive} holds it with sha256 "
                            f"{held[entry['filename']]}, {source} with {entry['hashes']['sha256']}; a published "
                            f"name never changes its bytes: check the server's storage")
                missing = [e for e in entries if e["filename"] not in held]
                if not missing:
                    continue
                self.ctx.progress(f"{self.target.name}: keep {project} {version} of {source} in {archive}")
                if len(missing) == len(entries):  # devpi copies the whole version on the server
                    self._push(source, archive, project, version)
                else:  # the archive refuses a version's push when it holds one of its files
                    for entry in missing:
                        self._copy_file(entry, archive, project, version)
            shown = {e["filename"]: e["hashes"]["sha256"] for e in self._project_files(archive, project)}
            for entry in (e for group in versions.values() for e in group):
                if shown.get(entry["filename"]) != entry["hashes"]["sha256"]:
                    raise PublishError(f"{entry['filename']}: {self.base}: copied from {source} to {archive} but "
                                       f"not listed there with its sha256; nothing became invisible: publish again")

    def _push(self, source: str, archive: str, project: str, version: str) -> None:
        what = f"copy {project} {version} from {source} to {archive}"
        body = {"name": project, "version": version, "targetindex": archive}
        response = with_retries(what, self.base, lambda: self.writer.post(f"{self.base}/{source}", json=body),
                                self.ctx.policy, scrub=self.ctx.scrub)
        if response.status_code == 409:
            return  # a try whose answer was lost made it: _fold reads the archive back
        self._expect(response, what)

    def _copy_file(self, entry: dict[str, Any], archive: str, project: str, version: str) -> None:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / entry["filename"]
            path.write_bytes(self._download(entry["url"], entry["filename"]))
            sha256 = entry["hashes"]["sha256"]
            self._upload(PublishFile(PLAIN_INDEX, entry["filename"], path, sha256, project, version,
                                     entry["filename"]), archive)

    def _upload(self, f: PublishFile, staging: str) -> None:
        response = twine_upload.upload(self.ctx, f"{self.base}/{staging}/", self.base, f)
        if response.status_code == 409:
            # Already there (a try whose answer was lost): the same bytes are fine, others are not.
            served = {e["filename"]: e for e in self._project_files(staging, f.project)}.get(f.filename)
            if served is not None:
                self._same_bytes(f, served["hashes"]["sha256"], staging)
                return
        self._expect(response, f"upload {f.filename}")

    def _expect(self, response: requests.Response, what: str) -> None:
        if response.status_code >= 400:
            body = self.ctx.scrub(" ".join(response.text.split())[:300])
            raise PublishError(f"{what}: {self.base}: {describe(response)}: {body}; check the target "
                               f"{self.target.name} in release.yaml and the credentials its *_env variables hold")
