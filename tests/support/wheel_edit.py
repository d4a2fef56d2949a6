"""Change one file inside a built wheel and keep the wheel valid: the tests and `bench-docker`
use it to make "one wheel changed" without a rebuild. `wheel`'s WheelFile writes RECORD."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from wheel.wheelfile import WheelFile


def append_to_wheel_member(wheel: Path, member: str, extra: bytes) -> None:
    """Append `extra` to `member` of `wheel`, in place; every other entry is copied as it was."""
    with tempfile.TemporaryDirectory(prefix=".edit-", dir=wheel.parent) as work:
        edited = Path(work) / wheel.name  # WheelFile reads the dist-info name from the file name
        with WheelFile(wheel) as source, WheelFile(edited, "w") as target:
            for info in source.infolist():
                if info.filename != source.record_path:
                    data = source.read(info)
                    target.writestr(info, data + extra if info.filename == member else data)
        os.replace(edited, wheel)
