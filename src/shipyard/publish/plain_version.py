"""The PyPI flavour: a wheel of the default variant under the plain version (PyPI refuses local
versions such as 1.7.0+cpu), with METADATA, the .dist-info folder and RECORD rewritten.

The `wheel` package's WheelFile checks every hash of the source wheel while reading it and
writes RECORD (sha256 and size of every entry) while writing the new one. The result depends
only on the source's bytes: entry order, modes and dates are kept, and RECORD is dated like the
source's own RECORD, so a re-run gives the same file and the same sha256 (an immutable name
must never change its bytes).
"""

from __future__ import annotations

import calendar
import json
import re
import shutil
import tempfile
from pathlib import Path
from zipfile import ZipInfo

from packaging.utils import parse_wheel_filename
from packaging.version import Version
from wheel.wheelfile import WheelFile

from shipyard.plumbing.atomic_files import replace_if_changed, write_atomic
from shipyard.plumbing.hashing import sha256_of
from shipyard.wheel.repair import source_date_epoch


def plain_name(wheel_name: str) -> str:
    """The wheel's file name without the local version label (the same name if it has none)."""
    name, version, _, _ = parse_wheel_filename(wheel_name)
    if not version.local:
        return wheel_name
    local = f"{version.public}+{version.local}"
    stem = wheel_name[: -len(".whl")]
    head, tail = stem.split(f"-{local}-", 1) if f"-{local}-" in stem else stem.split(f"-{version}-", 1)
    return f"{head}-{version.public}-{tail}.whl"


def plain_version_wheel(wheel: Path, out_dir: Path) -> Path:
    """`wheel` rewritten under its plain version into `out_dir` (reused when already there with
    the bytes this function makes: the output is a pure function of the input). A rewrite made
    before from the same source bytes, with its bytes unchanged since, is kept without rewriting:
    `<name>.source.json` beside it records both sha256s (an unchanged re-publish rewrites nothing)."""
    target = out_dir / plain_name(wheel.name)
    if target.name == wheel.name:
        return wheel
    memo = target.with_name(target.name + ".source.json")
    source_sha256 = sha256_of(wheel)
    if _made_from(memo, target, source_sha256):
        return target
    _, version, _, _ = parse_wheel_filename(wheel.name)
    public = Version(str(version)).public
    out_dir.mkdir(parents=True, exist_ok=True)
    # WheelFile reads the dist-info name from the file name: a temp folder keeps it.
    workdir = Path(tempfile.mkdtemp(prefix=".plain-", dir=out_dir))
    tmp = workdir / target.name
    with WheelFile(wheel) as source:
        old_info = source.dist_info_path
        record_date = source.getinfo(source.record_path).date_time
        with WheelFile(tmp, "w") as plain:
            new_info = plain.dist_info_path
            for info in source.infolist():
                if info.filename == source.record_path:
                    continue
                data = source.read(info)  # WheelFile checks the entry against the source's RECORD
                name = info.filename
                if name.startswith(old_info + "/"):
                    name = new_info + name[len(old_info):]
                if name == f"{new_info}/METADATA":
                    data = re.sub(rb"(?m)^Version: .*$", f"Version: {public}".encode(), data, count=1)
                entry = ZipInfo(name, date_time=info.date_time)
                entry.external_attr, entry.compress_type = info.external_attr, info.compress_type
                plain.writestr(entry, data)
            with source_date_epoch(calendar.timegm((*record_date, 0, 0, 0))):
                plain.close()  # writes RECORD, dated like the source's
    replace_if_changed(tmp, target)
    shutil.rmtree(workdir, ignore_errors=True)
    write_atomic(memo, json.dumps({"source_sha256": source_sha256, "sha256": sha256_of(target)}) + "\n")
    return target


def _made_from(memo: Path, target: Path, source_sha256: str) -> bool:
    """Whether `target` is the rewrite of the source with `source_sha256`, untouched since."""
    try:
        made = json.loads(memo.read_text())
        return bool(made["source_sha256"] == source_sha256 and target.is_file() and sha256_of(target) == made["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return False  # no memo or a damaged one: rewrite (the rewrite is the truth, the memo a shortcut)
