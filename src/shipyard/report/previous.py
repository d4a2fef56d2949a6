"""The previous release's feature_status.yaml, from a file or a git ref, and what changed since."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from shipyard.errors import ToolError
from shipyard.plumbing import command
from shipyard.plumbing.input_files import check_input_size, input_error, validated
from shipyard.release.spec import Feature, FeatureFile
from shipyard.release.yaml_source import YamlDocument, load_yaml, load_yaml_text


@dataclass(frozen=True)
class PreviousRelease:
    label: str  # what the notes call it: the git ref or the file given
    features: FeatureFile


@dataclass(frozen=True)
class StatusChange:
    feature: Feature
    before: str
    after: str
    platforms: tuple[str, ...]


def load_previous(root: Path, ref_or_file: str) -> PreviousRelease:
    """`ref_or_file` is a feature_status.yaml of the previous release, or a git ref of this
    repository whose feature_status.yaml (beside release.yaml) is that release's."""
    path = Path(ref_or_file)
    if path.exists() or path.is_symlink():
        return PreviousRelease(str(path), _parse(load_yaml(path)))
    where = Path(f"{ref_or_file}:feature_status.yaml")
    if ref_or_file.startswith("-"):  # git would take it for an option (--output=FILE writes a file)
        raise input_error(ref_or_file, "--previous", "no such file, and not a git ref (a ref never starts with '-')",
                          PREVIOUS_REF_FIX)
    try:
        # --end-of-options: whatever the ref is, git reads it as a revision, never as an option.
        shown = command.run(["git", "show", "--end-of-options", f"{ref_or_file}:./feature_status.yaml"], cwd=root,
                            what="git show")
    except UnicodeDecodeError:
        raise input_error(where, "(file)", "is not UTF-8 text", PREVIOUS_FIX) from None
    except ToolError as exc:
        said = exc.output.strip().splitlines()[-1] if exc.output.strip() else "no output"
        raise input_error(ref_or_file, "--previous", f"no such file, and git cannot show feature_status.yaml at that "
                          f"ref in {root} ({said})", PREVIOUS_REF_FIX) from None
    check_input_size(len(shown.stdout.encode()), where, limit="YAML file", fix=PREVIOUS_FIX)
    return PreviousRelease(ref_or_file, _parse(load_yaml_text(shown.stdout, where)))


PREVIOUS_REF_FIX = "give a tag or commit of an earlier release (e.g. v1.6.0), or a path to its feature_status.yaml"


PREVIOUS_FIX = "give the previous release's feature_status.yaml, as shipyard validate accepted it in that release"


def _parse(doc: YamlDocument) -> FeatureFile:
    return validated(FeatureFile, doc.data, doc.path, fix=PREVIOUS_FIX, line_of=doc.line_of)


def new_features(current: FeatureFile, previous: FeatureFile) -> list[Feature]:
    known = {f.id for f in previous.features}
    return [f for f in current.features if f.id not in known]


def removed_features(current: FeatureFile, previous: FeatureFile) -> list[Feature]:
    kept = {f.id for f in current.features}
    return [f for f in previous.features if f.id not in kept]


def status_changes(current: FeatureFile, previous: FeatureFile,
                   platforms: Mapping[str, list[str]]) -> list[StatusChange]:
    """Every feature of both releases whose status moved on a platform it ships on (`platforms`:
    feature id -> those platforms), one entry per move (beta → stable on linux-x86_64 and windows-amd64)."""
    before = {f.id: f for f in previous.features}
    out = []
    for feature in current.features:
        old = before.get(feature.id)
        if old is None:
            continue
        moves: dict[tuple[str, str], list[str]] = {}
        for platform in platforms.get(feature.id, ()):
            was, now = old.status_on(platform), feature.status_on(platform)
            if was and now and was != now:
                moves.setdefault((was, now), []).append(platform)
        out += [StatusChange(feature, was, now, tuple(on)) for (was, now), on in moves.items()]
    return out
