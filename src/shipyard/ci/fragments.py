"""Whether a workflow run built all it planned (`shipyard ci fragments`): which build jobs of the
plan uploaded no fragment (the fragment folders downloaded), and which cells of the plan the merged
manifest has no record of. Merging the fragments is record/merge.py's."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pydantic import BaseModel, StrictStr

from shipyard.ci.linux_job_image import OUTPUT as JOB_IMAGE_OUTPUT
from shipyard.errors import InputError
from shipyard.plumbing.input_files import input_error, parse_json_input, read_json_input, validated
from shipyard.record.manifest import Manifest
from shipyard.release.spec import Release


class _PlanJob(BaseModel):
    # What names the job's cells (ci/jobs.py's matrix_entry); the rest is the workflow's business.
    id: StrictStr
    components: StrictStr = ""  # space-separated
    pythons: StrictStr = ""  # space-separated; empty for a job without Pythons (mobile)


@dataclass(frozen=True)
class PlannedJob:
    """One build job as the plan job gave it to its lane's matrix (after a dispatch's narrowing)."""

    id: str
    components: tuple[str, ...]
    pythons: tuple[str, ...]


class _LaneMatrix(BaseModel):
    include: list[_PlanJob]


PLAN_SHAPE = "not the plan job's outputs as JSON (each lane's matrix, {\"include\": [...]})"
PLAN_FIX = "pass toJSON(needs.plan.outputs)"


def read_plan_jobs(path: Path) -> list[PlannedJob]:
    """The build jobs of the plan outputs in `path` (toJSON(needs.plan.outputs): each lane's
    matrix as a JSON string); InputError (one line, exit 2) when the file is not that."""
    outputs = read_json_input(path, limit="CI plan", missing_fix=PLAN_FIX, restore_fix=PLAN_FIX)
    if not isinstance(outputs, dict) or not all(isinstance(m, str) for m in outputs.values()):
        raise input_error(path, "(file)", PLAN_SHAPE, PLAN_FIX)
    jobs: list[PlannedJob] = []
    for lane, matrix in outputs.items():
        if lane == JOB_IMAGE_OUTPUT:  # the image the container lanes start in, not a lane
            continue
        try:
            entries = validated(_LaneMatrix, parse_json_input(matrix, path, restore_fix=PLAN_FIX), path,
                                fix=PLAN_FIX).include
        except InputError as exc:
            raise input_error(path, "(file)", f"{PLAN_SHAPE}: {lane}: {exc.issue.key}: {exc.issue.message}",
                              PLAN_FIX, value=exc.issue.value) from None
        jobs += [PlannedJob(job.id, tuple(job.components.split()), tuple(job.pythons.split())) for job in entries]
    return jobs


def missing_fragments(jobs: Sequence[PlannedJob], folder: Path) -> list[str]:
    """The ids of the build jobs of the plan (read_plan_jobs) that have no `fragment-<job id>`
    folder in `folder`: jobs that failed before their upload."""
    return [job.id for job in jobs if not (folder / f"fragment-{job.id}" / "manifest.json").is_file()]


STALE_PLAN_FIX = "the workflows are not release.yaml's: run `shipyard ci generate` and commit the workflows"


def planned_cells(release: Release, jobs: Sequence[PlannedJob], plan: Path,
                  released: Collection[str] | None = None) -> list[str]:
    """The cell ids the plan's jobs build that the merged manifest must record: each job's cells in
    release.yaml's matrix (ci/jobs.py), narrowed to the components and Pythons the plan gave it
    (and to the `released` components: a component tag's run builds what its component depends
    on too, and the manifest records the tagged one alone),
    of the kinds whose builds record failed cells too (KINDS' records_failed_cells: a conda job
    withholds a failed package, so its missing cell may be a failed one). InputError (exit 2) for
    a job release.yaml does not have."""
    from shipyard.ci.jobs import PlanFilter, build_jobs, docker_jobs
    from shipyard.release.kinds import KINDS

    by_id = {job.id: job for job in [*build_jobs(release), *docker_jobs(release)]}  # an image job has no cells
    cells: list[str] = []
    for planned in jobs:
        if planned.id not in by_id:
            raise input_error(plan, "(file)", f"job {planned.id} is no build job of release.yaml", STALE_PLAN_FIX,
                              value=planned.id)
        job = by_id[planned.id]
        if released is not None:
            planned = replace(planned, components=tuple(c for c in planned.components if c in released))
            if not planned.components:
                continue
        if not KINDS[job.kind].records_failed_cells:
            continue
        if (planned.pythons, planned.components) == (job.pythons, job.components):
            cells += job.cells
            continue
        # A dispatch narrowed it: PlanFilter.narrow keeps the cells of the kept Pythons (a cell of
        # no Python, a native conda package, is then not required: the job may not build it).
        narrowed = PlanFilter(pythons=planned.pythons, components=planned.components).narrow(job)
        cells += narrowed.cells if narrowed is not None else ()
    return cells


def missing_cells(cells: Sequence[str], manifest: Manifest) -> list[str]:
    """The cells of `cells` the merged manifest records neither as an artifact nor as not applicable.
    A build whose stable feature failed still records its cells (the gate decides on them): only a
    cell no record stands for makes a release incomplete."""
    recorded = {r.cell_id for r in manifest.artifacts} | {r.cell_id for r in manifest.not_applicable}
    return [cell for cell in cells if cell not in recorded]
