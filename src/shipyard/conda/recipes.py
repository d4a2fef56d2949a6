"""The conda recipes under recipes/: staged for a build with shipyard's `extra` added, parsed
and rendered, and their errors reported at the file and line of the recipe a person wrote.

A recipe holds only what is conda-specific; the features of a package and their statuses are
shipyard's to write (a top-level `extra`, which lands in info/about.json). rattler-build
resolves a relative `source: path` against the recipe file, so the staged copy sits at the
same place in a mirror of the checkout whose other entries are symlinks: its paths resolve as
in the original, its lines are the original's, and the build sees only fixed paths under the
build root (the packages' bytes do not depend on where the checkout is).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from rattler_build import RattlerBuildError, RecipeParseError, RenderConfig, Stage0Recipe, VariantConfig
from rattler_build.render import RenderedVariant

from shipyard.errors import NO_VALUE, RecipeError, SpecError, SpecIssue
from shipyard.release.kinds import CONDA
from shipyard.release.yaml_source import PathKey, YamlDocument, load_yaml, value_at

# Where a component's recipe lives is the conda kind's to say (release/kinds.py: validate checks it too).
RECIPES_DIR = PurePosixPath(CONDA.recipe).parts[0]


def recipe_file(root: Path, name: str) -> Path:
    """recipes/<name>/recipe.yaml, which must exist."""
    path = root / CONDA.recipe.format(name=name)
    if not path.is_file():
        raise RecipeError(f"{path}: no conda recipe for {name!r}; write recipes/{name}/recipe.yaml in "
                          f"rattler-build's v1 format (see recipes/README.md), or drop 'conda' from its "
                          f"package_types in release.yaml")
    return path


def _load(path: Path) -> YamlDocument:
    try:
        return load_yaml(path)
    except SpecError as exc:  # the same file:line words as release.yaml's
        raise RecipeError("\n".join(str(i) for i in exc.issues) or str(exc)) from None


@dataclass(frozen=True)
class StagedRecipe:
    name: str  # the recipe's folder under recipes/
    original: Path  # what a person edits; errors point here
    path: Path  # the staged copy rattler-build reads
    text: str  # the staged text: part of every package's cache key

    def parse(self) -> Stage0Recipe:
        try:
            return Stage0Recipe.from_file(self.path)
        except RecipeParseError as exc:
            raise recipe_error(self.original, _first_line(exc)) from None

    def render(self, recipe: Stage0Recipe, variant_config: dict[str, list[str]]) -> list[RenderedVariant]:
        """Render with one variant config; a Jinja error names the original file and line."""
        config = VariantConfig.from_yaml(json.dumps(variant_config))
        try:
            return recipe.render(config, RenderConfig())
        except RecipeParseError as exc:
            raise recipe_error(self.original, _first_line(exc)) from None
        except RattlerBuildError as exc:
            raise _render_error(self.original, str(exc)) from None


def mirror_checkout(root: Path, mirror: Path) -> None:
    """Make `mirror` a stand-in for the checkout at `root`: every top-level entry a symlink to
    the real one, except recipes/, whose recipe folders are symlinks until one is staged."""
    if mirror.exists() or mirror.is_symlink():
        shutil.rmtree(mirror)
    mirror.mkdir(parents=True)
    for entry in sorted(root.iterdir()):
        if entry.name != RECIPES_DIR:
            os.symlink(entry, mirror / entry.name)
    (mirror / RECIPES_DIR).mkdir()
    for entry in sorted((root / RECIPES_DIR).iterdir()):
        os.symlink(entry, mirror / RECIPES_DIR / entry.name)


def stage_recipe(root: Path, mirror: Path, name: str, extra: dict[str, Any]) -> StagedRecipe:
    """Copy recipes/<name>/recipe.yaml into the mirror with `extra` appended as its top-level
    `extra:` (the recipe itself must not have one), and the folder's other files (the build
    scripts) beside it: copied, not linked, because rattler-build packs the recipe folder into
    info/recipe/, where a link would name this checkout's path instead of holding the script."""
    original = recipe_file(root, name)
    doc = _load(original)
    if not isinstance(doc.data, dict):
        raise RecipeError(str(SpecIssue(original, 1, "(top level)", NO_VALUE, "a recipe is a mapping",
                                        "start it with 'schema_version: 1' and 'package:' or 'recipe:'")))
    if "extra" in doc.data:
        raise RecipeError(str(SpecIssue(
            original, doc.line_of(("extra",)), "extra", NO_VALUE,
            "is written by shipyard (the package's features and their statuses, from feature_status.yaml)",
            "remove it from the recipe; shipyard adds it to every package it builds")))
    text = original.read_text(encoding="utf-8")
    if not text.endswith("\n"):
        text += "\n"
    text += ("\n# Added by shipyard: the features of this package's platform and their statuses\n"
             f"extra: {json.dumps(extra, sort_keys=True)}\n")
    folder = mirror / RECIPES_DIR / name
    if folder.is_symlink():
        folder.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    for entry in sorted(original.parent.iterdir()):
        target = folder / entry.name
        if entry.name == "recipe.yaml" or target.exists():
            continue
        if entry.is_dir():
            shutil.copytree(entry, target)
        else:
            shutil.copyfile(entry, target)
            shutil.copymode(entry, target)
    staged = folder / "recipe.yaml"
    staged.write_text(text, encoding="utf-8")
    return StagedRecipe(name, original, staged, text)


