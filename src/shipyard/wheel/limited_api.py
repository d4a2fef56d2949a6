"""abi3 wheels (a component's `limited_api`): what shipyard hands a build backend so that the one
wheel is tagged `cp39-abi3` and compiled against the limited API, and the audit (abi3audit) that
holds its binaries to it. The project opts in by marking its extensions as limited-API ones
(setuptools' `py_limited_api=True`, CMake's `USE_SABI`); the floor comes from release.yaml only."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path
from typing import Any

from shipyard.errors import BuildError
from shipyard.plumbing import command
from shipyard.release.project_declaration import SCIKIT_BUILD_CORE

SETUPTOOLS = "setuptools.build_meta"
# The module names an abi3 extension is loaded under by every Python of the release: a module named
# for one Python (`_x.cpython-39-x86_64-linux-gnu.so`) is not found by another.
ABI3_SUFFIXES = (".abi3.so", ".pyd")


def limited_api_define(floor: str) -> str:
    """The C define that selects the limited API of Python `floor`: '3.9' -> 'Py_LIMITED_API=0x03090000'."""
    major, minor = (int(n) for n in floor.split("."))
    return f"Py_LIMITED_API=0x{major:02X}{minor:02X}0000"


def backend_settings(backend: str, floor: str, *, component: str) -> dict[str, str]:
    """The PEP 517 config settings that make `backend` tag its wheel `cp<floor>-abi3`; BuildError for
    a backend shipyard cannot ask for one."""
    tag = "cp" + floor.replace(".", "")
    if backend == SCIKIT_BUILD_CORE:
        return {"wheel.py-api": tag}
    if backend.startswith("setuptools"):
        return {"--build-option": f"--py-limited-api={tag}"}  # setuptools splits it as a command line
    raise BuildError(f"components.{component}.limited_api: shipyard builds abi3 wheels with setuptools and "
                     f"scikit-build-core, not with {backend}; remove limited_api, or tag the wheel in the project "
                     f"itself")


def compiler_flags(floor: str) -> str:
    """What CFLAGS and CXXFLAGS gain in an abi3 build: the limited API of `floor`, whatever the
    sources define, so that the headers offer nothing newer than the wheel's tag promises."""
    return f"-D{limited_api_define(floor)}"


def abi3_problems(wheel: Path, floor: str) -> list[str]:
    """What keeps `wheel` from being the abi3 wheel of limited API `floor`, one line each: an extension
    module named for one Python, and abi3audit's findings (symbols outside the limited API, or newer
    than `floor`), each naming the module and the symbols."""
    with zipfile.ZipFile(wheel) as zf:
        modules = [n for n in zf.namelist() if n.endswith((".so", ".pyd")) and ".libs/" not in n]
    problems = [f"{m} is built for one Python only; mark the extension as a limited-API one (setuptools: "
                f"Extension(..., py_limited_api=True); CMake: Python_add_library(... USE_SABI {floor}))"
                for m in modules if not m.endswith(ABI3_SUFFIXES)]
    report = _audit(wheel, floor)
    for spec in report.get("specs", {}).values():
        for found in spec.get("wheel", []):
            result = found.get("result", {})
            name = found.get("name", "?")
            if symbols := sorted(result.get("non_abi3_symbols", [])):
                problems.append(f"{name} uses {', '.join(symbols)}, outside the limited API (abi3audit); use "
                                f"limited-API calls instead (no _Py* names, no macros that reach into objects)")
            if newer := sorted(result.get("future_abi3_objects", {}).items()):
                listed = ", ".join(f"{symbol} (limited API {added})" for symbol, added in newer)
                problems.append(f"{name} uses {listed}, newer than limited_api {floor} (abi3audit); raise "
                                f"limited_api or avoid them")
    return problems


def _audit(wheel: Path, floor: str) -> dict[str, Any]:
    """abi3audit's JSON report of `wheel`. It exits 1 when it finds a violation (the report says
    which); anything else that is not a report is a failure of the tool itself."""
    done = command.run([sys.executable, "-m", "abi3audit", "--strict", "--report", "--assume-minimum-abi3", floor,
                        wheel], check=False, timeout=600, what="abi3audit")
    try:
        report = json.loads(done.stdout)
    except ValueError:
        report = None
    if done.returncode not in (0, 1) or not isinstance(report, dict):
        raise BuildError(f"abi3audit could not audit {wheel.name} (exit status {done.returncode}): "
                         f"{done.output[-400:]}")
    return report
