"""`dist/whl/variants/install.json`: what `python -m <provider> --guide URL` reads before anything is
installed. The main component's `*-variants.json` (to rank the builds for the machine, as a
variant-aware installer would) and, per platform and build, the index URL and the pip, uv, conda
and docker commands for one channel, or why there is none. The commands are the get-started
page's (report/get_started.py): one place turns release.yaml's targets and the manifest into them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from shipyard.plumbing.atomic_files import write_atomic
from shipyard.record.manifest import Manifest
from shipyard.release.matrix import excluded_builds
from shipyard.release.spec import Release

# The page's own answer for one combination: one place turns targets and the manifest into commands.
from shipyard.report.get_started import INSTALLERS, install_answer, publish_targets_for, wheel_index_url


def install_guide(release: Release, manifest: Manifest, channel: str, variants_json: dict[str, Any]) -> dict[str, Any]:
    target = next((t for t in publish_targets_for(release, "wheel") if t.takes(channel)), None)
    excluded = excluded_builds(release)
    platforms: dict[str, Any] = {}
    for platform in release.platforms.values():
        builds: dict[str, Any] = {}
        for name, variant in release.variants.items():
            answers = {i: install_answer(release, manifest, platform.name, i, name, channel, excluded)
                       for i in INSTALLERS}
            index = wheel_index_url(target, channel, variant.tag, name) if target else None
            if answers["pip"].command is None or index is None:
                continue  # no wheel of this build on this platform: the command looks further down its ranking
            builds[variant.tag] = {
                "variant": name,
                "index_url": index or (target.simple_url if target else ""),
                "commands": {i: a.command for i, a in answers.items() if a.command},
                "missing": {i: a.reason for i, a in answers.items() if not a.command},
            }
        platforms[platform.name] = {"os": platform.os, "arch": platform.arch, "builds": builds}
    return {"release": release.release.name, "version": manifest.version, "channel": channel,
            "variants_json": variants_json, "platforms": platforms}


def write_install_guide(path: Path, release: Release, manifest: Manifest, channel: str, variants_json: Path) -> Path:
    guide = install_guide(release, manifest, channel, json.loads(variants_json.read_text()))
    write_atomic(path, json.dumps(guide, indent=2, sort_keys=True) + "\n")
    return path
