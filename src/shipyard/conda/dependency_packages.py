"""Which components a narrowed conda build (`--component`) adds: those its selection depends on
within the release (wheel/release_dependencies.py), whose packages the selection's tests install
from the channels the run serves, less those a channel of the run already holds for the variant
(an earlier run's output, or the native packages a CI pure lane merged into dist/conda before
building its pure ones: there nothing is built again).

A channel is read as conda/channel.py and rattler index it: `<subdir>/repodata.json`. The test
solve takes a name only from the first channel that has it (strict priority), so the first of
the given channels that holds any package of the name decides; a package of the variant is one
whose build string carries its tag (`py311_cpu_h…_0`, recipes/README.md) or a noarch one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shipyard.conda.names import conda_name
from shipyard.plumbing.progress import Progress
from shipyard.release.spec import Spec, Variant
from shipyard.wheel.release_dependencies import selection_dependencies


def dependency_components(spec: Spec, selected: Sequence[str], variant: Variant, pythons: Sequence[str],
                          channels: Sequence[Path], subdir: str, progress: Progress) -> dict[str, str]:
    """The conda components the `selected` ones depend on within the release that none of
    `channels` (folders, in the priority the tests search them) holds for `variant` and every
    run Python the component admits, each with the selected component that depends on it; says
    for each dependency whether it is built or taken from a channel."""
    added: dict[str, str] = {}
    for name, dependent in selection_dependencies(spec, selected).items():
        component = spec.release.components[name]
        if "conda" not in component.package_types:
            progress(f"{name}: no conda package in this release ({dependent} depends on it); its tests take it "
                     f"from the dependency channels")
            continue
        pythons_needed = () if component.kind == "python-pure" else tuple(
            p for p in pythons if component.admits_python(p))
        source = _holding_channel(channels, conda_name(name), variant.tag, pythons_needed, subdir)
        if source is not None:
            progress(f"{name}: taken from {source} ({dependent} depends on it)")
            continue
        added[name] = dependent
        progress(f"also building {name}: {dependent} depends on it")
    return added


def _holding_channel(channels: Sequence[Path], package: str, tag: str, pythons: Sequence[str],
                     subdir: str) -> Path | None:
    """The first channel holding a package named `package`, when it holds one of variant `tag`
    for each of `pythons` (a noarch one for all); None when it does not or no channel has the name."""
    for channel in channels:
        records = [r for r in _records(channel, subdir) if r.get("name") == package]
        if not records:
            continue
        if any(r.get("noarch") for r in records):
            return channel
        builds = [str(r.get("build", "")) for r in records if f"_{tag}_" in f"_{r.get('build', '')}_"]
        held = bool(builds) and all(any(b.startswith(f"py{p.replace('.', '')}_") for b in builds) for p in pythons)
        return channel if held else None
    return None


def _records(channel: Path, subdir: str) -> list[dict[str, Any]]:
    """Every package record of the channel's host subdir and noarch (.conda and .tar.bz2 alike)."""
    records: list[dict[str, Any]] = []
    for folder in (subdir, "noarch"):
        index = channel / folder / "repodata.json"
        if not index.is_file():
            continue
        try:
            data = json.loads(index.read_text(encoding="utf-8"))
        except ValueError:
            continue  # an index nobody can read holds nothing the tests' solve could take: build it
        for key in ("packages", "packages.conda"):
            records += [r for r in (data.get(key) or {}).values() if isinstance(r, dict)]
    return records
