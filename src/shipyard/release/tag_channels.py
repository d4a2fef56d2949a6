"""Which channel a version tag publishes to: the one place release.yml's expression and
`shipyard ci plan` take it from.

release.yaml's channels are in promotion order: the first is nightly's, the last holds releases.
A plain tag (v1.7.0) goes to the last; a pre-release tag (v1.7.0-rc1, or any tag of a PEP 440
pre-release version such as 1.7.0rc1) goes to the first channel after nightly, and only when that
is not the last too: a candidate must never reach the channel that holds releases (PyPI behind it),
whatever channels are declared. With only nightly and release, a pre-release tag has nowhere to go
and the run fails in its plan job, naming the fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

# What release.yml's expression gives a pre-release tag when no channel may take it: no channel
# of release.yaml has this name (names are lower case, `[a-z0-9._-]`), so the plan job refuses it.
NO_PRERELEASE_CHANNEL = "NONE-for-a-pre-release-tag"
PIPELINE_FIX = "add `channels: {nightly: {gate: mark}, test: {gate: block}, release: {gate: block}}`"
PRERELEASE_FIX = ("add a channel between the first and the last (e.g. `test: {gate: block}` between nightly and "
                  "release): pre-release tags go there")


@dataclass(frozen=True)
class PipelineChannels:
    """The channels the release pipeline uses, from release.yaml's channels in promotion order."""

    nightly: str
    candidates: tuple[str, ...]  # what a manual release run may choose: every channel after nightly
    final: str  # the channel that holds releases
    prerelease: str | None  # where a pre-release tag goes; None: nowhere (only nightly and final)


def pipeline_channels(channels: Sequence[str]) -> PipelineChannels | None:
    """The pipeline's channels; None when fewer than two are declared (the pipeline needs a nightly
    channel and one that holds releases)."""
    names = list(channels)
    if len(names) < 2:
        return None
    return PipelineChannels(names[0], tuple(names[1:]), names[-1], names[1] if len(names) > 2 else None)


def is_prerelease_tag(tag: str, version: str) -> bool:
    """Whether `tag` (v1.7.0-rc1) is a pre-release's: an `-rc` suffix, or `version` itself a PEP
    440 pre-release (1.7.0rc1, 1.7.0b2)."""
    if "-rc" in tag:
        return True
    try:
        return Version(version).is_prerelease
    except InvalidVersion:
        return False


def tag_channel_problem(tag: str, version: str, channel: str, channels: Sequence[str]) -> str | None:
    """Why the run of `tag` may not publish to `channel` (one line with its fix), or None."""
    pipeline = pipeline_channels(channels)
    if pipeline is None or not is_prerelease_tag(tag, version):
        return None
    if pipeline.prerelease is None:
        return (f"tag {tag} is a pre-release, and release.yaml's channels ({', '.join(channels)}) have no channel "
                f"for one: the last, {pipeline.final}, holds releases; {PRERELEASE_FIX}")
    if channel == pipeline.final:
        return (f"tag {tag} is a pre-release and may not publish to {channel}, the channel that holds releases; "
                f"publish it to {pipeline.prerelease}")
    return None
