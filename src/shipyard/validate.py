"""Load and validate release.yaml and feature_status.yaml, alone and against each other.

Every problem becomes a `SpecIssue` that names the file, line, key and bad value, and
suggests the nearest valid value for a typo. `load_spec` raises SpecError listing them.
"""

from __future__ import annotations

import ast
import difflib
import fnmatch
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from shipyard.cuda_archs import supported_archs
from shipyard.errors import SpecError
from shipyard.matrix import exclusion_hits
from shipyard.spec import STATUS_ORDER, FeatureFile, Release
from shipyard.yaml_source import PathKey, YamlDocument, load_yaml

_MISSING = object()


@dataclass(frozen=True)
class SpecIssue:
    """One problem in one file, at one key."""

    file: Path
    line: int | None
    key: str
    value: Any
    message: str
    suggestion: str | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else str(self.file)
        text = f"{where}: {self.key}: {self.message}"
        if self.value is not _MISSING and self.value is not None and not isinstance(self.value, dict | list):
            text += f" (got {self.value!r})"
        if self.suggestion:
            text += f"; did you mean {self.suggestion!r}?"
        return text


@dataclass(frozen=True)
class Spec:
    """Both files, validated: the one description of the release every layer reads."""

    root: Path
    release: Release
    features: FeatureFile
    pending_tests: tuple[str, ...] = ()

    def features_for(self, component: str, platform: str) -> list[tuple[str, str, str]]:
        """(id, title, status) of the component's features that exist on `platform`."""
        out: list[tuple[str, str, str]] = []
        for feature in self.features.features:
            status = feature.status_on(platform)
            if feature.component == component and status:
                out.append((feature.id, feature.title, status))
        return out


    def gating_statuses(self, component: str, platform: str) -> dict[str, str]:
        """Feature id -> the status that gates its tests on `platform`. A feature that does
        not exist there (its tests may still run, e.g. Windows code under wine on Linux)
        gates with its most lenient status elsewhere."""
        out: dict[str, str] = {}
        for feature in self.features.features:
            if feature.component != component:
                continue
            here = feature.status_on(platform)
            out[feature.id] = here or max(feature.status.values(), key=lambda s: STATUS_ORDER[s])
        return out


@dataclass
class _Collector:
    issues: list[SpecIssue] = field(default_factory=list)

    def add(self, doc: YamlDocument, loc: PathKey, message: str, *, value: Any = _MISSING,
            suggestion: str | None = None) -> None:
        if value is _MISSING:
            value = _value_at(doc.data, loc)
        key = ".".join(str(p) for p in loc) or "(top level)"
        self.issues.append(SpecIssue(doc.path, doc.line_of(loc), key, value, message, suggestion))


def _value_at(data: Any, loc: PathKey) -> Any:
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def nearest(word: str, choices: typing.Iterable[str]) -> str | None:
    """The closest valid spelling of `word`, if one is close enough to be a typo."""
    found = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


def _model_at(model: type[BaseModel], loc: PathKey) -> type[BaseModel] | None:
    """The pydantic model that validates the mapping at `loc`, walking field annotations."""
    current: Any = model
    for part in loc:
        if isinstance(current, type) and issubclass(current, BaseModel):
            info = current.model_fields.get(str(part))
            if info is None:
                return None
            current = info.annotation
            continue
        current = _unwrap(current)
        if current is None:
            return None
    current = _unwrap(current) if not (isinstance(current, type) and issubclass(current, BaseModel)) else current
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    """The element type inside dict[str, X], tuple[X, ...], X | None, Annotated[X, ...]."""
    for _ in range(4):
        origin = typing.get_origin(annotation)
        args = typing.get_args(annotation)
        if origin is typing.Annotated:
            annotation = args[0]
        elif origin in (dict, tuple, list):
            annotation = args[-1] if origin is dict else args[0]
        elif origin in (typing.Union, types.UnionType):
            models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
            annotation = models[0] if models else args[0]
        else:
            return annotation
    return annotation


def _pydantic_issues(exc: ValidationError, model: type[BaseModel], doc: YamlDocument,
                     out: _Collector) -> None:
    for err in exc.errors():
        loc = tuple(err["loc"])
        kind = err["type"]
        if kind == "extra_forbidden":
            parent = _model_at(model, loc[:-1])
            fields = [n for n in (parent.model_fields if parent else {}) if n != "name"]
            out.add(doc, loc, f"unknown key {loc[-1]!r}; valid keys here: {', '.join(fields)}",
                    value=_MISSING, suggestion=nearest(str(loc[-1]), fields))
        elif kind == "missing":
            out.add(doc, loc, "required key is missing", value=None)
        elif kind == "literal_error":
            expected = re.findall(r"'([^']*)'", err.get("ctx", {}).get("expected", ""))
            out.add(doc, loc, f"must be one of {', '.join(expected)}", value=err.get("input"),
                    suggestion=nearest(str(err.get("input")), expected))
        else:
            message = err["msg"].removeprefix("Value error, ")
            out.add(doc, loc, message, value=err.get("input"))


