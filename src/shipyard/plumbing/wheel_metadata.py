"""What a built wheel's own metadata says about the project: its version, the Pythons it
supports, what it requires. A component's version is its own (setuptools_scm, a pyproject version,
setup.py's), read from here, unless release.yaml overrides it. The one reader of a wheel's METADATA."""

from __future__ import annotations

import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import parse_wheel_filename
from packaging.version import Version


def public_wheel_version(wheel: Path) -> str:
    """The public version of the wheel ('1.7.0' for ember-1.7.0+cpu-…whl)."""
    _, version, _, _ = parse_wheel_filename(wheel.name)
    return Version(str(version)).public


def dist_info(zf: zipfile.ZipFile) -> str:
    """The wheel's own .dist-info folder (the top-level one holding METADATA, not a vendored one)."""
    return next(n.split("/")[0] for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA"))


def read_metadata(zf: zipfile.ZipFile) -> Message:
    """The headers of the wheel's own METADATA."""
    return Parser().parsestr(zf.read(f"{dist_info(zf)}/METADATA").decode("utf-8"), headersonly=True)


def wheel_metadata(wheel: Path) -> Message:
    """The headers of the METADATA of the wheel file `wheel`."""
    with zipfile.ZipFile(wheel) as zf:
        return read_metadata(zf)


def requires_python(wheel: Path) -> str | None:
    """The wheel's METADATA Requires-Python, None when it has none."""
    value = wheel_metadata(wheel).get("Requires-Python")
    return value.strip() if value else None


def requires_dist(wheel: Path) -> list[Requirement]:
    """The wheel's METADATA Requires-Dist, parsed."""
    return [Requirement(line) for line in wheel_metadata(wheel).get_all("Requires-Dist") or []]


def requires_python_problem(wheel: Path, component: str, python_full_version: str, declared: str | None) -> str:
    """Why the wheel, built with Python `python_full_version`, contradicts the matrix: its metadata
    excludes that Python, which release.yaml (or the project's static declaration, `declared`)
    did not say. '' when it does not."""
    found = requires_python(wheel)
    if not found:
        return ""
    try:
        admits = SpecifierSet(found).contains(python_full_version, prereleases=True)
    except InvalidSpecifier:
        return f"{wheel.name}: its metadata's Requires-Python {found!r} is not a valid specifier; fix the project"
    if admits:
        return ""
    told = (f"release.yaml and the project say {declared!r}" if declared
            else "nothing in the project's static files says so")
    return (f"{wheel.name}: the project's Requires-Python {found!r} excludes Python {python_full_version}, but "
            f"{told}; set requires_python: {found!r} under components.{component} in release.yaml, so that this "
            f"Python becomes a not-applicable cell")
