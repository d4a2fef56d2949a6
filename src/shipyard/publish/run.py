"""One publish (`shipyard publish --channel C`) or promotion (`shipyard promote V --from A --to B`)
through every selected target.

Order, so that nothing changes on a server until everything that can be known is known: the
channel and targets exist; every credential variable is set; the gate passes; every local file
matches the manifest; every target's listing shows no published name with other bytes
(ImmutableFileError names both hashes); files already there with the same bytes are left alone.
Only then does each target release what is new, and only when every target shows the whole
release does any move the names that follow a channel's newest release (a registry's moving tags).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TypeVar

from shipyard.errors import PublishError, ShipyardError, UsageError, nearest
from shipyard.plumbing.progress import Progress
from shipyard.plumbing.retry import RetryPolicy
from shipyard.publish.conda_channel import CondaChannelBackend
from shipyard.publish.credentials import Credentials, credentials_for, renewal_for
from shipyard.publish.devpi import DevpiBackend
from shipyard.publish.journal import Journal
from shipyard.publish.plan import PublishFile, files_for
from shipyard.publish.pypi import PypiBackend
from shipyard.publish.registry import RegistryBackend
from shipyard.publish.s3_conda import S3CondaBackend
from shipyard.publish.s3_tree import S3TreeBackend
from shipyard.publish.static_tree import StaticTreeBackend
from shipyard.publish.target import Backend, TargetContext, name_taken, names_taken
from shipyard.record.gate import Gating, gate
from shipyard.record.manifest import ArtifactRecord, Manifest, release_manifest
from shipyard.redaction import redact
from shipyard.release.channel_version import NIGHTLY, require_channel_version
from shipyard.release.destinations import S3_CONDA_ROUTE, PublishTarget, ReleaseChannel
from shipyard.release.kinds import WHEEL, kind_of, kinds_taken_by
from shipyard.release.spec import Spec

T = TypeVar("T")
BACKENDS: dict[str, type[Backend]] = {"devpi": DevpiBackend, "pypi": PypiBackend, "static": StaticTreeBackend,
                                      "conda": CondaChannelBackend, "docker": RegistryBackend, "s3": S3TreeBackend,
                                      S3_CONDA_ROUTE: S3CondaBackend}


@dataclass(frozen=True)
class PublishRequest:
    channel: str
    dist: Path
    state: Path
    targets: tuple[str, ...] = ()  # empty: every target of release.yaml
    policy: RetryPolicy = RetryPolicy()


@dataclass
class TargetReport:
    target: str
    where: str
    uploaded: list[PublishFile] = field(default_factory=list)
    unchanged: list[PublishFile] = field(default_factory=list)
    moving: list[str] = field(default_factory=list)  # what the names that follow the newest release did


@dataclass
class PublishReport:
    channel: str
    version: str
    gating: Gating
    targets: list[TargetReport]
    # The manifest's artifacts of a kind this channel does not take (an sdist on nightly), by name.
    held_back: tuple[str, ...] = ()


def load_manifest(spec: Spec, dist: Path) -> Manifest:
    """dist/manifest.json, each of its records a cell of `spec`'s release (check_release_names)."""
    return release_manifest(dist / "manifest.json", spec.release, "build first (shipyard build --variant cpu, "
                                                                  "shipyard conda build --variant cpu) or pass --dist")


def release_channel(spec: Spec, name: str) -> ReleaseChannel:
    channels = spec.release.channels
    if name not in channels:
        hint = nearest(name, channels)
        raise UsageError(f"--channel {name}: release.yaml names no such channel (channels: {', '.join(channels)})"
                         + (f"; did you mean {hint!r}?" if hint else ""))
    return channels[name]


def select_targets(spec: Spec, names: Sequence[str]) -> list[PublishTarget]:
    targets = spec.release.publish
    for name in names:
        if name not in targets:
            hint = nearest(name, targets)
            raise UsageError(f"--target {name}: release.yaml's publish names no such target "
                             f"(targets: {', '.join(targets)})" + (f"; did you mean {hint!r}?" if hint else ""))
    return [targets[n] for n in (names or list(targets))]


class Session:
    """The targets of one run with their credentials (read up front) and one journal each."""

    def __init__(self, spec: Spec, targets: Sequence[PublishTarget], needed: Sequence[PublishTarget],
                 state: Path, policy: RetryPolicy, progress: Progress) -> None:
        creds: dict[str, Credentials] = {t.name: credentials_for(t, policy) for t in needed}  # all before any upload
        # urllib3 logs every request line at DEBUG (`-v`), and a conda URL carries its token there.
        logging.getLogger("urllib3").setLevel(max(logging.getLogger("urllib3").getEffectiveLevel(), logging.INFO))
        self.backends: dict[str, Backend] = {}
        for target in targets:
            ctx = TargetContext(target=target, root=spec.root, credentials=creds.get(target.name, Credentials()),
                                policy=policy, journal=Journal(state / "publish" / f"{target.name}.jsonl"),
                                scrub=redact, progress=progress,
                                renew=renewal_for(target, policy) if target.name in creds else None)
            self.backends[target.name] = BACKENDS[target.route](ctx)

    def scrub(self, text: str) -> str:
        return redact(text)


