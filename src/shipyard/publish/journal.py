"""The journal: what a publish has done, one JSON line per step, under the state folder.

A publish killed at any moment (kill -9) is finished by running it again: each step is recorded
after it happened (fsync'd), and on a re-run the targets read the journal to skip what was
already verified, while the servers' own listings decide what still needs uploading. The last
line of a killed run may be cut short; it is ignored, and cut off before the next entry is
appended. The journal holds names, hashes and URLs
without credentials, never a secret.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from pathlib import Path
from typing import Any

from shipyard.errors import InputError
from shipyard.plumbing.atomic_files import sync_folder
from shipyard.plumbing.identifiers import file_name_problem, image_reference_problem
from shipyard.plumbing.input_files import decode_input, input_error, parse_json_input, read_input_bytes

# The journal only speeds a re-run up (the servers' listings decide what is uploaded): a damaged one can go.
JOURNAL_FIX = "delete the journal (a re-run checks every file against the servers again)"
# A file's sha256, or an image's digest as the registry names it (sha256:<hex>).
_SHA256 = re.compile(r"(sha256:)?[0-9a-f]{64}")


def _cut_torn_line(fd: int) -> None:
    """Truncate the file open as `fd` after its last newline when its end has none (a write that a
    kill cut short)."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    end = size
    while end > 0:
        start = max(0, end - 65536)
        newline = os.pread(fd, end - start, start).rfind(b"\n")
        if newline >= 0:
            os.ftruncate(fd, start + newline + 1)
            return
        end = start
    os.ftruncate(fd, 0)  # one line, all of it torn


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def record(self, event: str, **fields: Any) -> None:
        """Append one entry and fsync it (and, for a new journal, its folder) before returning: a
        step recorded is a step a re-run can trust. A last line cut short by a kill is cut off
        first, so that it does not become a damaged line in the middle of the journal."""
        line = json.dumps({"event": event, "time": round(time.time(), 3), **fields}, sort_keys=True)
        created = not self.path.exists()
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            _cut_torn_line(fd)
            os.write(fd, (line + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            sync_folder(self.path.parent)

    def events(self, event: str | None = None) -> list[dict[str, Any]]:
        """Every entry (of kind `event`); InputError (one line, exit 2) naming the line of one that
        is not an entry. Only the last line may be cut short (a kill -9 in mid-write): it is ignored."""
        if not self.path.exists():
            return []
        data = read_input_bytes(self.path, limit="journal", missing_fix=JOURNAL_FIX,
                                folder_fix="pass --state with the folder that holds the publish journals")
        lines = data.split(b"\n")
        out = []
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                entry = parse_json_input(decode_input(raw, self.path, kind="JSON", restore_fix=JOURNAL_FIX,
                                                      encoding_fix=JOURNAL_FIX),
                                         self.path, restore_fix=JOURNAL_FIX, first_line=number)
            except InputError as exc:
                if number == len(lines):  # no newline after it: the line a kill -9 cut short
                    continue
                raise InputError(dataclasses.replace(exc.issue, line=number)) from None
            if not isinstance(entry, dict) or not isinstance(entry.get("event"), str):
                raise input_error(self.path, "(line)", "not a journal entry (a JSON object with an event)",
                                  JOURNAL_FIX, line=number)
            if event is None or entry["event"] == event:
                out.append(entry)
        return out

    def verified(self, where: str) -> dict[str, str]:
        """filename -> sha256 of every file recorded as verified at `where` (a staging index)."""
        out = {}
        for entry in self.events("verified"):
            if entry.get("where") != where:
                continue
            if not isinstance(entry.get("file"), str) or not isinstance(entry.get("sha256"), str):
                raise input_error(self.path, "verified", "an entry without its file and sha256", JOURNAL_FIX)
            # A file the publish sent is named by its file name, an image by its reference: anything
            # else (../../etc/passwd) is no file this journal could have recorded.
            if file_name_problem(entry["file"]) and image_reference_problem(entry["file"]):
                raise input_error(self.path, "verified.file", "names no file a publish sends (a file name or an image "
                                  "reference)", JOURNAL_FIX, value=entry["file"])
            # A re-run skips the upload of a file whose sha256 matches this one: it must be a digest.
            if not _SHA256.fullmatch(entry["sha256"]):
                raise input_error(self.path, "verified.sha256", "not a sha256 digest (64 lowercase hex digits, "
                                  "or sha256:<hex> for an image)", JOURNAL_FIX, value=entry["sha256"])
            out[entry["file"]] = entry["sha256"]
        return out
