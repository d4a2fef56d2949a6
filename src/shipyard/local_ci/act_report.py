"""The job table of a local workflow run, read from act's JSON log.

Every job the run should have had is a row: the ones act ran (container, seconds, result, and
the step a failed one stopped at), and the ones it could not run here, each with its reason
("not runnable here: …" for Windows, macOS and the CUDA toolkit-image lanes, "not started: …" for
jobs behind a failed one). The jobs expected are the workflow's (the one asked, or all) times
the matrices the plan job printed: the plan, not this report, decides the fan-out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

RUNS = "success"
FAILED = "failure"
NOT_RUNNABLE = "not runnable here"
NOT_STARTED = "not started"


@dataclass
class JobRow:
    """One job of the run (a matrix job: one entry of its matrix)."""

    job_id: str  # the workflow's job id
    name: str  # act's name for it: the workflow job's name, with the matrix id
    matrix_id: str = ""
    container: str = ""
    seconds: float = 0.0
    result: str = ""  # success | failure | not runnable here | not started
    reason: str = ""  # why it did not run, or the step it failed at
    started: datetime | None = field(default=None, repr=False)

    @property
    def counts_as_failure(self) -> bool:
        return self.result == FAILED


def _time(record: Mapping[str, Any]) -> datetime | None:
    stamp = record.get("time")
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


class ActLog:
    """Reads act's JSON records one by one (as they come, or from a recorded log)."""

    def __init__(self) -> None:
        self.rows: dict[str, JobRow] = {}
        self.outputs: dict[str, dict[str, str]] = {}  # job id -> outputs its steps set
        self.errors: list[str] = []  # act's own fatal errors (outside any job)
        self.said: dict[str, list[str]] = {}  # act's job name -> the last output lines of its current step

    def feed(self, record: Mapping[str, Any]) -> JobRow | None:
        """Take one record; returns the row when this record finished a job."""
        name, job_id = record.get("job"), record.get("jobID")
        if not isinstance(name, str) or not isinstance(job_id, str):
            if record.get("level") in ("fatal", "panic"):
                self.errors.append(str(record.get("msg", "")))
            return None
        msg = str(record.get("msg", ""))
        matrix = record.get("matrix") if isinstance(record.get("matrix"), dict) else {}
        row = self.rows.get(name)
        if row is None:
            matrix_id = str((matrix or {}).get("id", ""))
            row = self.rows[name] = JobRow(job_id, f"{job_id} {matrix_id}".strip(), matrix_id)
            row.started = _time(record)
        if "Start image=" in msg:
            row.container = msg.split("Start image=", 1)[1].strip()
        if record.get("command") == "set-output" and isinstance(record.get("name"), str):
            self.outputs.setdefault(job_id, {})[record["name"]] = str(record.get("arg", ""))
        if record.get("raw_output") and msg.strip():
            said = self.said.setdefault(name, [])
            said.extend(line.strip() for line in msg.strip().splitlines())
            del said[:-20]  # the last lines of the step running now
        # A workflow step's own result (a composite action's inner steps have longer step ids)
        outer = len(record.get("stepID") or ()) == 1
        if outer and record.get("stepResult") == FAILED and record.get("stage") == "Main" and not row.reason:
            row.reason = f"step {record.get('step', '?')!r} failed" + _why(self.said.get(name, []))
        elif outer and "stepResult" in record:
            self.said.pop(name, None)
        result = record.get("jobResult")
        if isinstance(result, str):
            row.result = result
            end = _time(record)
            if end and row.started:
                row.seconds = (end - row.started).total_seconds()
            return row
        return None


def _why(lines: list[str]) -> str:
    """The line of a failed step's output that says why: its first error line, else its last."""
    first = next((i for i, line in enumerate(lines) if line.lower().startswith(("error", "::error"))), None)
    if first is None:
        return f": {lines[-1][:200]}" if lines else ""
    chosen = lines[first]
    if chosen.endswith(":") and first + 1 < len(lines):  # "error: cannot build these cells:" and the first
        chosen += " " + lines[first + 1]
    return f": {chosen[:200]}"


