"""Every problem with release.yaml or feature_status.yaml as a `SpecIssue`: the collector that
places it at its file, line and key, and pydantic's errors explained in the user's words (what
the key takes, the fix, the nearest valid value for a typo)."""

from __future__ import annotations

import re
import types
import typing
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from shipyard.errors import NO_VALUE, SpecIssue, nearest
from shipyard.release.fields import PATTERN_HINTS
from shipyard.release.yaml_source import PathKey, YamlDocument, value_at

MISSING = NO_VALUE


@dataclass
class Collector:
    """The issues found so far, each placed at its file, line and key."""

    issues: list[SpecIssue] = field(default_factory=list)

    def add(self, doc: YamlDocument, loc: PathKey, message: str, *, value: Any = MISSING,
            suggestion: str | None = None, fix: str = "") -> None:
        if value is MISSING:
            value = value_at(doc.data, loc)
        if not fix and "; " in message:
            message, fix = message.split("; ", 1)
        key = ".".join(str(p) for p in loc) or "(top level)"
        self.issues.append(SpecIssue(doc.path, doc.line_of(loc), key, value, message, fix, suggestion))


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


_TYPE_WORDS: dict[str, tuple[str, str]] = {
    "string_type": ("must be text", "write it as text"),
    "int_type": ("must be a whole number", "write e.g. 11"),
    "int_parsing": ("must be a whole number", "write e.g. 11"),
    "int_from_float": ("must be a whole number", "write e.g. 11"),
    "float_type": ("must be a number", "write e.g. 40"),
    "float_parsing": ("must be a number", "write e.g. 40"),
    "finite_number": ("must be a finite number", "write e.g. 40"),
    "bool_type": ("must be true or false", "write true or false"),
    "bool_parsing": ("must be true or false", "write true or false"),
    "dict_type": ("must be a mapping of 'key: value' lines", "indent its entries under it"),
    "model_type": ("must be a mapping of 'key: value' lines", "indent its keys under it"),
    "model_attributes_type": ("must be a mapping of 'key: value' lines", "indent its keys under it"),
    "tuple_type": ("must be a list", "write [a, b] or one '- item' line per entry"),
    "list_type": ("must be a list", "write [a, b] or one '- item' line per entry"),
    "too_short": ("must not be empty", "list at least one entry"),
}


def _explain(err: Any, model: type[BaseModel], loc: PathKey) -> tuple[str, str, str | None]:
    """(message, fix, suggestion) for one pydantic error, in the words of release.yaml."""
    kind, ctx, given = err["type"], err.get("ctx", {}), err.get("input")
    if kind == "extra_forbidden":
        parent = _model_at(model, loc[:-1])
        fields = [n for n in (parent.model_fields if parent else {}) if n != "name"]
        return (f"unknown key {loc[-1]!r}", f"remove or rename it (valid keys here: {', '.join(fields)})",
                nearest(str(loc[-1]), fields))
    if kind == "missing":
        return "required key is missing", f"add the line '{loc[-1]}:' here", None
    if kind == "literal_error":
        expected = [a or b for a, b in re.findall(r"'([^']*)'|\b(\d+)\b", ctx.get("expected", ""))]
        if loc == ("schema_version",):
            return (f"this shipyard reads schema_version {' or '.join(expected)} only",
                    f"set schema_version: {expected[-1]}, or use the shipyard that writes this version", None)
        return f"must be one of {', '.join(expected)}", "use one of those", nearest(str(given), expected)
    if kind == "string_pattern_mismatch":
        what, fix = PATTERN_HINTS.get(ctx.get("pattern", ""), ("has the wrong form", f"match {ctx.get('pattern')}"))
        return what, fix, None
    if kind == "string_type" and isinstance(given, int | float) and not isinstance(given, bool):
        return "must be text, not a number", f"quote it: \"{getattr(given, 'raw', None) or given}\"", None
    if kind in _TYPE_WORDS:
        return (*_TYPE_WORDS[kind], None)
    if kind in ("greater_than", "greater_than_equal"):
        bound = ctx.get("gt", ctx.get("ge"))
        return (f"must be {'greater than' if kind == 'greater_than' else 'at least'} {bound:g}", "use a larger value",
                None)
    if kind == "string_too_short":
        return f"must be at least {ctx.get('min_length')} characters", "write a few words", None
    message = err["msg"].removeprefix("Value error, ")
    message, _, fix = message.partition("; ")
    return message, fix or "see docs/release-yaml.md for what this key takes", None


def pydantic_issues(exc: ValidationError, model: type[BaseModel], doc: YamlDocument,
                     out: Collector) -> None:
    errors = exc.errors()
    for err in errors:
        loc = tuple(part for part in err["loc"] if part != "[key]")
        # A list whose every item failed is also "too short": the item's own error says it all.
        if err["type"] == "too_short" and any(len(e["loc"]) > len(err["loc"]) and e["loc"][:len(err["loc"])]
                                              == err["loc"] for e in errors):
            continue
        message, fix, suggestion = _explain(err, model, loc)
        value = None if err["type"] == "missing" else err.get("input")
        out.add(doc, loc, message, value=value, fix=fix, suggestion=suggestion)
