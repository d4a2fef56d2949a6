"""The interface every publish target implements, and what they share.

A target lists what a channel shows (`listing`), makes new files visible in a channel
(`release`: staged, verified by reading them back, then one switch per index), moves the names
that follow a channel's newest release once it is all visible (`advance`), and fetches a listed
file (`fetch`, for promotion). Immutability is checked twice: once above the targets (run.py),
from `listing`, before anything is uploaded; and again by each target at the moment it makes a name
visible, under its own lock or by the server's own refusal, since another publisher may have made
the same name visible in between (`name_taken` words both).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from shipyard.errors import ImmutableFileError, public_url
from shipyard.plumbing.atomic_files import copy_atomic
from shipyard.plumbing.hashing import sha256_of
from shipyard.plumbing.progress import Progress
from shipyard.plumbing.retry import RetryPolicy, wait_for
from shipyard.publish.credentials import Credentials
from shipyard.publish.journal import Journal
from shipyard.publish.plan import PublishFile
from shipyard.release.destinations import PublishTarget

Entry = TypeVar("Entry")


@dataclass(frozen=True)
class Listed:
    """A file a channel shows: where, its sha256 as the index states it, and where to fetch it."""

    index: str
    filename: str
    sha256: str
    project: str
    version: str
    url: str  # an http(s) URL, or a local path for the trees shipyard writes itself


@dataclass(frozen=True)
class TargetContext:
    target: PublishTarget
    root: Path  # release.yaml's folder: a target's `path` is relative to it
    credentials: Credentials
    policy: RetryPolicy
    journal: Journal
    scrub: Callable[[str], str]  # masks every credential of the run in a message
    progress: Progress
    # Fresh credentials for a target whose token expires within a run (trusted publishing):
    # credentials.renewal_for. None: `credentials` hold for the whole run.
    renew: Callable[[], Credentials] | None = None


class Backend(ABC):
    def __init__(self, ctx: TargetContext) -> None:
        self.ctx = ctx
        self.target = ctx.target

    @abstractmethod
    def listing(self, channel: str, *, indexes: Sequence[str] | None = None,
                projects: Sequence[str] | None = None) -> list[Listed]:
        """What the channel shows now (limited to these indexes and projects when given)."""

    @abstractmethod
    def release(self, channel: str, files: Sequence[PublishFile]) -> None:
        """Make `files` (none of them visible yet) visible in `channel`: each index all at once,
        and only after every one of its files was read back with the sha256 it should have. An
        index with no staging (pypi) cannot: it uploads every file, then reads each one back."""

    @abstractmethod
    def fetch(self, listed: Listed, dest: Path) -> Path:
        """Download a listed file into the folder `dest`; return its path."""

    def shown(self, channel: str, files: Sequence[PublishFile]) -> dict[tuple[str, str], str]:
        """The sha256 under which the channel shows each of `files`' names now, by (index, filename);
        absent: not published. From `listing`, unless a target can ask for exactly those names."""
        return {(e.index, e.filename): e.sha256 for e in self.listing(
            channel, indexes=sorted({f.index for f in files}), projects=sorted({f.project for f in files}))}

    def preflight(self, files: Sequence[PublishFile]) -> None:  # noqa: B027 - a hook, no-op by default
        """Whatever else must hold before any target uploads anything (files are checked already)."""

    def advance(self, channel: str, files: Sequence[PublishFile]) -> list[str]:
        """Once every file of the release is visible in `channel` (on every target), point the
        channel's moving names at them (a registry's `ember:nightly-cpu-runtime`), never at an older
        version than they name; what moved or stayed, one line each. Most targets have none."""
        return []

    def settled_sha256(self, f: PublishFile, served: str) -> str:
        """The sha256 the target serves under `f`'s name, `served` as a listing stated it, once it
        stops changing. A target that shows a file only whole (a staged switch, a server's own
        transaction) has `served`; one that stores an upload in two steps overrides this."""
        return served

    def fetched_sha256(self, path: Path) -> str:
        """The sha256 of what `fetch` returned (the file's; a registry's: the pulled image's id)."""
        return sha256_of(path)

    def describe(self, channel: str) -> str:
        """Where users find the channel (no credentials)."""
        return public_url(self.target.url)

    @property
    def folder(self) -> Path:
        """The folder a web server serves, for the targets shipyard writes itself (static, conda)."""
        if self.target.path is None:
            raise TypeError(f"publish target {self.target.name} ({self.target.kind}) has no folder")
        return (self.ctx.root / self.target.path).resolve()


def name_taken(target: str, where: str, filename: str, served: str, own: str) -> str:
    """The one line for a file name published with other bytes: the target, where, the file, the
    sha256 served (whoever published it first) and this run's."""
    return f"{target}: {where}: {filename} is published with sha256 {served}; this one has sha256 {own}"


def names_taken(lines: Sequence[str], *, outcome: str) -> ImmutableFileError:
    """Every `name_taken` line of a target (or a run), and what the run did about it (`outcome`)."""
    return ImmutableFileError(f"a published file name never changes its bytes; {outcome}:\n  " + "\n  ".join(lines)
                              + "\npublish a new version (or build number) instead")


def copy_file(source: Path, dest_dir: Path) -> Path:
    return copy_atomic(source, dest_dir / source.name)


def listed_within(files: Sequence[PublishFile], read: Callable[[], dict[str, Entry]], policy: RetryPolicy, *,
                  label: str) -> tuple[dict[str, Entry], list[str]]:
    """What `read` lists (by file name) once it lists every one of `files`: read again, with growing
    pauses, for up to the policy's `visible_within` seconds (an index may show an upload late). When
    that time ran out: the last read, and the names of `files` it still lacks."""
    last: dict[str, Entry] = {}

    def look() -> dict[str, Entry] | None:
        nonlocal last
        last = read()
        return last if all(f.filename in last for f in files) else None

    found = wait_for(look, policy, label=label)
    return (found, []) if found is not None else (last, [f.filename for f in files if f.filename not in last])
