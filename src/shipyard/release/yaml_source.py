"""Load YAML while remembering where every key and value stands, and refusing duplicate keys.

Errors downstream name the file and line of the offending key, so the loader keeps a map
from a value's path (a tuple of keys and list indexes) to its line. Anything that is not a
readable UTF-8 YAML mapping becomes a SpecError naming the file and line, never a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from shipyard.errors import NO_VALUE, InputError, SpecError, SpecIssue
from shipyard.plumbing.input_files import MAX_NESTING, read_input_text

PathKey = tuple[Any, ...]

_MERGE_TAG = "tag:yaml.org,2002:merge"
# Real release files hold a few hundred nodes; aliases can multiply a tiny file into billions.
_MAX_NODES = 100_000


class YamlFloat(float):
    """A YAML number that keeps the text it was written as: `3.10` reads as 3.1 but says "3.10"."""

    raw: str

    def __new__(cls, value: float, raw: str) -> YamlFloat:
        obj = super().__new__(cls, value)
        obj.raw = raw
        return obj


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


def value_at(data: Any, loc: PathKey) -> Any:
    """The value at path `loc` in loaded YAML data, or None when there is none."""
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _key_name(at: PathKey) -> str:
    return ".".join(str(p) for p in at) or "(top level)"


@dataclass
class _Builder:
    """Turns a composed node tree into plain data, recording the line of every path."""

    source: Path
    lines: dict[PathKey, int] = field(default_factory=dict)
    nodes: int = 0

    def fail(self, node: yaml.Node, at: PathKey, message: str, fix: str) -> SpecError:
        return SpecError(SpecIssue(self.source, node.start_mark.line + 1, _key_name(at), NO_VALUE, message, fix))

    def build(self, node: yaml.Node, at: PathKey, lines: dict[PathKey, int]) -> Any:
        self.nodes += 1
        if self.nodes > _MAX_NODES:
            # Name the top-level key whose aliases blew up, at its own line.
            raise SpecError(SpecIssue(self.source, self.lines.get(at[:1]), _key_name(at[:1]), NO_VALUE,
                                      f"more than {_MAX_NODES} values once aliases are expanded",
                                      "use fewer nested aliases (*name); a release file is a few hundred values"))
        if len(at) > MAX_NESTING:
            raise self.fail(node, at[:1], f"nested more than {MAX_NESTING} levels deep",
                            "a release file needs a few levels of nesting, not dozens")
        lines.setdefault(at, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, at, lines)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, at + (i,), lines) for i, item in enumerate(node.value)]
        return self._scalar(node, at)

    def _mapping(self, node: yaml.MappingNode, at: PathKey, lines: dict[PathKey, int]) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        merges: list[yaml.Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merges.append(value_node)
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                raise self.fail(key_node, at, "a key must be a plain name, not a list or a mapping",
                                "write the key as a single word followed by ':'")
            key = self._scalar(key_node, at)
            if key in result:
                raise self.fail(key_node, at + (key,),
                                f"duplicate key (the first is at line {lines.get(at + (key,), '?')})",
                                "a key may appear once; remove or merge one")
            lines[at + (key,)] = key_node.start_mark.line + 1
            result[key] = self.build(value_node, at + (key,), lines)
        # `<<: *base` (or a list of them) adds the keys this mapping does not set itself;
        # among several merged mappings the first one wins, as YAML specifies.
        for merge in merges:
            sources = merge.value if isinstance(merge, yaml.SequenceNode) else [merge]
            for source in sources:
                if not isinstance(source, yaml.MappingNode):
                    raise self.fail(merge, at + ("<<",), "a merge key '<<' takes a mapping or a list of "
                                    "mappings", "point it at an anchored mapping, e.g. '<<: *defaults'")
                merged_lines: dict[PathKey, int] = {}
                merged = self._mapping(source, at, merged_lines)
                for key, value in merged.items():
                    if key not in result:
                        result[key] = value
                        for loc, line in merged_lines.items():
                            if loc[:len(at) + 1] == at + (key,):
                                lines.setdefault(loc, line)
        return result

    def _scalar(self, node: yaml.Node, at: PathKey) -> Any:
        try:
            # PyYAML's safe constructor resolves the type (int, float, bool, str, date, …).
            value = _SCALARS.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
            problem = getattr(exc, "problem", None) or type(exc).__name__
            raise self.fail(node, at, f"value cannot be read: {problem}",
                            "quote it to make it plain text, or drop the '!' tag") from exc
        if isinstance(value, float) and not isinstance(value, bool):
            return YamlFloat(value, str(node.value))
        return value


_SCALARS = yaml.SafeLoader("")
# libyaml's parser when PyYAML has it: ten times faster, with the same nodes, marks and errors.
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read_text(path: Path) -> str:
    try:
        return read_input_text(path, kind="YAML", limit="YAML file",
                               missing_fix="create it, or pass --root with the folder that holds it",
                               restore_fix="restore the YAML file (git checkout -- <file>)",
                               folder_fix="pass --root with the folder that holds the file")
    except InputError as exc:
        raise SpecError(exc.issue) from None


def load_yaml(path: Path) -> YamlDocument:
    """Parse `path`; raise SpecError naming the file and line on bad YAML or duplicate keys."""
    return load_yaml_text(_read_text(path), path)


def load_yaml_text(text: str, path: Path) -> YamlDocument:
    """Parse `text`, the content of `path` (a file, or `ref:file` from git); SpecError as load_yaml."""
    try:
        node = yaml.compose(text, Loader=YAML_LOADER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        # Only PyYAML's own words: its str() quotes the offending line, which may hold a secret.
        problem = exc.problem or exc.context or type(exc).__name__
        raise SpecError(SpecIssue(path, mark.line + 1 if mark else None, "(syntax)", NO_VALUE,
                                  f"not valid YAML: {problem}",
                                  "fix the syntax at that line (indentation, a missing ':', an unclosed quote "
                                  "or bracket)")) from exc
    except yaml.reader.ReaderError as exc:
        raise SpecError(SpecIssue(path, text.count("\n", 0, exc.position) + 1, "(file)", NO_VALUE,
                                  f"holds a character YAML does not allow (#x{exc.character:04x})"
                                  if isinstance(exc.character, int) else "holds a character YAML does not allow",
                                  "remove control characters from the file")) from exc
    except yaml.YAMLError as exc:
        raise SpecError(SpecIssue(path, None, "(syntax)", NO_VALUE, f"not valid YAML: {type(exc).__name__}",
                                  "fix the file's syntax")) from exc
    except RecursionError as exc:
        raise SpecError(SpecIssue(path, None, "(syntax)", NO_VALUE, "nested too deeply to read",
                                  "a release file needs a few levels of nesting, not hundreds")) from exc
    if node is None:
        raise SpecError(SpecIssue(path, None, "(file)", NO_VALUE, "the file is empty",
                                  "it must hold a mapping that starts with 'schema_version: 1'"))
    builder = _Builder(path)
    try:
        data = builder.build(node, (), builder.lines)
    except RecursionError as exc:
        raise SpecError(SpecIssue(path, None, "(syntax)", NO_VALUE, "nested too deeply to read",
                                  "a release file needs a few levels of nesting, not hundreds")) from exc
    return YamlDocument(path=path, data=data, lines=builder.lines)
