"""The component folders (and tests folders) a copied release.yaml names, empty: validate refuses a
missing one, and a test that only reads the description needs no sources."""

from __future__ import annotations

from pathlib import Path

import yaml


def make_component_folders(root: Path) -> None:
    """Empty folders for every component of `root`/release.yaml, with its tests folder."""
    for component in yaml.safe_load((root / "release.yaml").read_text())["components"].values():
        (root / component["path"]).mkdir(parents=True, exist_ok=True)
        if component.get("tests"):
            (root / component["path"] / component["tests"]).mkdir(exist_ok=True)
