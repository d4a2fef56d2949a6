"""What a pushed tag releases: `v<release.version>` the whole family, `<component>-v<version>` one
component at its own version (Release.component_version); `-rcN` after either makes it a
candidate (release/tag_channels.py says where candidates go). A tag of another version is refused:
the run would publish packages whose version is not the tag's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from shipyard.errors import UsageError, nearest
from shipyard.release.spec import Release

_RC = r"(-rc\d+)?"
# A component tag's name part: everything before the last `-v` that a digit follows, so a
# component named ember-variant-provider tags as ember-variant-provider-v1.7.0.
_COMPONENT_TAG = re.compile(r"(?P<name>.+)-v\d")


@dataclass(frozen=True)
class TagRelease:
    """What one tag releases: `component` None for the whole family, at `version`."""

    tag: str
    version: str
    component: str | None = None


def tag_release(release: Release, tag: str) -> TagRelease:
    """What `tag` releases, or UsageError (one line naming the tag, the version release.yaml gives
    and the fix) when it names another version or no component of release.yaml."""
    family = release.release.version
    if re.fullmatch(rf"v{re.escape(family)}{_RC}", tag):
        return TagRelease(tag, family)
    found = _COMPONENT_TAG.match(tag)
    name = found["name"] if found else ""
    if name not in release.components:
        if re.match(r"v\d", tag):
            raise UsageError(f"tag {tag}: release.yaml's release.version is {family}; tag v{family} (or "
                             f"v{family}-rcN), or change release.version first")
        if not name:
            raise UsageError(f"tag {tag}: a release tag is v<release.version> (the whole release) or "
                             f"<component>-v<its version> (one component); tag v{family}")
        hint = nearest(name, release.components)
        raise UsageError(f"tag {tag}: {name} is no component of release.yaml; "
                         + (f"did you mean {hint}-v{release.component_version(hint)}?" if hint else
                            f"tag <component>-v<version> with one of {', '.join(release.components)}"))
    version = release.component_version(name)
    if not re.fullmatch(rf"{re.escape(name)}-v{re.escape(version)}{_RC}", tag):
        where = (f"components.{name}.version" if release.components[name].version
                 else "release.version, as it sets no version of its own")
        raise UsageError(f"tag {tag}: release.yaml's version of {name} is {version} ({where}); tag "
                         f"{name}-v{version} (or {name}-v{version}-rcN), or change its version first")
    return TagRelease(tag, version, name)


def released_components(release: Release, ref: str | None) -> frozenset[str] | None:
    """The components a run of git ref `ref` (GITHUB_REF) releases: a component tag's one component;
    None (every component) for the family tag, a branch, or no ref. A tag of no component or of
    another version is refused (tag_release's UsageError)."""
    if not ref or not ref.startswith("refs/tags/"):
        return None
    return frozenset(filter(None, [tag_release(release, ref.removeprefix("refs/tags/")).component])) or None
