"""Load YAML while remembering where every key and value stands, and refusing duplicate keys.

Errors downstream name the file and line of the offending key, so the loader keeps a map
from a value's path (a tuple of keys and list indexes) to its line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from shipyard.errors import SpecError

PathKey = tuple[Any, ...]


@dataclass(frozen=True)
class YamlDocument:
    """A parsed YAML file: its data and the line (1-based) of every path in it."""

    path: Path
    data: Any
    lines: dict[PathKey, int] = field(default_factory=dict)

    def line_of(self, loc: PathKey) -> int | None:
        """The line of `loc`, or of its nearest ancestor that has one."""
        loc = tuple(loc)
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return self.lines.get((), None)

    def where(self, loc: PathKey) -> str:
        line = self.line_of(loc)
        return f"{self.path}:{line}" if line else str(self.path)


def _construct(node: yaml.Node, at: PathKey, lines: dict[PathKey, int], source: Path) -> Any:
    lines.setdefault(at, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _construct(key_node, at + ("<key>",), {}, source)
            if key in result:
                raise SpecError(
                    f"{source}:{key_node.start_mark.line + 1}: duplicate key {key!r} in "
                    f"{'/'.join(map(str, at)) or 'the top level'}; a key may appear once "
                    f"(the first is at line {lines.get(at + (key,), '?')}). Remove or merge one.")
            lines[at + (key,)] = key_node.start_mark.line + 1
            result[key] = _construct(value_node, at + (key,), lines, source)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_construct(item, at + (i,), lines, source) for i, item in enumerate(node.value)]
    # Scalars: PyYAML's safe constructor resolves the type (int, float, bool, str, …).
    return _SCALARS.construct_object(node, deep=True)


_SCALARS = yaml.SafeLoader("")


def load_yaml(path: Path) -> YamlDocument:
    """Parse `path`; raise SpecError naming the file and line on bad YAML or duplicate keys."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise SpecError(f"{path}: file not found") from exc
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(f"{where}: not valid YAML: {problem}. Fix the syntax at that line "
                        f"(indentation, a missing ':' or an unclosed quote or bracket).") from exc
    if node is None:
        raise SpecError(f"{path}: the file is empty; it must hold a mapping with schema_version")
    lines: dict[PathKey, int] = {}
    data = _construct(node, (), lines, path)
    return YamlDocument(path=path, data=data, lines=lines)
