"""A wheel rewritten without a rebuild: another version, and extra .dist-info files, every other
entry copied byte for byte (the PyPI flavour's plain version, a PEP 825 variant of one package).
Both folders named after the version move with it: `<name>-<version>.dist-info` and
`<name>-<version>.data` (scripts, headers, data files), as installers look them up by that name.

The `wheel` package's WheelFile checks every hash of the source wheel while reading it and
writes RECORD (sha256 and size of every entry) while writing the new one. The result depends
only on the source's bytes and what is added: entry order, modes and dates are kept, and RECORD
is dated like the source's own RECORD, so a re-run gives the same file and the same sha256 (an
immutable name must never change its bytes).
"""

from __future__ import annotations

import calendar
import hashlib
import json
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from zipfile import ZipInfo

from wheel.wheelfile import WheelFile

from shipyard.plumbing.atomic_files import replace_if_changed, write_atomic
from shipyard.plumbing.hashing import sha256_of
from shipyard.wheel.repair import source_date_epoch


def repack(wheel: Path, target: Path, *, version: str, add: Mapping[str, bytes] = {}) -> Path:
    """`wheel` rewritten to `target` under `version` with `add` (file name -> bytes) in its
    .dist-info; reused when already there with the bytes this function makes (it is a pure
    function of its input). `<target>.source.json` beside it records the source's sha256, what was
    added and the result's sha256: an unchanged re-run rewrites nothing."""
    memo = target.with_name(target.name + ".source.json")
    source_sha256 = sha256_of(wheel)
    made_of: dict[str, object] = {"source_sha256": source_sha256, "version": version,
               "added": {name: hashlib.sha256(data).hexdigest() for name, data in sorted(add.items())}}
    if _made_from(memo, target, made_of):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # WheelFile reads the dist-info name from the file name: the temp file carries the plain
    # wheel name of the new version (a variant label after it is no part of that name).
    stem = wheel.name[: -len(".whl")].split("-")
    plain = "-".join([stem[0], version, *stem[2:]]) + ".whl"
    workdir = Path(tempfile.mkdtemp(prefix=".repack-", dir=target.parent))
    tmp = workdir / plain
    with WheelFile(wheel) as source:
        old_info = source.dist_info_path
        record_date = source.getinfo(source.record_path).date_time
        with WheelFile(tmp, "w") as out:
            new_info = out.dist_info_path
            old_data, new_data = (f"{info.removesuffix('.dist-info')}.data" for info in (old_info, new_info))
            for info in source.infolist():
                if info.filename == source.record_path or info.filename in {f"{old_info}/{a}" for a in add}:
                    continue
                data = source.read(info)  # WheelFile checks the entry against the source's RECORD
                entry_name = info.filename
                for old, new in ((old_info, new_info), (old_data, new_data)):
                    if entry_name.startswith(old + "/"):
                        entry_name = new + entry_name[len(old):]
                if entry_name == f"{new_info}/METADATA":
                    data = re.sub(rb"(?m)^Version: .*$", f"Version: {version}".encode(), data, count=1)
                entry = ZipInfo(entry_name, date_time=info.date_time)
                entry.external_attr, entry.compress_type = info.external_attr, info.compress_type
                out.writestr(entry, data)
            for added, data in sorted(add.items()):
                entry = ZipInfo(f"{new_info}/{added}", date_time=record_date)
                entry.external_attr = 0o644 << 16
                out.writestr(entry, data)
            with source_date_epoch(calendar.timegm((*record_date, 0, 0, 0))):
                out.close()  # writes RECORD, dated like the source's
    replace_if_changed(tmp, target)
    shutil.rmtree(workdir, ignore_errors=True)
    write_atomic(memo, json.dumps({**made_of, "sha256": sha256_of(target)}, sort_keys=True) + "\n")
    return target


def _made_from(memo: Path, target: Path, made_of: dict[str, object]) -> bool:
    """Whether `target` is the rewrite `made_of` describes, untouched since."""
    try:
        made = json.loads(memo.read_text())
        sha256 = made.pop("sha256")
        return bool(made == made_of and target.is_file() and sha256_of(target) == sha256)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False  # no memo or a damaged one: rewrite (the rewrite is the truth, the memo a shortcut)
