"""What a publish reports to a user when it cannot go on; no message ever holds a credential."""

from __future__ import annotations

from shipyard.errors import ShipyardError


class PublishError(ShipyardError):
    """A publish stopped; what was visible before is still visible, and a re-run resumes."""

    exit_code = 7


class MissingCredential(PublishError):
    """An environment variable release.yaml names for a target is unset: found before any upload."""

    exit_code = 2


class ImmutableFileError(PublishError):
    """A file name is already published with other bytes: published names never change bytes."""

    exit_code = 8


class GateBlocked(PublishError):
    """An artifact with a failing stable feature may not go to this channel."""

    exit_code = 9


class RetriesExhausted(PublishError):
    """A server kept failing; the message names the artifact, the server and the last response."""
