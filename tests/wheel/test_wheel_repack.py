"""A wheel repacked under another version (the PyPI flavour's plain version, #52 item 8): its
`.data` folder (scripts, headers) moves with its `.dist-info`, so an installer finds both."""

from __future__ import annotations

import zipfile
from pathlib import Path

from wheel.wheelfile import WheelFile

from shipyard.publish.plain_version import plain_version_wheel
from shipyard.wheel.repair import source_date_epoch


def test_the_data_folder_is_renamed_with_the_version(tmp_path: Path):
    source = tmp_path / "whl" / "tool-1.0+cpu-py3-none-any.whl"
    source.parent.mkdir()
    with source_date_epoch(1603800000), WheelFile(source, "w") as wf:
        wf.writestr("tool/__init__.py", "")
        wf.writestr("tool-1.0+cpu.data/scripts/tool-run", "#!python\nprint('hi')\n")
        wf.writestr("tool-1.0+cpu.data/headers/tool.h", "int tool(void);\n")
        wf.writestr("tool-1.0+cpu.dist-info/METADATA", "Metadata-Version: 2.1\nName: tool\nVersion: 1.0+cpu\n")
        wf.writestr("tool-1.0+cpu.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\n"
                                                     "Tag: py3-none-any\n")
    plain = plain_version_wheel(source, tmp_path / "plain")
    assert plain.name == "tool-1.0-py3-none-any.whl"
    names = zipfile.ZipFile(plain).namelist()
    assert {"tool-1.0.data/scripts/tool-run", "tool-1.0.data/headers/tool.h"} <= set(names), names
    assert not [n for n in names if "+cpu" in n], names
    with WheelFile(plain) as wf:  # every entry checked against the rewritten RECORD
        assert wf.read("tool-1.0.data/scripts/tool-run") == b"#!python\nprint('hi')\n"
        assert b"tool-1.0.data/headers/tool.h," in wf.read("tool-1.0.dist-info/RECORD")