def publish(spec: Spec, request: PublishRequest, progress: Progress = lambda _: None) -> PublishReport:
    """Publish dist/manifest.json's artifacts to `request.channel`; resumable, idempotent."""
    channel = release_channel(spec, request.channel)
    targets = select_targets(spec, request.targets)
    for t in targets:
        if t.name in request.targets and not t.takes(channel.name):
            raise UsageError(f"--target {t.name} --channel {channel.name}: release.yaml's publish.{t.name}.channels "
                             f"names {', '.join(t.channels)} only; publish to one of those, or add {channel.name} "
                             f"there")
    manifest = load_manifest(spec, request.dist)
    # Nightly takes development versions (a new one per commit day); test and release plain ones.
    for version in sorted({manifest.version, *(a.version for a in manifest.artifacts)}):
        require_channel_version(version, channel.name, f"publish --channel {channel.name}: "
                                                       f"{request.dist / 'manifest.json'}")
    held_back = held_back_from(channel.name, manifest.artifacts)
    sent = [a for a in manifest.artifacts if a.name not in held_back]
    gating = gate(channel, sent, statuses=spec.statuses, records=manifest.artifacts)
    derived = request.state / "publish" / "plain"
    # A release of pure packages only puts them in every variant's index (ember's go beside its native wheels).
    pure_only = not any(c.kind != "python-pure" for c in spec.release.components.values()
                        if WHEEL.name in c.package_types)
    tags = tuple(v.tag for v in spec.release.variants.values()) if pure_only else ()
    plans = {t.name: files_for(t, sent, request.dist, derived, tags) if t.takes(channel.name) else []
             for t in targets}
    session = Session(spec, targets, [t for t in targets if plans[t.name]], request.state, request.policy, progress)
    report = _release(session, channel.name, manifest.version, gating, plans)
    report.held_back = held_back
    return report


def held_back_from(channel: str, artifacts: Sequence[ArtifactRecord]) -> tuple[str, ...]:
    """The names of `artifacts` that `channel` does not take: on nightly, those of a kind that is
    not published there (an sdist, whose version is the project's, not the nightly's)."""
    if channel != NIGHTLY:
        return ()
    return tuple(a.name for a in artifacts if not kind_of(a.package_type).on_nightly)


def _release(session: Session, channel: str, version: str, gating: Gating,
             plans: dict[str, list[PublishFile]]) -> PublishReport:
    reports: dict[str, TargetReport] = {}
    new: dict[str, list[PublishFile]] = {}
    conflicts: list[str] = []
    for name, files in plans.items():
        backend = session.backends[name]
        reports[name] = TargetReport(name, backend.describe(channel))
        if not files:
            continue
        shown = backend.shown(channel, files)
        new[name] = []
        for f in files:
            served = shown.get((f.index, f.filename))
            if served is None:
                new[name].append(f)
            elif served == f.sha256:
                reports[name].unchanged.append(f)
            elif (served := backend.settled_sha256(f, served)) == f.sha256:
                reports[name].unchanged.append(f)  # it was being written by a publish of the same bytes
            else:
                conflicts.append(name_taken(name, f"{channel}/{f.index}", f.filename, served, f.sha256))
    if conflicts:
        raise names_taken(conflicts, outcome="nothing was uploaded")
    for name, files in new.items():
        if files:
            session.backends[name].preflight(files)  # e.g. the engine holds every image: before any upload
    for name, files in new.items():
        if files:
            if gating.marked:  # nightly took artifacts with a stable feature not proven: the journal says so
                session.backends[name].ctx.journal.record(
                    "marked", channel=channel, notes=[str(n) for n in gating.marked
                                                      if n.artifact in {f.artifact for f in files}])
            _scrubbed(session, name, partial(session.backends[name].release, channel, files))
            reports[name].uploaded.extend(files)
    # Last, once every target shows the whole release (resumed runs too: every file unchanged).
    for name, report in reports.items():
        visible = report.uploaded + report.unchanged
        if visible:
            report.moving.extend(_scrubbed(session, name, partial(session.backends[name].advance, channel, visible)))
    return PublishReport(channel, version, gating, list(reports.values()))


