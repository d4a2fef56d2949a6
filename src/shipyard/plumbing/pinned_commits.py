"""Git repositories pinned at a full commit: the commit's tree fetched once into shipyard's cache and
laid out as a plain folder (no .git), keyed by url and commit.

A commit names its tree for good, so the folder is the cache: present means fetched. Only the one
commit is fetched (`git fetch --depth 1 URL COMMIT` into a bare repository made for it), its tree
written by `git archive` and unpacked as an sdist is (tarfile's "data" filter), all in a staging
folder beside the target that one rename puts in place: a failure leaves nothing. A problem is a
ValueError carrying one line with its fix, which validate turns into an issue of release.yaml.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from shipyard.errors import ToolError
from shipyard.plumbing import command
from shipyard.plumbing.cache_folder import cache_root
from shipyard.plumbing.pinned_sdists import fetch_once, unpack_one_folder
from shipyard.plumbing.progress import Progress

GIT_FOLDER = "git"
_TIMEOUT = 600.0  # seconds for one git command: a large repository's commit over a slow link
# Never ask for a password on a terminal (a job would hang); credentials come from git's own helpers.
_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": ""}
_TOP = "tree"  # the single top folder `git archive --prefix` gives, as an sdist's name-version/


def commit_folder(url: str, commit: str) -> Path:
    """The folder the tree of `commit` of the repository at `url` lands in (present once fetched)."""
    # The url is hashed: it may hold characters no folder name can (':', '/', '@').
    return cache_root() / GIT_FOLDER / f"{hashlib.sha256(url.encode()).hexdigest()[:16]}-{commit}"


def fetch_commit(url: str, commit: str, *, base: Path, progress: Progress) -> Path:
    """The tree of `commit` (40 hex digits) of the repository at `url` (any url git fetches from, or
    a path relative to `base`), fetched once; ValueError (one line) when the repository cannot be
    reached, does not hold the commit, or its tree cannot be laid out safely."""
    target = commit_folder(url, commit)

    def lay_out(staging: Path) -> Path:
        progress(f"fetching {url} at {commit[:12]} (once: kept in {target.parent})")
        repository = staging / "repository.git"
        _git(["init", "--quiet", "--bare", repository], url, cwd=base)
        try:
            _git(["-C", repository, "fetch", "--quiet", "--depth", "1", "--no-tags", _fetchable(url, base), commit],
                 url, cwd=base)
        except ValueError:
            _git(["ls-remote", "--heads", _fetchable(url, base)], url, cwd=base)  # reachable at all?
            raise ValueError(f"{url} has no commit {commit} (or does not serve a commit by its id); pin the full "
                             f"id of a commit the repository holds (git log, or the commit's page), or fix the "
                             f"url") from None
        archive = staging / "tree.tar"
        _git(["-C", repository, "archive", "--format=tar", f"--prefix={_TOP}/", "-o", archive, commit], url,
             cwd=base)
        return unpack_one_folder(url, archive, staging / "unpacked",
                                 fix="pin a commit whose tree keeps its files and links inside it")

    return fetch_once(url, target, lay_out)


def _fetchable(url: str, base: Path) -> str:
    """`url` as git fetches it: a plain relative path is the release folder's."""
    if "://" in url or url.startswith("/") or (":" in url.split("/", 1)[0]):  # a url, absolute, or scp-like host:
        return url
    return str(base / url)


def _git(args: list[object], url: str, *, cwd: Path) -> None:
    """Run git; a failure is a ValueError naming `url` with git's last line and the fix."""
    try:
        command.run(["git", *args], cwd=cwd if cwd.is_dir() else None, extra_env=_GIT_ENV, timeout=_TIMEOUT,
                    what="git")
    except ToolError as exc:
        # git's reason is its first `fatal:` line (more lines of advice follow it).
        lines = [line.strip() for line in exc.output.splitlines() if line.strip()]
        said = next((line.removeprefix("fatal:").strip() for line in lines if line.startswith("fatal:")),
                    lines[-1] if lines else str(exc))
        raise ValueError(f"{url}: git cannot fetch from it ({said}); check the url, the network and the "
                         f"access, then run again") from exc
