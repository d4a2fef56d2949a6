"""Reading the files shipyard is given: one line per problem, exit status 2, never a traceback,
never a hang.

Every file a command reads (release.yaml, feature_status.yaml and the test files it lists,
dist/manifest.json and its fragments, provenance envelopes, SBOMs, the publish journal, the CI
plan, --previous files, keys) goes through these readers, so a missing file, a FIFO or device
where a file should be, a file too large, bad bytes, bad encoding, bad JSON, JSON nested too
deeply or with a key twice, and a wrong shape all answer `file[:line]: key: message; fix (got
value)` (errors.SpecIssue) with InputError's exit status 2.

Bounds: each kind of file has a size limit (INPUT_LIMITS, generous: ten to a hundred times
what a real one holds); JSON and YAML may nest MAX_NESTING levels. The environment variable
SHIPYARD_INPUT_LIMIT (bytes) lowers every size limit to it, to try the limits on small files.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, TypeVar

from pydantic import BaseModel, ValidationError

from shipyard.errors import NO_VALUE, InputError, SpecIssue

Model = TypeVar("Model", bound=BaseModel)

_MiB = 1024 * 1024
# The most bytes a command reads from one file of each kind. A file over its limit is refused
# before it is read, so a runaway or hostile file cannot fill memory.
INPUT_LIMITS: Final[dict[str, int]] = {
    "YAML file": 16 * _MiB,  # release.yaml, feature_status.yaml (a real one is a few tens of KiB)
    "test file": 16 * _MiB,  # a test file feature_status.yaml lists (read to find its tests)
    "manifest": 64 * _MiB,  # dist/manifest.json and a fragment's (a few KiB per artifact)
    "variants record": 64 * _MiB,  # dist/variant-wheels.json
    "journal": 256 * _MiB,  # a publish journal (one short line per step)
    "CI plan": 4 * _MiB,  # the CI plan job's outputs
    "SBOM": 64 * _MiB,  # a CycloneDX SBOM inside an artifact
    "envelope": 16 * _MiB,  # a DSSE provenance envelope
    "key": 1 * _MiB,  # a PEM key (a few hundred bytes)
}
LIMIT_VARIABLE: Final = "SHIPYARD_INPUT_LIMIT"
# How deep JSON and YAML may nest. shipyard's own files nest under ten levels; a limit far below
# Python's recursion limit keeps every reader of the data (pydantic, json.dumps) from running out.
MAX_NESTING: Final = 64


def input_limit(kind: str) -> int:
    """The most bytes a file of `kind` (a key of INPUT_LIMITS) may hold; SHIPYARD_INPUT_LIMIT lowers it."""
    limit = INPUT_LIMITS[kind]
    lowered = os.environ.get(LIMIT_VARIABLE, "")
    return min(limit, int(lowered)) if lowered.isdigit() else limit


def _size(count: int) -> str:
    return f"{count / _MiB:g} MiB" if count >= _MiB else f"{count} bytes"


def input_error(path: Path | str, key: str, message: str, fix: str, *, line: int | None = None,
                value: Any = NO_VALUE) -> InputError:
    """An InputError for one problem at `key` of `path` (`(file)` for the whole file)."""
    return InputError(SpecIssue(Path(path), line, key, value, message, fix))


def _not_a_file(mode: int) -> str | None:
    """What a file of `mode` is when it is not a regular file (a FIFO would block a read forever)."""
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def check_input_size(size: int, path: Path | str, *, limit: str, fix: str) -> None:
    """InputError when `size` bytes are more than a file of INPUT_LIMITS kind `limit` may hold."""
    most = input_limit(limit)
    if size > most:
        raise input_error(path, "(file)", f"larger than the {_size(most)} a {limit} may hold", fix)


def read_input_bytes(path: Path, *, limit: str, missing_fix: str, folder_fix: str | None = None,
                     restore_fix: str | None = None) -> bytes:
    """The bytes of the regular file `path`, at most INPUT_LIMITS[limit] of them; InputError when it
    is missing, a folder, a FIFO, device or socket, unreadable or too large. Never blocks: the
    kind of file is checked before it is opened, and it is opened non-blocking."""
    folder_fix = folder_fix or missing_fix
    restore_fix = restore_fix or missing_fix
    try:
        mode = os.stat(path).st_mode
        what = "is a directory, not a file" if stat.S_ISDIR(mode) else None
        special = _not_a_file(mode) if what is None else None
        if what or special:
            raise input_error(path, "(file)", what or f"is {special}, not a regular file", folder_fix)
        # O_NONBLOCK: should a FIFO replace the file between the stat and the open, neither the
        # open nor a read waits for a writer; fstat then tells it apart.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        try:
            special = _not_a_file(os.fstat(fd).st_mode)
            if special:
                raise input_error(path, "(file)", f"is {special}, not a regular file", folder_fix)
            most = input_limit(limit)
            chunks: list[bytes] = []
            size = 0
            while size <= most:
                chunk = os.read(fd, min(most + 1 - size, _MiB))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise input_error(path, "(file)", "file not found", missing_fix) from None
    except IsADirectoryError:
        raise input_error(path, "(file)", "is a directory, not a file", folder_fix) from None
    except NotADirectoryError:
        raise input_error(path, "(file)", "a parent of this path is a file, not a folder", folder_fix) from None
    except OSError as exc:
        raise input_error(path, "(file)", f"cannot be read: {exc.strerror or type(exc).__name__}",
                          "check its permissions") from None
    check_input_size(size, path, limit=limit, fix=restore_fix)
    return b"".join(chunks)


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


def read_input_text(path: Path, *, kind: str, limit: str, missing_fix: str, restore_fix: str,
                    folder_fix: str | None = None, encoding_fix: str = "save the file as UTF-8") -> str:
    """The UTF-8 text of `path`, a file of INPUT_LIMITS kind `limit` (see read_input_bytes and decode_input)."""
    data = read_input_bytes(path, limit=limit, missing_fix=missing_fix, folder_fix=folder_fix, restore_fix=restore_fix)
    return decode_input(data, path, kind=kind, restore_fix=restore_fix, encoding_fix=encoding_fix)


# A JSON string (skipped: brackets inside it do not nest) or a bracket.
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)


def _too_deep_at(text: str) -> int | None:
    """The offset of the first bracket of `text` that opens level MAX_NESTING + 1, or None."""
    if text.count("[") + text.count("{") <= MAX_NESTING:
        return None  # the common case, a journal line or a small file: too few brackets to be too deep
    depth = 0
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_NESTING:
                return match.start()
        elif token in "]}":
            depth -= 1
    return None


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json keeps the last of two equal keys; which one a writer meant is unknowable, so neither is taken.
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def parse_json_input(text: str, path: Path | str, *, restore_fix: str, first_line: int = 1) -> Any:
    """`text` parsed as JSON; InputError with the line of a syntax error, of a bracket nested
    deeper than MAX_NESTING, or naming a key that an object holds twice. `first_line` is the
    line of `text`'s start in the file (a journal line)."""
    deep = _too_deep_at(text)
    if deep is not None:
        raise input_error(path, "(syntax)", f"nested more than {MAX_NESTING} levels deep", restore_fix,
                          line=first_line + text.count("\n", 0, deep))
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        # json's own words and position only: the text around the error may be anything.
        raise input_error(path, "(syntax)", f"not valid JSON: {exc.msg}", restore_fix,
                          line=first_line + exc.lineno - 1) from None
    except _DuplicateKey as exc:
        shown = exc.key if len(exc.key) <= 80 and exc.key.isprintable() else exc.key[:40] + "…"
        raise input_error(path, "(syntax)", f"the key {shown!r} appears twice in one object", restore_fix,
                          line=first_line if "\n" not in text else None) from None
    except RecursionError:
        raise input_error(path, "(syntax)", "nested too deeply to read", restore_fix) from None