def _scrubbed(session: Session, name: str, step: Callable[[], T]) -> T:
    """`step` of target `name`; a library's error is reported without any credential in it."""
    try:
        return step()
    except ShipyardError:
        raise
    except Exception as exc:
        raise PublishError(session.scrub(f"{name}: {type(exc).__name__}: {exc}")) from None


@dataclass(frozen=True)
class PromoteRequest:
    version: str
    source: str
    destination: str
    dist: Path  # where dist/manifest.json is: the record of what was tested (no file of dist is sent)
    state: Path
    targets: tuple[str, ...] = ()
    policy: RetryPolicy = RetryPolicy()


def promote(spec: Spec, request: PromoteRequest, progress: Progress = lambda _: None) -> PublishReport:
    """Copy version `request.version` from one channel to a later one: the bytes that channel
    serves, checked against the manifest, without rebuilding."""
    source = release_channel(spec, request.source)
    destination = release_channel(spec, request.destination)
    order = list(spec.release.channels)
    if order.index(destination.name) <= order.index(source.name):
        raise UsageError(f"promote --from {source.name} --to {destination.name}: promotion goes forward only "
                         f"({' → '.join(order)})")
    require_channel_version(request.version, destination.name, f"promote {request.version} --to {destination.name}")
    manifest = load_manifest(spec, request.dist)
    artifacts = [a for a in manifest.artifacts if a.version == request.version]
    if not artifacts:
        held = ", ".join(sorted({a.version for a in manifest.artifacts})) or "none"
        raise UsageError(f"promote {request.version}: {request.dist / 'manifest.json'} holds no artifact of version "
                         f"{request.version} (its artifacts' versions: {held}); promote one of those, or pass the "
                         f"--dist of that version's build")
    gating = gate(destination, artifacts, statuses=spec.statuses, records=manifest.artifacts)
    targets = select_targets(spec, request.targets)
    if any(t.kind == "pypi" for t in targets if t.name in request.targets):
        raise UsageError(f"promote --target {', '.join(request.targets)}: a pypi target is one index without "
                         f"channels, so nothing moves between them; publish to it from the tested dist instead "
                         f"(shipyard publish --channel {destination.name} --target <name>), which checks every "
                         f"file against the manifest")
    # A pypi index has no channels to copy between (see above); the others take the channel they name.
    targets = [t for t in targets if t.kind != "pypi" and t.takes(destination.name)]
    needed = [t for t in targets if any(a.package_type in kinds_taken_by(t.route) for a in artifacts)]
    session = Session(spec, targets, needed, request.state, request.policy, progress)
    plans = {t.name: _copied(session.backends[t.name], t, source.name, request, artifacts) for t in targets}
    return _release(session, destination.name, request.version, gating, plans)


def _copied(backend: Backend, target: PublishTarget, channel: str, request: PromoteRequest,
            artifacts: list[ArtifactRecord]) -> list[PublishFile]:
    """The files of the version in the source channel, fetched and checked: a name the manifest
    records must have the manifest's sha256; every artifact for this target must be there."""
    mine = {a.name: a for a in artifacts if a.package_type in kinds_taken_by(target.route)}
    if not mine:
        return []
    # The release's files: those the manifest names (a conda mutex has its own version, 1.0) and
    # those of the version (the PyPI flavour's rewrites, which the manifest does not name).
    # A registry is read per repository (most do not list theirs): an image's name is repo:tag.
    repos = sorted({name.split(":", 1)[0] for name in mine}) if target.kind == "docker" else None
    listed = [e for e in backend.listing(channel, projects=repos) if e.filename in mine or e.version == request.version
              or e.version.split("+")[0] == request.version]
    missing = sorted(set(mine) - {e.filename for e in listed})
    if missing:
        raise PublishError(f"promote {request.version}: {target.name}: {channel} does not hold "
                           f"{', '.join(missing)}; publish to {channel} first (shipyard publish --channel {channel})")
    files = []
    for entry in listed:
        record = mine.get(entry.filename)
        if record is not None and record.sha256 != entry.sha256:
            raise PublishError(f"promote {request.version}: {target.name}: {channel} serves {entry.filename} with "
                               f"sha256 {entry.sha256}, the manifest records {record.sha256}; it is not what was "
                               f"tested: do not promote it")
        path = backend.fetch(entry, request.state / "publish" / "promote" / entry.sha256)
        fetched = backend.fetched_sha256(path)
        if fetched != entry.sha256:
            raise PublishError(f"promote {request.version}: {target.name}: {entry.filename} downloaded from {channel} "
                               f"has sha256 {fetched}, its index says {entry.sha256}; try again")
        files.append(PublishFile(entry.index, entry.filename, path, entry.sha256, entry.project, entry.version,
                                 record.name if record else entry.filename))
    return files
