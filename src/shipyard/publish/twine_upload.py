"""One wheel uploaded through twine's Repository, one try per call, retried by plumbing/retry.py:
the upload step of every target kind that speaks the upload API (devpi's indexes, `kind: pypi`)."""

from __future__ import annotations

import contextlib
import io

import requests
from twine.package import PackageFile
from twine.repository import Repository

from shipyard.plumbing.retry import with_retries
from shipyard.publish.connection import target_session
from shipyard.publish.plan import PublishFile
from shipyard.publish.target import TargetContext


def upload(ctx: TargetContext, repository_url: str, where: str, f: PublishFile) -> requests.Response:
    """`f` uploaded to `repository_url` with the target's credentials; the last try's answer (the
    caller decides what a 4xx means). `where` names the server in a retry's message, never with
    credentials."""
    repository = Repository(repository_url, ctx.credentials.username, ctx.credentials.password,
                            disable_progress_bar=True)
    repository.session = target_session(ctx.target, ctx.root, ctx.policy, repository.session)
    package = PackageFile.from_filename(str(f.path), None)

    def attempt() -> requests.Response:
        with contextlib.redirect_stdout(io.StringIO()):  # twine prints "Uploading …" itself
            return repository.upload(package, max_redirects=1)  # one try: retrying is ours

    try:
        return with_retries(f"upload {f.filename}", where, attempt, ctx.policy, scrub=ctx.scrub)
    finally:
        repository.close()
