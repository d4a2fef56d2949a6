"""The publish journal after a kill (#52 item 7): a last line cut short is ignored, and cut off
before the next entry, so that the journal stays readable for every run after that one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shipyard.publish.journal import Journal

SHA = "a" * 64


@pytest.mark.parametrize("torn", [b'{"event": "verified", "file": "x-1.0-py3', b"{", b'{"event": "ok"}'],
                         ids=["half an entry", "one byte", "a whole entry without its newline"])
def test_a_line_cut_short_by_a_kill_stays_readable_after_the_next_entries(tmp_path: Path, torn: bytes):
    journal = Journal(tmp_path / "state" / "wheels.jsonl")
    journal.record("verified", where="idx", file="a-1.0-py3-none-any.whl", sha256=SHA)
    with journal.path.open("ab") as out:
        out.write(torn)  # what a kill -9 in mid-write leaves
    assert [e["file"] for e in journal.events("verified")] == ["a-1.0-py3-none-any.whl"]
    # The run after the kill records its steps, and the one after it reads them.
    journal.record("verified", where="idx", file="b-1.0-py3-none-any.whl", sha256=SHA)
    journal.record("switched", where="idx")
    again = Journal(journal.path)
    assert again.verified("idx") == {"a-1.0-py3-none-any.whl": SHA, "b-1.0-py3-none-any.whl": SHA}
    assert [e["event"] for e in again.events()] == ["verified", "verified", "switched"]
    assert journal.path.read_bytes().count(b"\n") == 3 and journal.path.read_bytes().endswith(b"\n")


def test_a_journal_that_is_one_torn_line_starts_over(tmp_path: Path):
    path = tmp_path / "wheels.jsonl"
    path.write_bytes(b'{"event": "sta')
    Journal(path).record("stage", where="idx")
    assert [e["event"] for e in Journal(path).events()] == ["stage"]


def test_a_new_journal_is_on_the_disk_with_its_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    journal = Journal(tmp_path / "state" / "wheels.jsonl")
    journal.record("stage", where="idx")
    assert synced == [str(journal.path), str(journal.path.parent)]
    synced.clear()
    journal.record("switched", where="idx")
    assert synced == [str(journal.path)]  # the folder holds that name already
