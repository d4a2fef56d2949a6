"""Whether the committed workflows are what release.yaml generates now."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from shipyard.ci.repository_sources import repository_root
from shipyard.ci.workflow import generate
from shipyard.plumbing.atomic_files import write_atomic
from shipyard.release.spec import Spec


@dataclass(frozen=True)
class Drift:
    path: Path  # relative to the repository root
    diff: str  # unified diff, committed -> generated; the whole file when it is missing


def drift(spec: Spec) -> list[Drift]:
    """Every generated file whose committed text differs from a fresh generation."""
    out = []
    for path, text in generate(spec).items():
        on_disk = repository_root(spec.root) / path
        current = on_disk.read_text() if on_disk.is_file() else ""
        if current != text:
            diff = "".join(difflib.unified_diff(current.splitlines(keepends=True), text.splitlines(keepends=True),
                                                f"{path} (committed)", f"{path} (from release.yaml)", n=1))
            out.append(Drift(path, diff))
    return out


def write_generated(spec: Spec) -> list[Path]:
    """Write every generated file (atomically) at the top of the release's repository; return the
    paths that changed."""
    changed = []
    for path, text in generate(spec).items():
        target = repository_root(spec.root) / path
        if target.is_file() and target.read_text() == text:
            continue
        write_atomic(target, text)
        changed.append(path)
    return changed