def _check_release(release: Release, doc: YamlDocument, root: Path, out: _Collector) -> None:
    known = supported_archs()
    for name, variant in release.variants.items():
        if not variant.cuda:
            continue
        loc = ("variants", name, "arch_list")
        if variant.cuda not in known:
            out.add(doc, ("variants", name, "cuda"),
                    f"unknown CUDA version; shipyard knows {', '.join(known)}",
                    suggestion=nearest(variant.cuda, known))
            continue
        for arch in variant.archs:
            if arch.upper().endswith("+PTX"):
                out.add(doc, loc, f"write {arch[:-4]}: PTX is implicit, shipyard embeds it for the highest arch "
                        "of every CUDA variant (library/README.md)", value=arch)
            elif arch not in known[variant.cuda]:
                valid = known[variant.cuda]
                out.add(doc, loc, f"arch {arch} is not supported by CUDA {variant.cuda} "
                        f"(supported: {valid[0]} to {valid[-1]}); remove it or change the CUDA version",
                        value=arch)
        if len(set(variant.archs)) != len(variant.archs):
            out.add(doc, loc, "an arch appears twice")
    tags: dict[str, str] = {}
    for name, variant in release.variants.items():
        if variant.tag in tags:
            out.add(doc, ("variants", name, "tag"),
                    f"tag is already used by variant {tags[variant.tag]!r}; tags must be unique")
        tags[variant.tag] = name
    if len(set(release.pythons)) != len(release.pythons):
        out.add(doc, ("pythons",), "a Python version appears twice")
    for name, component in release.components.items():
        if not (root / component.path).is_dir():
            out.add(doc, ("components", name, "path"),
                    "folder does not exist (paths are relative to release.yaml)")
        if component.package_types.count("mobile") and not release.mobile_targets:
            out.add(doc, ("components", name, "package_types"),
                    "package type 'mobile' needs mobile_targets")
    for name, target in release.mobile_targets.items():
        if target.stands_in_for and target.stands_in_for not in release.mobile_targets:
            out.add(doc, ("mobile_targets", name, "stands_in_for"), "names no mobile target",
                    suggestion=nearest(target.stands_in_for, release.mobile_targets))
    _check_exclusions(release, doc, out)


def _check_exclusions(release: Release, doc: YamlDocument, out: _Collector) -> None:
    names = {
        "component": list(release.components),
        "variant": list(release.variants),
        "platform": list(release.platforms) + list(release.mobile_targets),
        "python": list(release.pythons),
        "package_type": ["wheel", "mobile", "conda", "docker"],
    }
    typo = False
    for i, exclusion in enumerate(release.exclusions):
        for key, patterns in exclusion.selectors().items():
            for pattern in patterns:
                if not any(fnmatch.fnmatchcase(n, pattern) for n in names[key]):
                    typo = True
                    out.add(doc, ("exclusions", i, key), f"matches no {key.replace('_', ' ')} "
                            f"(known: {', '.join(names[key])})", value=pattern,
                            suggestion=nearest(pattern, names[key]))
    if typo:
        return
    for i, hits in enumerate(exclusion_hits(release)):
        if hits == 0:
            out.add(doc, ("exclusions", i), "this exclusion matches no cell of the matrix; "
                    "remove it or fix its selectors", value=None)


def _check_features(release: Release, features: FeatureFile, doc: YamlDocument,
                    root: Path, out: _Collector) -> list[str]:
    platforms = list(release.platforms) + list(release.mobile_targets)
    seen: dict[str, int] = {}
    pending: list[str] = []
    for i, feature in enumerate(features.features):
        if feature.id in seen:
            out.add(doc, ("features", i, "id"),
                    f"duplicate feature id (first defined as features[{seen[feature.id]}])")
        seen.setdefault(feature.id, i)
        if feature.component not in release.components:
            out.add(doc, ("features", i, "component"),
                    f"names no component of release.yaml (known: {', '.join(release.components)})",
                    suggestion=nearest(feature.component, release.components))
        for platform in feature.status:
            if platform != "*" and platform not in platforms:
                out.add(doc, ("features", i, "status", platform),
                        "names no platform or mobile target of release.yaml", value=platform,
                        suggestion=nearest(platform, platforms))
        for j, test_id in enumerate(feature.tests):
            state = _test_state(root, test_id)
            if state == "pending":
                pending.append(test_id)
            elif state != "ok":
                out.add(doc, ("features", i, "tests", j), state, value=test_id)
    return pending


def _test_state(root: Path, test_id: str) -> str:
    """'ok', 'pending' (the file does not exist yet) or an error message."""
    file_part, _, rest = test_id.partition("::")
    path = root / file_part
    if not path.exists():
        return "pending"
    if not rest:
        return "ok"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except SyntaxError:
        return f"{file_part} does not parse"
    names = rest.split("::")
    scope: list[ast.stmt] = tree.body
    for name in names:
        bare = name.split("[")[0]
        match = next((n for n in scope if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef
                                                     | ast.ClassDef) and n.name == bare), None)
        if match is None:
            return f"no test {bare!r} in {file_part}"
        scope = match.body if isinstance(match, ast.ClassDef) else []
    return "ok"


def load_spec(root: Path, release_file: str = "release.yaml",
              feature_file: str = "feature_status.yaml") -> Spec:
    """Validate both files under `root`; raise SpecError listing every issue found."""
    out = _Collector()
    release_doc = load_yaml(root / release_file)
    feature_doc = load_yaml(root / feature_file)
    release = features = None
    try:
        release = Release.model_validate(release_doc.data)
    except ValidationError as exc:
        _pydantic_issues(exc, Release, release_doc, out)
    try:
        features = FeatureFile.model_validate(feature_doc.data)
    except ValidationError as exc:
        _pydantic_issues(exc, FeatureFile, feature_doc, out)
    pending: list[str] = []
    if release is not None:
        _check_release(release, release_doc, root, out)
        if features is not None:
            pending = _check_features(release, features, feature_doc, root, out)
    if out.issues:
        count = len(out.issues)
        body = "\n".join(f"  {issue}" for issue in out.issues)
        raise SpecError(f"{count} problem{'s' if count > 1 else ''} in the release description:\n{body}")
    assert release is not None and features is not None
    return Spec(root=root.resolve(), release=release, features=features, pending_tests=tuple(pending))