def read_json_input(path: Path, *, limit: str, missing_fix: str, restore_fix: str,
                    folder_fix: str | None = None) -> Any:
    """The JSON document in `path` (shipyard writes every one), a file of INPUT_LIMITS kind `limit`:
    the one reader of every JSON file a command is given."""
    text = read_input_text(path, kind="JSON", limit=limit, missing_fix=missing_fix, restore_fix=restore_fix,
                           folder_fix=folder_fix, encoding_fix=restore_fix)
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


def folder_problem(path: Path) -> str | None:
    """Why `path` cannot be a folder shipyard reads from or writes into (it is a file, or a parent
    of it is a file), None when it is a folder or can be made one."""
    for part in (path, *path.parents):
        try:
            mode = os.stat(part).st_mode
        except FileNotFoundError:
            continue
        except NotADirectoryError:
            continue  # a parent is a file: the loop reaches it and says so
        except OSError as exc:
            return f"cannot be looked at: {exc.strerror or type(exc).__name__}"
        if stat.S_ISDIR(mode):
            return None
        return "is a file, not a folder" if part == path else f"{part} is a file, not a folder"
    return None


def usable_folder(path: Path, option: str, fix: str) -> Path:
    """`path`, given as `option` (--dist, --state), once it is a folder or can be made one;
    InputError (one line, exit 2) when it is a file or below a file."""
    problem = folder_problem(path)
    if problem:
        raise input_error(path, option, problem, fix)
    return path