def read_log(path: Path) -> ActLog:
    """An ActLog of a recorded act --json log (one JSON record per line; other lines ignored)."""
    log = ActLog()
    for line in path.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            log.feed(record)
    return log


@dataclass(frozen=True)
class ExpectedJob:
    """A job the workflow should run, as the plan fanned it out."""

    job_id: str
    matrix_id: str  # "" for a job without a matrix
    runner: str
    lane_output: str  # the plan output holding its matrix ("" for plan, manifest, publish)


def expected_jobs(workflow: Mapping[str, Any], plan_outputs: Mapping[str, str],
                  selected: Iterable[str]) -> list[ExpectedJob]:
    """The jobs of `selected` workflow job ids, each matrix job once per entry of the plan's
    matrix for it. A matrix the plan did not print (it failed) gives no entries."""
    out = []
    jobs = workflow.get("jobs", {})
    for job_id in selected:
        body = jobs.get(job_id, {})
        matrix = str(body.get("strategy", {}).get("matrix", ""))
        if "needs.plan.outputs." in matrix:
            output = matrix.split("needs.plan.outputs.", 1)[1].split(")", 1)[0].strip()
            try:
                entries = json.loads(plan_outputs.get(output, "")).get("include", [])
            except json.JSONDecodeError:
                entries = []
            out += [ExpectedJob(job_id, str(e.get("id", "")), str(e.get("runner", "")), output) for e in entries]
        else:
            out.append(ExpectedJob(job_id, "", str(body.get("runs-on", "")), ""))
    return out


def needed_jobs(workflow: Mapping[str, Any], job: str | None) -> list[str]:
    """The workflow job ids a run of `job` (None: all) starts: it and what it needs, in file order."""
    jobs = workflow.get("jobs", {})
    if job is None:
        return list(jobs)
    wanted: set[str] = set()
    todo = [job]
    while todo:
        current = todo.pop()
        if current in wanted:
            continue
        wanted.add(current)
        needs = jobs.get(current, {}).get("needs", [])
        todo += [needs] if isinstance(needs, str) else list(needs)
    return [j for j in jobs if j in wanted]


def job_table(log: ActLog, expected: list[ExpectedJob], not_runnable: Mapping[str, str]) -> list[JobRow]:
    """Every expected job as a row: act's result where it ran, else why not. `not_runnable`
    maps a runner label or a workflow job id to why it cannot run here; a job that could run
    here is still reported not runnable when it is one of those (its failure then does not count)."""
    ran: dict[tuple[str, str], JobRow] = {(r.job_id, r.matrix_id): r for r in log.rows.values()}
    rows = []
    failed_before = False
    for job in expected:
        row = ran.pop((job.job_id, job.matrix_id), None)
        reason = not_runnable.get(job.job_id) or not_runnable.get(job.runner)
        if row is None:
            name = f"{job.job_id} {job.matrix_id}".strip()
            row = JobRow(job.job_id, name, job.matrix_id)
            if reason:
                row.result, row.reason = NOT_RUNNABLE, reason
            else:
                row.result = NOT_STARTED
                row.reason = "a job it needs failed" if failed_before else "act did not start it"
        elif reason:
            row.result, row.reason = NOT_RUNNABLE, reason
        elif not row.result:
            row.result, row.reason = NOT_STARTED, row.reason or "act stopped before it finished"
        failed_before = failed_before or row.counts_as_failure
        rows.append(row)
    rows += [r for r in ran.values() if r.result]  # ran but not expected (a plan output act did not log)
    return rows


def render_table(rows: list[JobRow]) -> str:
    """The table printed at the end of a run: job, container, seconds, result."""
    header = ("job", "container", "seconds", "result")
    lines = [(r.name, r.container or "-", f"{r.seconds:.0f}" if r.seconds else "-",
              r.result + (f": {r.reason}" if r.reason else "")) for r in rows]
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(header)]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    out += ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    return "\n".join(out)
