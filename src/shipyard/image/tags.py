"""The names of an image's tags: the one place that spells them. Which of them move:

- **versioned** `ember:1.7.0-cpu-runtime` (`<repo>:<version>-<kind>`): one build; never moves.
- **published** `ember:1.7.0-cpu-runtime-nightly` (the versioned tag and a channel): the
  registry's record of what a channel took; never moves (a publish refuses another image under it).
- **staging** `ember:1.7.0-cpu-runtime-nightly-stage-<id[:12]>`: where a publish pushes and
  verifies an image before its published tag exists; one per image, never moves.
- **moving** `ember:nightly-cpu-runtime` (`<repo>:<channel>-<kind>`): the channel's newest image
  of its kind, what `docker pull ember:nightly-cpu-runtime` gets; it moves forward only.

An image's kind is what the tag says it is besides its version: flavour and target, `cpu-runtime`,
`cuda11.8-devel`.
"""

from __future__ import annotations


def image_kind(flavour: str, target: str) -> str:
    """`cpu`, `runtime` → `cpu-runtime`."""
    return f"{flavour}-{target}"


def versioned_tag(repository: str, version: str, kind: str) -> str:
    """`ember`, `1.7.0`, `cpu-runtime` → `ember:1.7.0-cpu-runtime`."""
    return f"{repository}:{version}-{kind}"


def moving_tag(repository: str, channel: str, kind: str) -> str:
    """`ember`, `nightly`, `cpu-runtime` → `ember:nightly-cpu-runtime`."""
    return f"{repository}:{channel}-{kind}"


def published_tag(name: str, channel: str) -> str:
    """`ember:1.7.0-cpu-runtime` on `test` → `ember:1.7.0-cpu-runtime-test`."""
    return f"{name}-{channel}"


def staging_tag(name: str, channel: str, image_id: str) -> str:
    """The tag an image is pushed and verified under before its published tag exists: the same
    name on every re-run of the same image, another one for another image."""
    return f"{published_tag(name, channel)}-stage-{image_id.removeprefix('sha256:')[:12]}"


def kind_of(name: str, version: str) -> str | None:
    """The kind a versioned tag names (`ember:1.7.0-cpu-runtime`, `1.7.0` → `cpu-runtime`); None
    for a name that is not `<repo>:<version>-<kind>`."""
    _, _, tag = name.partition(":")
    kind = tag.removeprefix(f"{version}-")
    return kind if kind != tag and kind else None


def published_version(tag: str, kind: str, channel: str) -> str | None:
    """The version of a published tag of this kind and channel (`1.7.0-cpu-runtime-nightly` →
    `1.7.0`); None for any other tag (another kind or channel, a staging or a moving tag)."""
    version = tag.removesuffix(f"-{kind}-{channel}")
    return version if version != tag and version else None
