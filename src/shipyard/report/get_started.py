"""dist/report/get-started.html: pick an OS, a package manager, a compute platform and a channel,
and read the exact command that installs ember so, or why the release has no such build.

Every answer comes from release.yaml (platforms, variants, exclusions, publish targets, channels,
images) and from what dist/manifest.json holds: a command is shown only for a build that exists.
The page is one offline file with no script: each choice is a radio group, and a CSS rule per
choice hides the answers that do not match it (`#choice:checked ~ .answers …`), so the command
shows without script, in any browser, and every control is a real radio input with a label,
reachable with the keyboard (Tab to a group, arrows within it). Why no script: the page is read
from CI artifacts and mirrors where scripts may be blocked, and it needs none.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape

from shipyard.conda.build_plan import mutex_name
from shipyard.errors import GateBlocked
from shipyard.plumbing.atomic_files import write_atomic
from shipyard.publish.conda_channel import conda_channel_url
from shipyard.publish.registry import channel_reference
from shipyard.record.gate import gate
from shipyard.record.manifest import ArtifactRecord, Manifest
from shipyard.redaction import redact
from shipyard.release.channel_version import NIGHTLY
from shipyard.release.destinations import PublishTarget
from shipyard.release.fields import DEFAULT_STATUSES, StatusVocabulary
from shipyard.release.kinds import KINDS, WHEEL, kind_of, kinds_taken_by
from shipyard.release.matrix import ANY, excluded_builds
from shipyard.release.spec import Exclusion, Release

# Each installer with the package type it installs, in the kinds' order: pip, uv, conda, docker.
_PACKAGE_TYPE = {installer: kind.name for kind in KINDS.values() for installer in kind.installers}
INSTALLERS = tuple(_PACKAGE_TYPE)
_OS_NAMES = {"linux": "Linux", "windows": "Windows", "macos": "macOS"}
_PIP = {"pip": "pip3 install", "uv": "uv pip install"}


@dataclass(frozen=True)
class Choice:
    """One radio button: `value` goes into the answers' data attributes, `label` is what it reads."""

    value: str
    label: str


@dataclass(frozen=True)
class Answer:
    """One combination: the command that installs it, or the reason there is none."""

    platform: str
    installer: str
    variant: str
    channel: str
    command: str | None
    reason: str = ""


@dataclass(frozen=True)
class GetStarted:
    name: str
    version: str
    platforms: tuple[Choice, ...]
    installers: tuple[Choice, ...]
    variants: tuple[Choice, ...]
    channels: tuple[Choice, ...]
    answers: tuple[Answer, ...]


def get_started(release: Release, manifest: Manifest | None,
                statuses: StatusVocabulary = DEFAULT_STATUSES) -> GetStarted:
    """Every combination of the release's platforms, the installers, its variants and channels;
    `statuses` (feature_status.yaml's vocabulary) says which failing features a gate blocks."""
    platforms = tuple(Choice(p, _platform_label(release, p)) for p in release.platforms)
    variants = tuple(Choice(v, _variant_label(release, v)) for v in release.variants)
    channels = tuple(Choice(c, "stable (release)" if c == "release" else c) for c in release.channels)
    excluded = excluded_builds(release)  # once: each answer asks it
    answers = tuple(install_answer(release, manifest, p.value, i, v.value, c.value, excluded, statuses)
                    for p in platforms for i in INSTALLERS for v in variants for c in channels)
    return GetStarted(name=release.release.name, version=manifest.version if manifest else release.release.version,
                      platforms=platforms, installers=tuple(Choice(i, i) for i in INSTALLERS), variants=variants,
                      channels=channels, answers=answers)


def render_get_started(page: GetStarted) -> str:
    env = Environment(loader=PackageLoader("shipyard.report", "templates"), autoescape=select_autoescape(["j2"]),
                      trim_blocks=True, lstrip_blocks=True)
    return env.get_template("get-started.html.j2").render(page=page)


