"""The repository's release description copied into a folder of its own, for a test to break or
to point elsewhere: release.yaml and feature_status.yaml, with the component folders (and tests
folders) release.yaml names, empty: validate refuses a missing one, and a test that only reads
the description needs no sources."""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


# The committed stand-ins of release.yaml's real publish targets (PyPI, TestPyPI, the bucket, GitHub's
# registry), on 127.0.0.1: what `shipyard --targets local-targets.yaml` publishes to.
LOCAL_TARGETS = REPO / "local-targets.yaml"


def with_stand_ins(release_text: str, targets_text: str) -> str:
    """release.yaml's text with its `publish:` section replaced by the targets file's, as `--targets`
    replaces it when the release is loaded (release/local_targets.py)."""
    start = release_text.index("\npublish:\n") + 1
    end = re.search(r"^(?=\S)", release_text[start + len("publish:\n"):], re.MULTILINE)
    stop = start + len("publish:\n") + (end.start() if end else len(release_text))
    section = targets_text[targets_text.index("\npublish:\n") + 1:]
    return release_text[:start] + section.rstrip("\n") + "\n\n" + release_text[stop:]


def make_component_folders(root: Path) -> None:
    """Empty folders for every component of `root`/release.yaml, with its tests folder."""
    for component in yaml.safe_load((root / "release.yaml").read_text())["components"].values():
        (root / component["path"]).mkdir(parents=True, exist_ok=True)
        if component.get("tests"):
            (root / component["path"] / component["tests"]).mkdir(exist_ok=True)


class SpecCopy:
    """release.yaml + feature_status.yaml copied into `root` (a folder that exists), with empty
    component folders (and the tests folders release.yaml names), the recipes, and the test files
    feature_status.yaml names. Its publish targets are the committed stand-ins (local-targets.yaml),
    as `shipyard --targets local-targets.yaml` loads the release: a test never reaches for PyPI,
    the bucket or GitHub's registry, and breaks or points the stand-ins as it did the loopback
    targets release.yaml named before it named the real places."""

    def __init__(self, root: Path) -> None:
        self.root = root
        shutil.copy(REPO / "feature_status.yaml", root / "feature_status.yaml")
        (root / "release.yaml").write_text(with_stand_ins((REPO / "release.yaml").read_text(),
                                                          LOCAL_TARGETS.read_text()))
        make_component_folders(root)
        # What validate checks beside the two files: the conda recipes, and the test files a stable
        # feature names (its tests must exist; read, never run), with the conftest.py files above them.
        if not (root / "recipes").exists():  # a test may have put its own there first
            shutil.copytree(REPO / "recipes", root / "recipes")
        features = yaml.safe_load((root / "feature_status.yaml").read_text())["features"]
        for file_part in {test.split("::", 1)[0] for feature in features for test in feature.get("tests", ())}:
            source = REPO / file_part
            for found in [source, *(folder / "conftest.py" for folder in source.parents if REPO in folder.parents)]:
                if found.is_file() and not (root / found.relative_to(REPO)).exists():
                    (root / found.relative_to(REPO)).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(found, root / found.relative_to(REPO))

    def edit(self, name: str, old: str, new: str) -> None:
        path = self.root / name
        text = path.read_text()
        assert old in text, f"fixture text {old!r} not found in {name}"
        path.write_text(text.replace(old, new, 1))


def point_release_yaml(root: Path, replacements: Mapping[str, str]) -> None:
    """A SpecCopy in `root` (made if missing, overwritten if there; its targets the committed
    stand-ins), each `old: new` of `replacements` applied to release.yaml wherever it occurs (a
    stand-in's url or path)."""
    root.mkdir(parents=True, exist_ok=True)
    path = SpecCopy(root).root / "release.yaml"
    text = path.read_text()
    for old, new in replacements.items():
        assert old in text, f"release.yaml no longer holds {old!r}"
        text = text.replace(old, new)
    path.write_text(text)


# PyTorch 2.8's vocabulary (record/test_status_vocabulary.py), and the renaming of the default one into it.
API_VOCABULARY = "vocabulary:\n  - {name: API-Stable, blocks: true}\n  - {name: API-Unstable}\n"
API_RENAMED = {"stable": "API-Stable", "beta": "API-Unstable", "prototype": "API-Unstable"}


def declare_api_statuses(spec_copy: SpecCopy, keep: str = "") -> None:
    """The release's feature_status.yaml with the API vocabulary, every status renamed into it
    (but the first line holding `keep`, left as it was)."""
    path = spec_copy.root / "feature_status.yaml"
    lines = path.read_text().replace("schema_version: 1\n", f"schema_version: 1\n{API_VOCABULARY}", 1).splitlines()
    kept = False
    for i, line in enumerate(lines):
        if line.startswith("    status:"):
            if keep and not kept and keep in line:
                kept = True
                continue
            lines[i] = re.sub(r"\b(stable|beta|prototype)\b", lambda m: API_RENAMED[m.group(1)], line)
    path.write_text("\n".join(lines) + "\n")
