"""The README's quickstart is what CI runs: the same line, with nothing started around it."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _quickstart() -> list[str]:
    readme = (REPO / "README.md").read_text()
    block = re.search(r"```\n(.*?)```", readme, re.S)
    assert block is not None, "README.md must open with the quickstart block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_readme_opens_with_two_command_lines() -> None:
    lines = _quickstart()
    assert lines == ["bash ci/bootstrap.sh && .venv/bin/nox -s build-cpu",
                     "bash ci/bootstrap.sh && .venv/bin/nox -s tests"]


def test_ci_runs_the_readme_test_line_and_starts_no_service_itself() -> None:
    script = (REPO / ".ci" / "run").read_text()
    commands = [line for line in script.splitlines()
                if line.strip() and not line.lstrip().startswith("#") and not line.startswith(("set ", "cd "))]
    assert commands == [_quickstart()[1]]
    assert "dockerd" not in "\n".join(commands)
