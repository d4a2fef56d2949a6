"""Shared fixtures: a copy of the real release description that a test may break."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


class SpecCopy:
    """release.yaml + feature_status.yaml copied into a temp root, with empty component folders."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for name in ("release.yaml", "feature_status.yaml"):
            shutil.copy(REPO / name, root / name)
        for component in ("ember", "embervision", "emberaudio", "emberelastic", "ember-lite"):
            (root / "library" / component).mkdir(parents=True, exist_ok=True)

    def edit(self, name: str, old: str, new: str) -> None:
        path = self.root / name
        text = path.read_text()
        assert old in text, f"fixture text {old!r} not found in {name}"
        path.write_text(text.replace(old, new, 1))


@pytest.fixture
def spec_copy(tmp_path: Path) -> SpecCopy:
    return SpecCopy(tmp_path)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO
