"""A cell's test environment: a fresh venv with the test requirements from the local wheelhouse
and the component installed by name from the variant's index.

Two installers, one way each:
- `uv` (the default): venv creation and installs take about a second, from a cache under the
  state folder;
- `pip`: what users run. The pipeline keeps one real pip resolution per variant and Python
  (cell_tests._choose_pip_cells), so "what pip resolves" stays proven on every run.
uv creates every venv and installs the test requirements (pytest, numpy, ...) from the
wheelhouse; the installer decides which build of the project lands in it.
Neither reads the machine's settings (pip.conf, PIP_*, uv.toml, UV_*): only the variant's index
and the wheelhouse are seen.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from shipyard.host.toolchains.discover import Interpreter
from shipyard.plumbing import command
from shipyard.plumbing.file_lock import exclusive
from shipyard.plumbing.hashing import sha256_hex

INSTALLERS = ("uv", "pip")


def ensure_wheelhouse(interpreter: Interpreter, requirements: Sequence[str], state: Path) -> Path:
    """Third-party wheels (numpy, pytest, …) for `interpreter`, downloaded once from PyPI; cells
    running side by side wait for the one that downloads."""
    wanted = sorted(set(requirements))
    tag = sha256_hex("\n".join(wanted).encode())[:12]
    house = state / "wheelhouse" / f"{interpreter.version}-{tag}"
    with exclusive(house.with_name(f".{house.name}.lock")):
        if not (house / ".complete").exists():
            house.mkdir(parents=True, exist_ok=True)
            if wanted:
                command.run([interpreter.path, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                             "--only-binary", ":all:", "--dest", house, *wanted], timeout=1800,
                            what=f"download test dependencies for Python {interpreter.version}")
            (house / ".complete").write_text("\n".join(wanted))
    return house


def uv_binary() -> Path:
    """The uv that shipyard depends on (the `uv` wheel from PyPI ships it)."""
    from uv import find_uv_bin

    return Path(find_uv_bin())


def _isolated_env(state: Path) -> dict[str, str]:
    env = {k: v for k, v in command.environ_snapshot().items() if not k.startswith(("PIP_", "UV_"))}
    env |= {"PIP_CONFIG_FILE": os.devnull, "UV_NO_CONFIG": "1", "UV_CACHE_DIR": str(state / "uv-cache"),
            "UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1"}
    return env


def make_test_env(installer: str, *, interpreter: Interpreter, venv: Path, wheelhouse: Path,
                  requirements: Sequence[str], index: Path, project: str, state: Path) -> Path:
    """Create `venv` from `interpreter` and install `requirements` from `wheelhouse` only (both
    with uv), then `project` by name from `index` (third-party dependencies from the wheelhouse)
    with `installer`, or a wheel file's path as `project` with its dependencies from there; return
    the venv's python."""
    env = _isolated_env(state)
    python = venv / "bin" / "python"
    uv = uv_binary()
    command.run([uv, "venv", "--quiet", "--python", interpreter.path, venv], env=env,
                what=f"test venv for Python {interpreter.version}")
    command.run([uv, "pip", "install", "--quiet", "--python", python, "--no-index", "--find-links", wheelhouse,
                 *requirements], env=env, timeout=900, what="install test requirements")
    if installer == "pip":
        # The pip that comes with this Python (the one that filled the wheelhouse) installs into
        # the venv (`pip --python`, pip >= 22.3): the venv needs no pip of its own, and nothing
        # but pip's resolver decides which build of the project lands in it. (shipyard's own
        # pip may already have dropped an old Python the matrix still has.)
        install = [interpreter.path, "-m", "pip", "--python", python, "--disable-pip-version-check", "install",
                   "--quiet"]
    elif installer == "uv":
        install = [uv, "pip", "install", "--quiet", "--python", python]
    else:
        raise ValueError(f"unknown installer {installer!r} (one of {', '.join(INSTALLERS)})")
    # The project by name from the variant index: resolution is what a user gets (a wheel that
    # resolution does not pick on this host, by its path: what a user of an older glibc gets).
    command.run([*install, "--index-url", index.resolve().as_uri(), "--find-links", wheelhouse, project], env=env,
                timeout=900, what=f"{installer} install {project} from {index}")
    return python
