"""`shipyard variants`: the built CPU and CUDA wheels also as PEP 825 variants of one package (a repack)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from shipyard.cli.shared import console, dist_folder, load_release

if TYPE_CHECKING:
    from shipyard.release.spec import Release


def cmd_variants(args: argparse.Namespace) -> int:
    from shipyard.errors import UsageError, nearest
    from shipyard.publish.variants import GUIDE_FILE, RECORD_FILE, VARIANTS_INDEX, build_variant_index, settings_of
    from shipyard.record.manifest import MANIFEST_FIX, release_manifest
    from shipyard.release.channel_version import NIGHTLY
    from shipyard.report.install_guide import write_install_guide

    spec = load_release(args)
    release = spec.release
    channel = args.channel or (NIGHTLY if NIGHTLY in release.channels else next(iter(release.channels), None))
    if args.channel and args.channel not in release.channels:
        near = nearest(args.channel, release.channels)
        raise UsageError(f"--channel {args.channel}: release.yaml's channels are {', '.join(release.channels)}"
                         + (f"; did you mean {near!r}" if near else ""))
    settings = settings_of(release)
    dist = dist_folder(args)
    manifest = release_manifest(dist / "manifest.json", release, MANIFEST_FIX)
    files = build_variant_index(dist, release, manifest)
    index = dist / "whl" / VARIANTS_INDEX
    main = next((f for f in files if f.kind == "variants.json"
                 and f.path.parent.name == _main_project(release, [g.path.parent.name for g in files])), None)
    for f in files:
        if f.kind == "variants.json":
            console.print(f"{f.path.relative_to(dist)}: {f.path.stat().st_size} bytes")
    variant_count = sum(f.kind == "variant" for f in files)
    console.print(f"{variant_count} variant wheels (namespace {settings.namespace}) and "
                  f"{sum(f.kind == 'plain' for f in files)} plain wheels in {index}; recorded in {dist / RECORD_FILE}")
    if main is not None and channel is not None:  # a release without channels publishes nowhere to guide to
        guide = write_install_guide(index / GUIDE_FILE, release, manifest, channel, main.path)
        console.print(f"install guide for the {channel} channel: {guide} "
                      f"(python -m {settings.plugin_api.split('.', 1)[0]} --guide <its URL>)")
    return 0


def _main_project(release: Release, projects: list[str]) -> str | None:
    """The first Python component release.yaml lists that has variants (what the guide is about)."""
    from packaging.utils import canonicalize_name

    return next((canonicalize_name(c.name) for c in release.components.values()
                 if c.is_python and canonicalize_name(c.name) in projects), None)


def add_variants_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("variants", help="repack the built CPU and CUDA wheels as PEP 825 variants of one package "
                                        "into dist/whl/variants/, with each project's *-variants.json")
    p.add_argument("--dist", help="folder of manifest.json (default: <root>/dist)")
    p.add_argument("--channel", help="the channel whose install commands the guide (install.json) gives "
                                     "(default: nightly, or release.yaml's first channel)")
    p.set_defaults(func=cmd_variants)
