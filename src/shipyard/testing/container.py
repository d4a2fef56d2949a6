"""Run a component's tests inside a container, judged like every other run of them: the same
copy of the project and its tests, the same plugins and the same verdict (runner.pytest_invocation, judge_run),
with every path as the container sees it.

`setup` is a shell script that runs first in the container and installs the package (a venv and
`pip install` from a mounted index, say); `python` is then the interpreter that imports it. The
container has no network, and sees `work` at /work and the `volumes` it is given.
"""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from shipyard.errors import ToolError
from shipyard.plumbing import command
from shipyard.release.pytest_selection import PytestSelection
from shipyard.testing.runner import JudgedTests, judge_run, pytest_invocation
from shipyard.testing.verdict import FeatureGate

WORK = "/work"  # where the container sees `work`


def run_tests_in_container(image: str, *, setup: str, python: str, tests_dir: Path, gate: FeatureGate,
                           work: Path, project_dir: Path | None = None, volumes: Sequence[str] = (),
                           other_features: Sequence[str] = (), selection: PytestSelection | None = None,
                           timeout: float = 3600) -> JudgedTests:
    """Install with `setup`, then run `tests_dir` with `python` in a copy of `project_dir` (of
    the tests alone without one: no project configuration then applies), both in a container of
    `image` (never pulled), and judge the run by `gate`. Everything the run writes stays under
    `work` (emptied first)."""
    if work.exists():
        shutil.rmtree(work)
    (work / "tmp").mkdir(parents=True)
    plugin = work / "plugin"
    plugin.mkdir()
    for entry in resources.files("shipyard.resources").joinpath("pytest_plugin").iterdir():
        if entry.name.endswith(".py"):
            (plugin / entry.name).write_bytes(entry.read_bytes())

    def inside(path: Path) -> str:
        return f"{WORK}/{path.relative_to(work).as_posix()}"

    run = pytest_invocation(work, tests_dir=tests_dir, project_dir=project_dir, gate=gate,
                            other_features=other_features, selection=selection, plugin_dir=inside(plugin),
                            inside=inside)
    # The image's own user runs the tests (a runtime image is not run as root): it must be able to
    # write the record, TMPDIR and the copied tests' caches under /work.
    for path in (work, *work.rglob("*")):
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | (0o777 if path.is_dir() else 0o666))
    # pytest's exit status is the container's: `exec` replaces the shell once setup has passed.
    script = f"{setup}\ncd {shlex.quote(run.cwd)}\nexec env {shlex.join(f'{k}={v}' for k, v in run.env.items())} " \
             f"{shlex.quote(python)} {shlex.join(run.argv)}\n"
    exit_status: int | None = None
    try:
        result = command.run(["docker", "run", "--rm", "--pull=never", "--network=none", f"--volume={work}:{WORK}",
                              *(f"--volume={volume}" for volume in volumes), image, "sh", "-eu", "-c", script],
                             check=False, timeout=timeout, what=f"component tests in {image}")
        exit_status = result.returncode
        log_tail = "\n".join(result.output.splitlines()[-30:])
    except ToolError as exc:
        log_tail = str(exc)
    return judge_run(work, exit_status, log_tail, gate, selection)