def write_get_started(release: Release, manifest: Manifest | None, out: Path,
                      statuses: StatusVocabulary = DEFAULT_STATUSES) -> Path:
    write_atomic(out, redact(render_get_started(get_started(release, manifest, statuses))))
    return out


def install_answer(release: Release, manifest: Manifest | None, platform: str, installer: str, variant: str,
            channel: str, excluded: dict[tuple[str, str, str, str], Exclusion],
            statuses: StatusVocabulary = DEFAULT_STATUSES) -> Answer:
    """The command for one combination, or why there is none; `excluded`: excluded_builds(release)."""
    def no(reason: str) -> Answer:
        return Answer(platform, installer, variant, channel, None, reason)

    def yes(command: str) -> Answer:
        return Answer(platform, installer, variant, channel, command)

    main = _main_component(release)
    package_type = _PACKAGE_TYPE[installer]
    # An image holds the variant's wheels: what rules them out rules it out.
    built_from = WHEEL.name if KINDS[package_type].is_image else package_type
    if (exclusion := excluded.get((main, variant, platform, built_from))) is not None:
        return no(f"Not built: {main} has no {_variant_label(release, variant)} build for {platform} "
                  f"({exclusion.reason}).")
    images = release.images
    if installer == "docker":
        if images is None:
            return no("This release builds no Docker images (release.yaml has no images section).")
        if platform != images.platform:
            where = _platform_label(release, images.platform)
            return no(f"The Docker images are {images.platform} images; pick {where} and run them wherever "
                      f"Docker runs {images.platform} containers.")
        if variant not in images.variants:
            return no(f"Docker images are built for {', '.join(images.variants)} only, not {variant}.")
    target = next((t for t in publish_targets_for(release, package_type) if t.takes(channel)), None)
    if target is None:
        return no(f"release.yaml publishes no {KINDS[package_type].plural} to the {channel} channel.")
    if manifest is None:
        return no("Nothing is built yet: dist/manifest.json is missing.")
    if channel != NIGHTLY and ".dev" in manifest.version:
        return no(f"This manifest holds the nightly build {manifest.version}; the {channel} channel takes "
                  f"{release.release.version} builds only.")
    blocked = _gate_blocks(release, manifest, channel, statuses)
    if blocked:
        return no(blocked)
    if installer == "docker":
        image = _runtime_image(manifest, variant)
        if image is None:
            return no(f"Not built: the manifest holds no {_variant_label(release, variant)} runtime image.")
        return yes(f"docker pull {channel_reference(target.url, image.name, channel)}")
    held = _held(release, manifest, package_type, variant, platform, excluded)
    if main not in held:
        return no(f"Not built: the manifest holds no {_variant_label(release, variant)} {KINDS[package_type].noun} of "
                  f"{main} for {platform}.")
    names = " ".join(held)
    if installer == "conda":
        # A conda target's channel is read with its token (/t/<token>/); a bucket's (s3) is public.
        token = f"${target.token_env}" if target.token_env else None
        channel_url = conda_channel_url(target.url, channel, token=token)
        dependencies = " ".join(f"-c {c}" for c in (release.conda.channels if release.conda else ()))
        # The mutex picks the variant: every variant-specific package requires its build (recipes/).
        # Written as the recipes require it: conda reads `name=1.0=tag` too, strict MatchSpec parsers
        # (rattler, pixi) do not.
        mutex = shlex.quote(f"{mutex_name(release)} ==1.0 {release.variants[variant].tag}")
        return yes(" ".join(w for w in ("conda install -c", channel_url, dependencies, mutex, names) if w))
    index = wheel_index_url(target, channel, release.variants[variant].tag, variant)
    if index is None:
        return no(f"The {target.name} index takes {target.default_variant} wheels only, not {variant}.")
    return yes(f"{_PIP[installer]} {names}" + (f" --index-url {index}" if index else ""))


