"""A release folder below the top of its repository (`release/release.yaml`, its projects beside
it as `../tinyext`): GitHub reads workflows at the repository's top only, runs every `run:` step
in the workspace (the checkout's top) and reads the paths that actions take relative to it. The
generated workflows then go to the top, run their steps in the release folder
(`defaults.run.working-directory`), and name the actions' paths below it.
"""

from __future__ import annotations

import copy
from pathlib import Path, PurePosixPath
from typing import Any

from shipyard.ci.repository_sources import repository_root

# The actions whose `path` input is a file or folder the workflow's own steps write or read.
_PATH_INPUTS = ("actions/upload-artifact@", "actions/download-artifact@", "actions/cache@",
                "actions/cache/restore@", "actions/cache/save@")


def release_folder(root: Path) -> PurePosixPath:
    """The release folder `root` relative to the top of its repository; `.` at the top (or outside
    any git checkout)."""
    return PurePosixPath(root.resolve().relative_to(repository_root(root)).as_posix())


def in_release_folder(workflow: dict[str, Any], folder: PurePosixPath) -> dict[str, Any]:
    """`workflow` (as ci/workflow.py builds it) with its steps run in `folder` and its actions'
    paths below it; unchanged for a release at the repository's top."""
    if folder == PurePosixPath("."):
        return workflow
    workflow = copy.deepcopy(workflow)  # steps may be shared between the two workflows
    defaults = workflow.setdefault("defaults", {}).setdefault("run", {})
    defaults["working-directory"] = folder.as_posix()
    for job in workflow["jobs"].values():
        # Before the checkout the release folder does not exist yet, and a step whose working
        # directory is missing fails: those steps run at the workspace's top.
        checked_out = False
        for step in job.get("steps", ()):
            checked_out = checked_out or step.get("uses", "").startswith("actions/checkout@")
            if not checked_out and "run" in step:
                step["working-directory"] = "."
            inputs = step.get("with")
            if step.get("uses", "").startswith(_PATH_INPUTS) and inputs and "path" in inputs:
                paths = [_below(line, folder) for line in inputs["path"].splitlines() if line.strip()]
                inputs["path"] = "\n".join(paths) + ("\n" if inputs["path"].endswith("\n") else "")
    return workflow


def _below(path: str, folder: PurePosixPath) -> str:
    """`path` below `folder`, unless it is absolute or an expression (`${{ runner.temp }}/x`)."""
    if path.startswith(("/", "$", "~")):
        return path
    return f"{folder.as_posix()}/{path}"