# --- errors at the original file's line -----------------------------------------------------

def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def recipe_error(original: Path, message: str) -> RecipeError:
    """rattler-build's parse errors carry no line: find the key or value they name."""
    doc = _load(original)
    loc = _locate(doc, message)
    key = ".".join(str(p) for p in loc) if loc else "(recipe)"
    return RecipeError(str(SpecIssue(original, doc.line_of(loc) if loc else None, key, NO_VALUE, message,
                                     "fix the recipe (rattler-build v1 format: "
                                     "https://rattler-build.prefix.dev/latest/reference/recipe_file/)")))


def _render_error(original: Path, text: str) -> RecipeError:
    """rattler-build's render errors hold the line in their text (`Marker { … line: 31 … }`)."""
    line = re.search(r"\bline: (\d+)", text)
    message = re.search(r'message: "((?:[^"\\]|\\.)*)"', text)
    what = message.group(1) if message else text.strip().splitlines()[0]
    doc = _load(original)
    at_line = int(line.group(1)) if line else None
    loc = next((loc for loc, n in sorted(doc.lines.items(), key=lambda kv: -len(kv[0])) if n == at_line), None)
    key = ".".join(str(p) for p in loc) if loc else "(recipe)"
    return RecipeError(str(SpecIssue(original, at_line, key, NO_VALUE, what.replace('\\"', '"'),
                                     "fix the ${{ … }} expression at that line (a variant key it uses must be "
                                     "one of the variant config's, see recipes/README.md)")))


def _locate(doc: YamlDocument, message: str) -> PathKey | None:
    """The path of what a parse error is about, earliest in the file first."""
    paths = sorted(doc.lines, key=lambda loc: doc.lines[loc])
    parent = re.search(r"invalid value for '([^']+)'", message)
    unknown = re.search(r"unknown field '([^']+)'", message)
    if unknown:
        named = [loc for loc in paths if loc and loc[-1] == unknown.group(1)]
        under = [loc for loc in named if parent and len(loc) > 1 and loc[-2] == parent.group(1)]
        if under or named:
            return (under or named)[0]
    missing = re.search(r"missing required field '([^']+)'", message)
    if missing:
        field = missing.group(1)
        partner = {"then": "if", "name": "package", "version": "package"}.get(field)
        for loc in paths:
            value = value_at(doc.data, loc)
            if isinstance(value, dict) and field not in value and (partner is None or partner in value
                                                                   or (loc and loc[-1] == partner)):
                return loc
    quoted = re.search(r":\s*([^:']+)$", message)  # "unable to parse version spec: >>=1"
    if quoted:
        needle = quoted.group(1).strip()
        for loc in paths:
            value = value_at(doc.data, loc)
            if isinstance(value, str) and needle and needle in value:
                return loc
    if parent:
        return next((loc for loc in paths if loc and loc[-1] == parent.group(1)), None)
    return None
