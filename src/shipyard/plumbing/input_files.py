"""Reading the files shipyard is given: one line per problem, exit status 2, never a traceback.

Every file a command reads (release.yaml, feature_status.yaml, dist/manifest.json and its
fragments, provenance envelopes, SBOMs, the publish journal, --previous files, keys) goes through
these readers, so a missing file, bad bytes, bad encoding, bad JSON and a wrong shape all answer
`file[:line]: key: message; fix (got value)` (errors.SpecIssue) with InputError's exit status 2.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from shipyard.errors import NO_VALUE, ShipyardError, SpecIssue

Model = TypeVar("Model", bound=BaseModel)


class InputError(ShipyardError, exit_code=2):
    """A file a command reads is missing, unreadable or not what it must hold: one line."""

    def __init__(self, issue: SpecIssue) -> None:
        self.issue = issue
        super().__init__(str(issue))


def input_error(path: Path | str, key: str, message: str, fix: str, *, line: int | None = None,
                value: Any = NO_VALUE) -> InputError:
    """An InputError for one problem at `key` of `path` (`(file)` for the whole file)."""
    return InputError(SpecIssue(Path(path), line, key, value, message, fix))


def read_input_bytes(path: Path, *, missing_fix: str, folder_fix: str | None = None) -> bytes:
    """The bytes of `path`; InputError when it is missing, a folder or unreadable."""
    folder_fix = folder_fix or missing_fix
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise input_error(path, "(file)", "file not found", missing_fix) from None
    except IsADirectoryError:
        raise input_error(path, "(file)", "is a directory, not a file", folder_fix) from None
    except NotADirectoryError:
        raise input_error(path, "(file)", "a parent of this path is a file, not a folder", folder_fix) from None
    except OSError as exc:
        raise input_error(path, "(file)", f"cannot be read: {exc.strerror or type(exc).__name__}",
                          "check its permissions") from None


def decode_input(data: bytes, path: Path | str, *, kind: str, restore_fix: str,
                 encoding_fix: str = "save the file as UTF-8") -> str:
    """`data` as UTF-8 text (a BOM is dropped); InputError naming the line of a NUL byte or of the
    first byte that is not UTF-8. `kind` names what the file holds (YAML, JSON); a file shipyard
    wrote itself passes its `restore_fix` as `encoding_fix` too (nobody saves it by hand)."""
    if b"\0" in data[:8192]:
        raise input_error(path, "(file)", f"is a binary file, not {kind} text", restore_fix,
                          line=data.count(b"\n", 0, data.index(b"\0")) + 1)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise input_error(path, "(file)", f"is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
                          encoding_fix, line=data.count(b"\n", 0, exc.start) + 1) from None


def read_input_text(path: Path, *, kind: str, missing_fix: str, restore_fix: str, folder_fix: str | None = None,
                    encoding_fix: str = "save the file as UTF-8") -> str:
    """The UTF-8 text of `path` (see read_input_bytes and decode_input)."""
    data = read_input_bytes(path, missing_fix=missing_fix, folder_fix=folder_fix)
    return decode_input(data, path, kind=kind, restore_fix=restore_fix, encoding_fix=encoding_fix)


def parse_json_input(text: str, path: Path | str, *, restore_fix: str, first_line: int = 1) -> Any:
    """`text` parsed as JSON; InputError with the line of a syntax error. `first_line` is the
    line of `text`'s start in the file (a journal line)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        # json's own words and position only: the text around the error may be anything.
        raise input_error(path, "(syntax)", f"not valid JSON: {exc.msg}", restore_fix,
                          line=first_line + exc.lineno - 1) from None
    except RecursionError:
        raise input_error(path, "(syntax)", "nested too deeply to read", restore_fix) from None


def read_json_input(path: Path, *, missing_fix: str, restore_fix: str, folder_fix: str | None = None) -> Any:
    """The JSON document in `path` (shipyard writes every one): the one reader of every JSON file
    a command is given."""
    text = read_input_text(path, kind="JSON", missing_fix=missing_fix, restore_fix=restore_fix, folder_fix=folder_fix,
                           encoding_fix=restore_fix)
    return parse_json_input(text, path, restore_fix=restore_fix)


def validated(model: type[Model], data: Any, path: Path | str, *, fix: str, line: int | None = None,
              line_of: Callable[[tuple[Any, ...]], int | None] | None = None) -> Model:
    """`data` as `model`; InputError naming the first bad key (dotted, `(top level)` for the whole
    document), pydantic's message and the value found there. `line_of` gives a key's line (YAML)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(part for part in first["loc"] if part != "[key]")
        key = ".".join(str(p) for p in loc) or "(top level)"
        found = first.get("input", NO_VALUE)
        shown = found if isinstance(found, str | int | float | bool) and loc else NO_VALUE
        raise input_error(path, key, first["msg"].removeprefix("Value error, "), fix,
                          line=line_of(loc) if line_of else line, value=shown) from None
