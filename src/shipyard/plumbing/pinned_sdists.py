"""Source distributions pinned by URL and sha256 (as conda-forge recipes pin theirs): fetched once
into shipyard's cache, checked against the pin, and unpacked into a folder named by the sha256.

What a release names by sha256 never changes, so the folder is the cache: present means fetched
and checked. Nothing lands there before the bytes match the pin and every member unpacked inside
(tarfile's "data" filter: no absolute names, no `..`, no links out, no device files). A problem is
a ValueError carrying one line, its fix included (url, expected and got for a mismatch), which
validate turns into an issue of release.yaml.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

from shipyard.plumbing.cache_folder import cache_root
from shipyard.plumbing.progress import Progress

SDIST_FOLDER = "sdists"
_CHUNK = 1 << 20
_TIMEOUT = 60.0  # seconds to connect, and between two reads


def sdist_folder(sha256: str) -> Path:
    """The project folder an sdist with this sha256 unpacks to (present once fetched)."""
    return cache_root() / SDIST_FOLDER / sha256


def local_file(url: str, base: Path) -> Path | None:
    """The file a `file://` URL or a plain path (relative to `base`) names; None for a remote URL."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        return Path(unquote(parts.path))
    if parts.scheme in ("http", "https"):
        return None
    return base / url


def fetch_sdist(url: str, sha256: str, *, base: Path, progress: Progress) -> Path:
    """The unpacked project folder of the sdist at `url` (a `file://` URL or a path relative to
    `base` works too), fetched and checked once; ValueError (one line) when it cannot be had, does
    not match `sha256`, or is not a safe tarball with a single top folder."""

    def lay_out(staging: Path) -> Path:
        archive = staging / "sdist"
        got = _download(url, archive, base=base, progress=progress)
        if got != sha256:
            raise ValueError(f"{url} has sha256 {got}, not the pinned {sha256}; pin the sha256 of the file "
                             f"the url serves (sha256sum, or the index's page), or fix the url")
        return unpack_one_folder(url, archive, staging / "tree", fix="pin an sdist as its index serves it")

    return fetch_once(url, sdist_folder(sha256), lay_out)


def fetch_once(url: str, target: Path, lay_out: Callable[[Path], Path]) -> Path:
    """`target` (a folder of shipyard's cache that, once there, is what `url` pinned for good), made
    once: `lay_out(staging)` makes the folder in a staging folder beside `target` (the same file
    system: one rename puts it in place) that is removed whatever happens, so a failure leaves
    nothing. ValueError (one line) when the cache cannot be written."""
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name[:12]}-", dir=target.parent))
    try:
        top = lay_out(staging)
        try:
            os.replace(top, target)
        except OSError:
            if not target.is_dir():  # else another process put the same pinned folder there first
                raise
    except OSError as exc:
        raise ValueError(f"cannot fetch {url} into {target.parent}: {exc.strerror or exc}; make the cache "
                         f"writable ($SHIPYARD_CACHE names another)") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _download(url: str, dest: Path, *, base: Path, progress: Progress) -> str:
    """Copy `url` into `dest`; return the sha256 of its bytes."""
    digest = hashlib.sha256()
    source = local_file(url, base)
    progress(f"fetching {url} (once: kept in {dest.parent.parent})")
    with dest.open("wb") as out:
        if source is not None:
            if not source.is_file():
                raise ValueError(f"{url}: no such file ({source}); fix the url (a path is relative to "
                                 f"release.yaml)")
            with source.open("rb") as data:
                while chunk := data.read(_CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
            return digest.hexdigest()
        import requests  # only a download needs the HTTP stack, which every command would pay for at start

        try:
            with requests.get(url, stream=True, timeout=_TIMEOUT) as response:
                if response.status_code != 200:
                    raise ValueError(f"{url}: the server answered {response.status_code} {response.reason}; "
                                     f"fix the url")
                for chunk in response.iter_content(_CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
        except requests.RequestException as exc:
            raise ValueError(f"{url}: cannot download ({type(exc).__name__}); check the url and the "
                             f"network, then run again") from exc
    return digest.hexdigest()


def _escaping_member(tar: tarfile.TarFile) -> str | None:
    """The name of the first member that would land outside the folder it is unpacked into, link out
    of it, or is not a plain file, folder or link (a device, a FIFO); None when every one is safe."""
    for member in tar.getmembers():
        parts = PurePosixPath(member.name).parts
        if member.name.startswith(("/", "\\")) or ".." in parts or not parts:
            return member.name
        if member.issym() or member.islnk():
            # a link's target, from the folder the link sits in (a hard link's: from the top)
            base = PurePosixPath(member.name).parent if member.issym() else PurePosixPath()
            target = PurePosixPath(os.path.normpath(base / member.linkname)) if member.linkname else None
            if target is None or member.linkname.startswith("/") or target.parts[:1] == ("..",):
                return member.name
        elif not (member.isfile() or member.isdir()):
            return member.name
    return None


def unpack_one_folder(url: str, archive: Path, into: Path, *, fix: str) -> Path:
    """Unpack the tarball `archive` (fetched from `url`) into `into` and return its single top folder;
    ValueError (one line ending in `fix`) for a member that would land outside, link out or is a device,
    an unreadable tarball, or another top than one folder."""
    into.mkdir()
    try:
        with tarfile.open(archive) as tar:
            if (member := _escaping_member(tar)) is not None:
                raise ValueError(f"{url}: refused: its member {member!r} would land outside its folder, link out "
                                 f"of it or is a device; {fix}")
            # The members are checked above on every Python; the data filter (3.11.4 and later, not
            # Debian 12's 3.11.2, which a CI job's container runs) also drops set-id bits.
            if hasattr(tarfile, "data_filter"):
                tar.extractall(into, filter="data")
            else:
                tar.extractall(into)  # noqa: S202 (every member checked by _escaping_member)
    except (tarfile.TarError, EOFError) as exc:
        raise ValueError(f"{url}: not a readable tarball ({exc}); {fix}") from exc
    entries = list(into.iterdir())
    if len(entries) != 1 or not entries[0].is_dir() or entries[0].is_symlink():
        raise ValueError(f"{url}: holds {', '.join(sorted(e.name for e in entries)) or 'nothing'} at its top, not "
                         f"the one folder (name-version/) of an sdist; {fix}")
    return entries[0]