def _gate_blocks(release: Release, manifest: Manifest, channel: str, statuses: StatusVocabulary) -> str:
    """Why the channel's gate keeps this manifest out (publish uploads nothing), or ''."""
    try:
        gate(release.channels[channel], manifest.artifacts, statuses=statuses)
    except GateBlocked:
        marking = [name for name, c in release.channels.items() if c.gate == "mark"]
        blocking = " or ".join(n for n in statuses.names if n in statuses.blocking)
        return (f"Not published: the {channel} channel's gate blocks this build, since a {blocking} feature failed "
                f"its tests (see the release report)" + (f"; {', '.join(marking)} has it, marked." if marking
                                                         else "."))
    return ""


def _main_component(release: Release) -> str:
    """The component the command is about: the first Python component release.yaml lists."""
    return next(c.name for c in release.components.values() if c.is_python)


def _variant_label(release: Release, variant: str) -> str:
    cuda = release.variants[variant].cuda
    return f"CUDA {cuda}" if cuda else "CPU"


def _platform_label(release: Release, platform: str) -> str:
    """'Linux (x86_64)'; with the glibc its wheels need where two platforms share the OS and architecture
    (linux-x86_64 and linux-x86_64-manylinux2014): 'Linux (x86_64, glibc 2.17 or newer)'."""
    found = release.platforms.get(platform)
    if found is None:
        return platform
    twins = [p for p in release.platforms.values() if (p.os, p.arch) == (found.os, found.arch)]
    needs = f", glibc {found.promised_glibc} or newer" if len(twins) > 1 and found.promised_glibc else ""
    return f"{_OS_NAMES[found.os]} ({found.arch}{needs})"


def publish_targets_for(release: Release, package_type: str) -> list[PublishTarget]:
    """The publish targets of `package_type`, the one a user installs from first: PyTorch's download
    layout (static, or in a bucket: s3) before a devpi or PyPI-compatible index."""
    preferred = ("static", "s3", "pypi", "devpi")
    found = [t for t in release.publish.values() if package_type in kinds_taken_by(t.route)]
    return sorted(found, key=lambda t: preferred.index(t.kind) if t.kind in preferred else 0)


def wheel_index_url(target: PublishTarget, channel: str, tag: str, variant: str) -> str | None:
    """The `--index-url` of `variant`'s wheels on `target` ('' for PyPI itself), or None when the
    target does not take that variant's wheels."""
    if target.kind in ("static", "s3"):  # s3: the same layout, read at the bucket's url
        return f"{target.url.rstrip('/')}/{channel}/{tag}/"
    if target.kind == "pypi":
        if target.default_variant != variant:
            return None
        return "" if target.known_index and target.simple_url == "https://pypi.org/simple/" else target.simple_url
    # devpi: <url>/<user>/<channel>-<tag>/+simple/, the user named by username_env on the publishing
    # side; a reader of the page gets it from whoever publishes.
    return f"{target.url.rstrip('/')}/${target.username_env}/{channel}-{tag}/+simple/"


def _held(release: Release, manifest: Manifest, package_type: str, variant: str, platform: str,
          excluded: dict[tuple[str, str, str, str], Exclusion]) -> dict[str, ArtifactRecord]:
    """The Python components the manifest holds a `package_type` artifact of for `variant` on
    `platform` (a pure one stands for every variant and platform its component is not excluded
    from), in release.yaml order. The variant provider is a tool a user runs before installing
    (`python -m …`), not part of what the command installs."""
    provider = release.wheel_variants.provider if release.wheel_variants else None
    found: dict[str, ArtifactRecord] = {}
    for record in manifest.artifacts:
        component = release.components.get(record.component)
        if record.package_type != package_type or component is None or not component.is_python \
                or record.component == provider:
            continue
        if (record.component, variant, platform, package_type) in excluded:
            continue
        if (record.variant, record.platform) == (variant, platform) or record.platform == ANY:
            found.setdefault(record.component, record)
    return {name: found[name] for name in release.components if name in found}


def _runtime_image(manifest: Manifest, variant: str) -> ArtifactRecord | None:
    """The manifest's runtime image of `variant`."""
    return next((r for r in manifest.artifacts
                 if kind_of(r.package_type).is_image and r.variant == variant and r.name.endswith("-runtime")),
                None)
