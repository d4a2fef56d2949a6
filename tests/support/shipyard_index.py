"""shipyard's own wheel on an index, as PyPI holds a release of it: what the generated workflows'
jobs install (their SHIPYARD_INDEX_URL repository variable), built from the checkout a run is of."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from support.publish_servers import static_server

# uv comes with shipyard (a dependency): beside this interpreter in the test environment.
UV = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")


def build_shipyard(source: Path, out: Path) -> Path:
    """shipyard's wheel, built from the checkout `source` into `out` (once: a wheel there is reused)."""
    found = sorted(out.glob("shipyard-*.whl"))
    if found:
        return found[0]
    assert UV, "uv is a dependency of shipyard and must be installed beside it"
    subprocess.run([UV, "build", "--wheel", "--quiet", "--out-dir", str(out), str(source)], check=True, timeout=600,
                   capture_output=True)
    (wheel,) = out.glob("shipyard-*.whl")
    return wheel


def write_simple_index(wheel: Path, root: Path) -> None:
    """A PEP 503 index of the one project under `root`/simple/shipyard/, its link with the sha256."""
    project = root / "simple" / "shipyard"
    project.mkdir(parents=True, exist_ok=True)
    shutil.copy(wheel, project / wheel.name)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (project / "index.html").write_text(f'<!DOCTYPE html>\n<html><body>\n<a href="{wheel.name}#sha256={digest}">'
                                        f"{wheel.name}</a>\n</body></html>\n")


@contextmanager
def shipyard_index(source: Path, folder: Path) -> Iterator[str]:
    """shipyard built from `source`, served on loopback from `folder` while the block runs; yields
    the index URL (…/simple/) a job's uv takes as --index."""
    write_simple_index(build_shipyard(source, folder / "wheel"), folder / "served")
    with static_server(folder / "served") as url:
        yield f"{url}simple/"
