"""dist/conda: a conda channel that is never visible half-written.

`dist/conda` is a symlink to one generation folder, `dist/.conda-gen-<n>`. A publish stages the
next generation beside it (hard links of the packages it keeps, copies of the new ones, every
file 0644: rattler-build writes 0600), indexes it with py-rattler (`repodata.json` and
`repodata.json.zst` per subdir, sha256/md5/size of every package), checks that the index lists
every package with the file's own sha256 and size, and only then replaces the symlink with
os.replace, then removes the older generations. A failure at any step removes the staged
generation and leaves the channel exactly as it was. A first run that finds `dist/conda` as a
plain folder (an older layout, or a channel copied in by hand) exchanges it for the symlink in
one step (Linux renameat2 RENAME_EXCHANGE), so readers never see the channel missing.

Publishers serialise on an flock of `dist/.conda.lock`; a published channel (publish/conda_channel.py)
also has each of them check, with the lock held, that no name it adds is live with other bytes.
Readers (the test server, an HTTP server in front of dist/) resolve the symlink per request: they
see one generation or the other.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zstandard

from shipyard.conda.device_code import recorded_cuda_archs
from shipyard.conda.rattler_glue import index_channel
from shipyard.errors import ChannelError, GenerationError
from shipyard.plumbing.file_lock import exclusive
from shipyard.plumbing.generations import (
    current_generation,
    next_generation,
    remove_unused_generations,
    switch,
)
from shipyard.plumbing.hashing import sha256_of
from shipyard.record.manifest import ArtifactRecord, FeatureRecord

PACKAGE_SUFFIXES = (".conda", ".tar.bz2")


@dataclass(frozen=True)
class ChannelUpdate:
    """What a publish did, by `subdir/file name`: new names, names whose bytes changed (a rebuild),
    names published again with the same sha256; and every package the channel now holds."""

    channel: Path
    generation: Path
    added: tuple[str, ...]
    replaced: tuple[str, ...]
    unchanged: tuple[str, ...]
    packages: tuple[str, ...]


@dataclass(frozen=True)
class _Incoming:
    source: Path
    subdir: str

    @property
    def key(self) -> str:
        return f"{self.subdir}/{self.source.name}"


def package_subdir(package: Path) -> str:
    """The subdir (noarch, linux-64, …) a package belongs in, from its own info/index.json."""
    from rattler.package import IndexJson

    if not package.is_file() or not package.name.endswith(PACKAGE_SUFFIXES):
        raise ChannelError(f"{package}: not a conda package file (expected a .conda or .tar.bz2 that "
                           f"rattler-build wrote); check the build's output folder")
    try:
        index = IndexJson.from_package_archive(package)
    except Exception as exc:  # py-rattler raises its own exception types for unreadable archives
        raise ChannelError(f"{package}: cannot read info/index.json ({type(exc).__name__}: {exc}); "
                           f"the file is damaged or not a conda package: rebuild it") from exc
    subdir = index.subdir
    stem = f"{index.name.normalized}-{index.version}-{index.build}"
    if package.name not in (stem + suffix for suffix in PACKAGE_SUFFIXES):
        raise ChannelError(f"{package}: the file name does not match its info/index.json ({stem}); a channel "
                           f"lists a package only under name-version-build: keep the name rattler-build gave it")
    if not subdir or "/" in subdir or subdir.startswith("."):
        raise ChannelError(f"{package}: info/index.json names no usable subdir (got {subdir!r}); rebuild it")
    return subdir


def place_packages(packages: Sequence[Path], dist: Path) -> None:
    """Put conda packages into `dist`'s channel (dist/conda) and re-index it in one step
    (record/merge.py's `place`)."""
    publish_packages(dist / "conda", packages)


def publish_packages(channel: Path, packages: Sequence[Path], *, expected: Mapping[str, str] | None = None,
                     keep_previous: bool = False,
                     taken: Callable[[Sequence[NameTaken]], Exception] | None = None) -> ChannelUpdate:
    """Add `packages` to the channel at `channel` (e.g. dist/conda) and re-index it atomically.
    A package with the file name of one already there replaces it. `expected` (file name: sha256,
    the manifest's) is checked against the staged copies and the index before the switch, so a
    file that changed after it was tested never becomes visible. `keep_previous` keeps the
    generation that was live until the switch, for readers still downloading from it (a served
    channel); otherwise only the live generation stays. With `taken` (a published channel, whose names
    never change bytes), a package the live generation holds under its name with other bytes is not
    replaced: checked with the lock held, so that of two publishers racing under one name the second
    finds the first's package; nothing is staged and the exception `taken` makes of every such name
    is raised."""
    incoming = [_Incoming(p.resolve(), package_subdir(p)) for p in packages]
    seen: dict[str, Path] = {}
    for item in incoming:
        if item.key in seen and sha256_of(seen[item.key]) != sha256_of(item.source):
            raise ChannelError(f"{item.source} and {seen[item.key]}: two different packages named "
                               f"{item.key} in one publish; publish one of them")
        seen[item.key] = item.source
    channel.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(channel.parent / f".{channel.name}.lock"):
        current = current_generation(channel)
        if taken is not None and current is not None and (held := _held_with_other_bytes(current, incoming)):
            raise taken(held)
        generation = next_generation(channel)
        try:
            added, replaced, unchanged, listed = _stage(generation, current, incoming)
            _index(generation)
            verify_index(generation)
            _verify_expected(generation, incoming, expected or {})
            _switch(channel, generation)
        except BaseException:
            if current_generation(channel) != generation:
                shutil.rmtree(generation, ignore_errors=True)
            raise
        remove_unused_generations(channel, previous=current if keep_previous else None)
    return ChannelUpdate(channel=channel, generation=generation, added=tuple(added), replaced=tuple(replaced),
                         unchanged=tuple(unchanged), packages=tuple(listed))


@dataclass(frozen=True)
class NameTaken:
    """A package name (`subdir/file name`) a channel holds with other bytes than the one offered."""

    key: str
    served: str  # the sha256 of the package the channel holds
    offered: str


def _held_with_other_bytes(current: Path, incoming: Sequence[_Incoming]) -> list[NameTaken]:
    out = []
    for item in incoming:
        held = current / item.key
        if held.is_file() and (served := sha256_of(held)) != (offered := sha256_of(item.source)):
            out.append(NameTaken(item.key, served, offered))
    return out


def _stage(generation: Path, current: Path | None,
           incoming: list[_Incoming]) -> tuple[list[str], list[str], list[str], list[str]]:
    generation.mkdir()
    os.chmod(generation, 0o755)
    (generation / "noarch").mkdir(mode=0o755)  # index_fs always indexes noarch: it must exist
    new = {item.key: item for item in incoming}
    added: list[str] = []
    replaced: list[str] = []
    unchanged: list[str] = []
    kept: list[str] = []
    old = {f"{p.parent.name}/{p.name}": p for p in _package_files(current)} if current else {}
    for key, path in sorted(old.items()):
        if key in new:
            continue
        _place(path, generation / key, link=True)
        kept.append(key)
    for key, item in sorted(new.items()):
        if key in old:
            (unchanged if sha256_of(old[key]) == sha256_of(item.source) else replaced).append(key)
        else:
            added.append(key)
        _place(item.source, generation / key, link=False)
    return added, replaced, unchanged, sorted([*kept, *new])


def _package_files(folder: Path) -> Iterable[Path]:
    for subdir in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for path in sorted(subdir.iterdir()):
            if path.is_file() and path.name.endswith(PACKAGE_SUFFIXES) and not path.name.startswith("."):
                yield path


def _place(source: Path, target: Path, *, link: bool) -> None:
    """A package in the staged generation, 0644. A kept package is a hard link when its mode is
    already right (changing a shared inode's mode would change the live channel's file too)."""
    target.parent.mkdir(mode=0o755, exist_ok=True)
    if link and (source.stat().st_mode & 0o777) == 0o644:
        try:
            os.link(source, target)
            return
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
                raise
    shutil.copyfile(source, target)
    os.chmod(target, 0o644)


def _index(folder: Path) -> None:
    """repodata.json and repodata.json.zst for every subdir of `folder`, written by py-rattler."""
    try:
        index_channel(folder)
    except Exception as exc:
        raise ChannelError(f"{folder}: py-rattler could not index the channel ({type(exc).__name__}: {exc}); "
                           f"the published channel is unchanged") from exc


def verify_index(folder: Path) -> None:
    """Every package file of every subdir is in both repodata.json and repodata.json.zst, with
    its own sha256 and size, and the index lists nothing else."""
    for subdir in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        on_disk = {p.name: p for p in subdir.iterdir()
                   if p.is_file() and p.name.endswith(PACKAGE_SUFFIXES) and not p.name.startswith(".")}
        plain = subdir / "repodata.json"
        packed = subdir / "repodata.json.zst"
        if not plain.is_file() or not packed.is_file():
            raise ChannelError(f"{subdir}: the index wrote no repodata.json and repodata.json.zst; "
                               f"the published channel is unchanged")
        data = json.loads(plain.read_bytes())
        if json.loads(zstandard.ZstdDecompressor().decompressobj().decompress(packed.read_bytes())) != data:
            raise ChannelError(f"{packed}: does not hold the same index as {plain.name}; the published "
                               f"channel is unchanged")
        listed: dict[str, Any] = {**data.get("packages", {}), **data.get("packages.conda", {})}
        if set(listed) != set(on_disk):
            raise ChannelError(f"{plain}: lists {sorted(set(listed) - set(on_disk))} that are not there and "
                               f"misses {sorted(set(on_disk) - set(listed))}; the published channel is unchanged")
        for name, path in on_disk.items():
            record = listed[name]
            if record.get("sha256") != sha256_of(path) or record.get("size") != path.stat().st_size:
                raise ChannelError(f"{plain}: {name}'s sha256/size in the index do not match the file; "
                                   f"the published channel is unchanged")
        for index_file in subdir.iterdir():
            if index_file.name.startswith("repodata"):
                os.chmod(index_file, 0o644)


def _verify_expected(generation: Path, incoming: Sequence[_Incoming], expected: Mapping[str, str]) -> None:
    """Each new package's staged copy and its index entry have the sha256 `expected` names for it."""
    for item in incoming:
        want = expected.get(item.source.name)
        if want is None:
            continue
        staged = generation / item.key
        data = json.loads((staged.parent / "repodata.json").read_bytes())
        listed = {**data.get("packages", {}), **data.get("packages.conda", {})}.get(staged.name, {}).get("sha256")
        digest = sha256_of(staged)
        if digest != want or listed != want:
            raise ChannelError(f"{item.source}: the staged copy has sha256 {digest} (index: {listed}), the manifest "
                               f"records {want}; the file changed after it was tested, and the published channel is "
                               f"unchanged: rebuild, do not publish it")


def _switch(channel: Path, generation: Path) -> None:
    try:
        switch(channel, generation)
    except GenerationError as exc:
        raise ChannelError(str(exc)) from exc


def conda_artifact_record(package: Path, *, channel: Path, cell_id: str, component: str, variant: str,
                          variant_tag: str, platform: str, python: str | None, version: str,
                          features: Iterable[FeatureRecord], tests: dict[str, Any] | None,
                          build: dict[str, Any], proven_by: tuple[str, ...] = ()) -> ArtifactRecord:
    """The manifest record of a published package: package type "conda", path relative to the
    dist folder (the channel's parent) through the channel's stable name, e.g. conda/noarch/x.conda,
    with the CUDA archs its about.json records (what its build's arch check read from its binaries)."""
    published = channel / package_subdir(package) / package.name
    if not published.is_file():
        raise ChannelError(f"{package.name}: not in the channel {channel}; publish it (publish_packages) "
                           f"before recording it in the manifest")
    return ArtifactRecord(
        name=package.name, path=published.relative_to(channel.parent).as_posix(), sha256=sha256_of(published),
        size=published.stat().st_size, cell_id=cell_id, component=component, package_type="conda",
        variant=variant, variant_tag=variant_tag, platform=platform, python=python, version=version,
        features=tuple(features), tests=tests, build=build, cuda_archs=recorded_cuda_archs(published),
        proven_by=proven_by)
