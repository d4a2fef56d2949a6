"""Wheels on any index that speaks the upload API twine uses: PyPI, TestPyPI, pypiserver, and the
indexes of Artifactory, GitLab or CodeArtifact. Configuration alone picks the server: `url` is the
upload URL, `index_url` the simple index (both known for pypi.org and test.pypi.org).

Such an index is one index with no channels and no staging (PEP 694 upload sessions are served
nowhere yet), so the target gets the PyPI flavour only (the default variant's wheels under the plain
version, and the pure ones), and a release is made visible file by file: every file is uploaded,
then every one is read back from the simple index and its sha256 checked. While that runs, a reader
can see some files of the new version and not others (docs/publishing.md says what that means).

Immutability: run.py refuses a published name with other bytes before anything is uploaded, from
`listing`; then the index's own refusal decides (an index takes a file name once: pypiserver without
`--overwrite` answers 409, or 400 to twine, PyPI 400): an upload answered "file exists" (a try whose
answer was lost, or another publisher that got there first) is re-read from the index: the same
sha256 is success, another stops the run (exit 8) naming both. Both racing publishers upload in the
same order (dependencies first) and a loser stops at its first refused file, so one wins every file.

Patience: right after an upload the simple page may be an older one (PyPI's CDN caches pages), so a
file missing from it is looked for again, with growing pauses, for `--visible-within` seconds
(default 120) before the run stops saying it is not visible yet; a re-run resumes.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Sequence
from pathlib import Path

import requests
from packaging.utils import canonicalize_name

from shipyard.errors import PublishError, public_url
from shipyard.plumbing.atomic_files import write_atomic
from shipyard.plumbing.hashing import sha256_hex
from shipyard.plumbing.retry import describe, wait_for, with_retries
from shipyard.publish import twine_upload
from shipyard.publish.connection import target_session
from shipyard.publish.plan import PLAIN_INDEX, PublishFile, distribution_version
from shipyard.publish.simple_index import ACCEPT, IndexedFile, project_files, project_names
from shipyard.publish.target import Backend, Listed, TargetContext, listed_within, name_taken, names_taken
from shipyard.publish.upload_order import dependencies_first


class PypiBackend(Backend):
    def __init__(self, ctx: TargetContext) -> None:
        super().__init__(ctx)
        self.upload_url = ctx.target.url
        self.simple = ctx.target.simple_url
        self.reader = target_session(ctx.target, ctx.root, ctx.policy)  # anonymous: the simple index is world-readable

    def describe(self, channel: str) -> str:
        return public_url(self.simple)

    # --- reading -----------------------------------------------------------------------------

    def _get(self, url: str, what: str, accept: str) -> requests.Response:
        # No redirects: pypiserver sends a project it does not hold to pypi.org (its fallback), whose
        # files are not this index's.
        return with_retries(what, public_url(self.simple),
                            lambda: self.reader.get(url, headers={"Accept": accept}, allow_redirects=False),
                            self.ctx.policy, scrub=self.ctx.scrub)

    def _page(self, project: str) -> dict[str, IndexedFile]:
        """filename -> file of the project's page; empty when the index does not hold the project."""
        url = f"{self.simple}{canonicalize_name(project)}/"
        what = f"list {project} in the simple index"
        response = self._get(url, what, ACCEPT)
        if response.status_code in (404, 410) or 300 <= response.status_code < 400:
            return {}
        self._expect(response, what)
        try:
            files = project_files(response.text, response.headers.get("Content-Type", ""), response.url)
        except (ValueError, KeyError, TypeError) as exc:
            raise PublishError(f"{what}: {public_url(url)}: not a PEP 691 or PEP 503 project page ({exc}); "
                               f"check index_url of the target {self.target.name} in release.yaml") from None
        return {f.filename: f for f in files}

    def _projects(self) -> list[str]:
        what = "list the projects of the simple index"
        response = self._get(self.simple, what, ACCEPT)
        self._expect(response, what)
        return project_names(response.text, response.headers.get("Content-Type", ""))

    def listing(self, channel: str, *, indexes: Sequence[str] | None = None,
                projects: Sequence[str] | None = None) -> list[Listed]:
        if indexes is not None and PLAIN_INDEX not in indexes:
            return []
        out = []
        for project in projects if projects is not None else self._projects():
            for entry in self._page(project).values():
                version = distribution_version(entry.filename)
                if version is None:
                    continue
                out.append(Listed(PLAIN_INDEX, entry.filename, self._stated_sha256(entry), canonicalize_name(project),
                                  version, entry.url))
        return out

    def _stated_sha256(self, entry: IndexedFile) -> str:
        if entry.sha256 is None:
            raise PublishError(f"{entry.filename}: {public_url(self.simple)} states no sha256 for it, and a "
                               f"published name is checked by its bytes; serve sha256 hashes (pypiserver: "
                               f"--hash-algo sha256) in the simple index")
        return entry.sha256

    def fetch(self, listed: Listed, dest: Path) -> Path:
        path = dest / listed.filename
        write_atomic(path, self._download(listed.url, listed.filename))
        return path

    def _download(self, url: str, filename: str) -> bytes:
        response = with_retries(f"download {filename}", public_url(self.simple),
                                lambda: self.reader.get(url), self.ctx.policy, scrub=self.ctx.scrub)
        self._expect(response, f"download {filename}")
        return response.content

    # --- writing -----------------------------------------------------------------------------

    def release(self, channel: str, files: Sequence[PublishFile]) -> None:
        journal = self.ctx.journal
        where = public_url(self.simple)
        journal.record("stage", target=self.target.name, channel=channel, index=where,
                       files={f.filename: f.sha256 for f in files})
        projects = sorted({f.project for f in files})
        shown = {name: e for p in projects for name, e in self._page(p).items()}
        if any(f.filename not in shown for f in files):
            self._renew_token()  # a minted token is young when the uploads begin, whatever ran before
        for f in dependencies_first(files):  # each upload is visible at once: the required ones first
            if f.filename in shown:  # uploaded by a run that stopped before its end
                self._same_bytes(f, self._stated_sha256(shown[f.filename]))
                continue
            self.ctx.progress(f"{self.target.name}: upload {f.filename} to {public_url(self.upload_url)}")
            self._upload(f)
            journal.record("uploaded", target=self.target.name, where=where, file=f.filename, sha256=f.sha256)
        # The index has no staging: every file is up before any is checked, and each is then read back.
        verified = journal.verified(where)
        shown = self._listed(files)
        for f in files:
            entry = shown[f.filename]
            self._same_bytes(f, self._stated_sha256(entry))
            if verified.get(f.filename) == f.sha256:
                continue
            digest = sha256_hex(self._download(entry.url, f.filename))
            if digest != f.sha256 and self.settled_sha256(f, digest) == f.sha256:
                digest = sha256_hex(self._download(entry.url, f.filename))  # read while it was written
            if digest != f.sha256:
                # The page states this run's sha256 and the file is another's: a publisher that wrote
                # the same name at the same moment (an index that checks and stores in two steps).
                raise names_taken([name_taken(self.target.name, where, f.filename, digest, f.sha256)],
                                  outcome=f"{where} serves other bytes under that name than its page "
                                          f"states; check the server's storage before publishing again")
            journal.record("verified", target=self.target.name, where=where, file=f.filename, sha256=f.sha256)
        journal.record("released", target=self.target.name, channel=channel, index=where,
                       files={f.filename: f.sha256 for f in files})
        self.ctx.progress(f"{self.target.name}: {where}: {len(files)} files uploaded and verified")

    def _listed(self, files: Sequence[PublishFile]) -> dict[str, IndexedFile]:
        """Every file's entry on its project page, once the index lists them all: right after an
        upload a page may be an older one (a CDN's cache), so it is read again, with growing pauses,
        for up to the policy's `visible_within` seconds."""
        projects = sorted({f.project for f in files})
        where = public_url(self.simple)
        shown, missing = listed_within(files, lambda: {name: e for p in projects for name, e in self._page(p).items()},
                                       self.ctx.policy, label=f"{self.target.name}: {where}: list the uploads")
        if missing:
            raise PublishError(f"{self.target.name}: {where}: not visible yet: {', '.join(missing)} uploaded to "
                               f"{public_url(self.upload_url)}, and the simple index did not list it within "
                               f"{self.ctx.policy.visible_within:g} s; publish again later to resume (what was "
                               f"uploaded is kept), or wait longer with --visible-within")
        return shown

    def settled_sha256(self, f: PublishFile, served: str) -> str:
        """pypiserver creates an uploaded file, then writes it: while it writes, its page states the
        sha256 of what is written so far (of nothing, at first). So a sha256 that is not this run's
        is read again, after a pause, until two reads agree (for up to `visible_within` seconds):
        the loser of a race names the winner's bytes, not a half-written file's."""
        last = [served]

        def look() -> str | None:
            time.sleep(self.ctx.policy.first_pause)
            entry = self._page(f.project).get(f.filename)
            now = self._stated_sha256(entry) if entry is not None else None
            agreed = now is not None and now == last[-1]
            last.append(now or "")
            return now if agreed else None

        return wait_for(look, self.ctx.policy, label=f"{self.target.name}: {f.filename}: read its sha256 again") \
            or last[-1] or served

    def _same_bytes(self, f: PublishFile, served: str) -> None:
        if served != f.sha256 and (served := self.settled_sha256(f, served)) != f.sha256:
            raise names_taken([name_taken(self.target.name, public_url(self.simple), f.filename, served, f.sha256)],
                              outcome="the index keeps the file it holds")

    def _renew_token(self) -> None:
        """A fresh upload token, for a target whose token is minted (trusted publishing)."""
        if self.ctx.renew is not None:
            self.ctx = dataclasses.replace(self.ctx, credentials=self.ctx.renew())

    def _upload(self, f: PublishFile) -> None:
        response = twine_upload.upload(self.ctx, self.upload_url, public_url(self.upload_url), f)
        if response.status_code in (401, 403) and self.ctx.renew is not None:
            # A minted token expired during a long run of uploads (PyPI answers 403): one new
            # exchange and the same file again; a refusal of the fresh token is reported below.
            self.ctx.progress(f"{self.target.name}: {describe(response)} for {f.filename}: minting a new upload "
                              f"token")
            self._renew_token()
            response = twine_upload.upload(self.ctx, self.upload_url, public_url(self.upload_url), f)
        if response.status_code == 409 or (response.status_code == 400 and "exist" in response.text.lower()):
            # "File already exists" (PyPI: 400, pypiserver: 409 or 400): a try whose answer was lost, or
            # another publisher. The index decides: the same bytes are done, others are refused. Its
            # page may not list the file yet (a cached page): read for a while.
            entry = self._listed([f])[f.filename]
            self._same_bytes(f, self._stated_sha256(entry))
            return
        if 300 <= response.status_code < 400:
            raise PublishError(f"upload {f.filename}: {public_url(self.upload_url)}: {describe(response)} to "
                               f"{public_url(response.headers.get('Location', '?'))}; set url of the target "
                               f"{self.target.name} in release.yaml to the upload URL itself")
        self._expect(response, f"upload {f.filename}")

    def _expect(self, response: requests.Response, what: str) -> None:
        if response.status_code >= 400:
            # An HTML error page (pypiserver's) says it in its text; the styles are noise.
            text = re.sub(r"(?s)<(style|head)\b.*?</\1>|<[^>]+>", " ", response.text)
            body = self.ctx.scrub(" ".join(text.split())[:300])
            raise PublishError(f"{what}: {public_url(self.simple)}: {describe(response)}: {body}; check the "
                               f"target {self.target.name} in release.yaml and the credentials it names")
