"""Which build jobs of a workflow run uploaded no fragment: the plan job's list of jobs against
the fragment folders downloaded (`shipyard ci fragments`). Merging them is record/merge.py's."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, StrictStr

from shipyard.errors import InputError
from shipyard.plumbing.input_files import input_error, parse_json_input, read_json_input, validated


class _PlanJob(BaseModel):
    id: StrictStr  # the rest of a job's entry is the workflow's business


class _LaneMatrix(BaseModel):
    include: list[_PlanJob]


PLAN_SHAPE = "not the plan job's outputs as JSON (each lane's matrix, {\"include\": [...]})"
PLAN_FIX = "pass toJSON(needs.plan.outputs)"


def read_plan_jobs(path: Path) -> list[str]:
    """The build job ids of the plan outputs in `path` (toJSON(needs.plan.outputs): each lane's
    matrix as a JSON string); InputError (one line, exit 2) when the file is not that."""
    outputs = read_json_input(path, limit="CI plan", missing_fix=PLAN_FIX, restore_fix=PLAN_FIX)
    if not isinstance(outputs, dict) or not all(isinstance(m, str) for m in outputs.values()):
        raise input_error(path, "(file)", PLAN_SHAPE, PLAN_FIX)
    jobs: list[str] = []
    for lane, matrix in outputs.items():
        try:
            jobs += [job.id for job in validated(_LaneMatrix, parse_json_input(matrix, path, restore_fix=PLAN_FIX),
                                                 path, fix=PLAN_FIX).include]
        except InputError as exc:
            raise input_error(path, "(file)", f"{PLAN_SHAPE}: {lane}: {exc.issue.key}: {exc.issue.message}",
                              PLAN_FIX, value=exc.issue.value) from None
    return jobs


def missing_fragments(jobs: Sequence[str], folder: Path) -> list[str]:
    """The build jobs of the plan (read_plan_jobs) that have no `fragment-<job id>` folder in
    `folder`: jobs that failed before their upload."""
    return [job for job in jobs if not (folder / f"fragment-{job}" / "manifest.json").is_file()]
