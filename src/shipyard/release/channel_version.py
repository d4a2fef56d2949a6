"""The version an artifact carries on its channel: the one place that says it.

Test and release get the plain version (`1.7.0`). Nightly gets a PEP 440 development version of
it, dated by the source commit in UTC, as PyTorch's nightlies are (`1.7.0.dev20261201`, a wheel
`1.7.0.dev20261201+cpu`): every commit's nightly has names of its own, so publishing, which
refuses a published name with other bytes, takes the next day's nightly, and the same commit
built again has the same names and bytes (a no-op). One nightly a day: a second commit on the same
UTC day has the same names, and publishing refuses it (exit 8) as it refuses any changed file.

The date is the one the build already stamps into its artifacts (host.source_tree.git_info's
commit_time: SOURCE_DATE_EPOCH when set, else HEAD's commit time). A component with a version of
its own (release.yaml `components.<c>.version`, its project's) gets `.devYYYYMMDD` on that one.
"""

from __future__ import annotations

import datetime
from collections.abc import Collection

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from shipyard.errors import ChannelVersionError

# The channel of development versions (as images.channel names it); every other takes plain ones.
NIGHTLY = "nightly"


def commit_day(commit_time: int) -> str:
    """The commit's UTC date as YYYYMMDD (1606780800 -> '20201201')."""
    return datetime.datetime.fromtimestamp(commit_time, tz=datetime.UTC).strftime("%Y%m%d")


def channel_version(version: str, channel: str | None, commit_time: int) -> str:
    """`version` as it is published on `channel`: `version.devYYYYMMDD` (the commit's UTC day) on
    nightly, `version` itself on any other channel (test, release) and with no channel (a build for
    none in particular). A local label stays last (`1.7.0+cpu` -> `1.7.0.dev20261201+cpu`).
    ChannelVersionError (exit 2) for a version that is not PEP 440, or that already is a
    development release on nightly (a nightly's version is made here, from a plain one)."""
    try:
        parsed = Version(version)
    except InvalidVersion:
        raise ChannelVersionError(f"version {version!r} is not a PEP 440 version; write e.g. 1.7.0") from None
    if channel != NIGHTLY:
        return version
    if parsed.is_devrelease:
        raise ChannelVersionError(f"version {version}: already a development version; a nightly's version is the "
                                  f"plain one plus .devYYYYMMDD: state the plain version (e.g. "
                                  f"{parsed.base_version}) in release.yaml or the project")
    local = f"+{parsed.local}" if parsed.local else ""
    return f"{parsed.public}.dev{commit_day(commit_time)}{local}"


def is_development(version: str) -> bool:
    """Whether `version` is a PEP 440 development release (a nightly's)."""
    try:
        return Version(version).is_devrelease
    except InvalidVersion:
        return False


def is_version_of(version: str, release_version: str) -> bool:
    """Whether `version` is `release_version` itself or one of its nightly versions (any day)."""
    if version == release_version:
        return True
    try:
        parsed = Version(version)
    except InvalidVersion:
        return False
    return parsed.is_devrelease and version == f"{release_version}.dev{parsed.dev}"


def require_channel_version(version: str, channel: str, what: str) -> None:
    """Refuse (ChannelVersionError, one line, exit 2) a development version bound for a channel other
    than nightly: test and release hold plain versions only, promoted or built for them."""
    if channel != NIGHTLY and is_development(version):
        raise ChannelVersionError(
            f"{what}: version {version} is a nightly development version, and channel {channel} takes plain "
            f"versions only; build it for {channel} (--publish-channel {channel}), or publish this build to nightly")


def build_version(version: str, *, nightly: bool, commit_time: int) -> str:
    """The version a build gives its artifact: the nightly one when built for nightly
    (`--publish-channel nightly`), else `version`."""
    return channel_version(version, NIGHTLY if nightly else None, commit_time)


# The clauses whose version moves with a nightly sibling: the ones that name the version it is.
_FOLLOWING_OPERATORS = ("==", ">=", "~=")


def nightly_requirement(requirement: str, siblings: Collection[str], commit_time: int) -> str:
    """A Requires-Dist value of a nightly: a requirement on a component of the same release (its
    name in `siblings`) has each ==, >= and ~= version made that nightly's (`ember==1.7.0` ->
    `ember==1.7.0.dev20261201`), because the nightly index holds no plain version of it and
    1.7.0.dev20261201 < 1.7.0; every other requirement is returned as it is."""
    try:
        parsed = Requirement(requirement)
    except InvalidRequirement:
        return requirement
    if canonicalize_name(parsed.name) not in {canonicalize_name(s) for s in siblings}:
        return requirement
    clauses = []
    for clause in parsed.specifier:
        version = clause.version
        if clause.operator in _FOLLOWING_OPERATORS and "*" not in version and not is_development(version):
            version = channel_version(version, NIGHTLY, commit_time)
        clauses.append(f"{clause.operator}{version}")
    if not clauses:
        return requirement
    parsed.specifier = SpecifierSet(",".join(sorted(clauses)))
    return str(parsed)
