"""A generation switch that survives a crash (#52 item 7): every file and folder of the staged
generation is on the disk before the link is renamed to it, and the rename itself after."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shipyard.plumbing.generations import next_generation, switch


def test_the_staged_generation_is_fsynced_before_the_switch_and_the_switch_after(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch):
    link = tmp_path / "channel" / "nightly"
    link.parent.mkdir()
    staged = next_generation(link)
    (staged / "cpu" / "ab").mkdir(parents=True)
    (staged / "cpu" / "ab" / "ab-1.0-py3-none-any.whl").write_bytes(b"wheel")
    (staged / "cpu" / "ab" / "index.html").write_text("<a>")
    synced: list[tuple[str, bool]] = []  # path, and whether the link pointed at the generation then
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append((os.readlink(f"/proc/self/fd/{fd}"), link.is_symlink() and link.resolve() == staged))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    switch(link, staged)
    assert link.resolve() == staged
    before = {path for path, switched in synced if not switched}
    assert {str(staged / "cpu" / "ab" / "ab-1.0-py3-none-any.whl"), str(staged / "cpu" / "ab" / "index.html"),
            str(staged / "cpu" / "ab"), str(staged / "cpu"), str(staged), str(link.parent)} <= before, synced
    assert synced[-1] == (str(link.parent), True), synced  # the rename, on the disk
