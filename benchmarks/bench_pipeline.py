"""bench-pipeline: the narrowed nightly through `shipyard ci run` (act, bare runner containers)
against the same work done by the shipyard commands directly on this host, side by side; the
engine's overhead as a ratio of wall times.

Each side gets its own servers and its own clone of this checkout's HEAD with the same fixture
commit (release.yaml pointed at that side's servers, same commit date, so the same nightly
versions), so the direct side publishes where nothing is "already there", and builds with fresh
dist/ and .shipyard/ folders (neither side reuses the other's build cache). What both sides share
is the machine's toolchain cache (~/.cache/shipyard: the bullseye sysroot, the conda bootstrap
channel) and the Docker engine's layer cache.

1. Direct (first): the workflow file's own `run:` scripts of the steps that do the work (plan,
   build, conda build, build-mobile, image build, report and notes, gate, publish), job after
   job in the order the jobs' `needs` imply, one after another, in a clean clone, with the
   matrices of that side's own plan step (narrowed by the inputs `ci run` gives).
   Before its timer, the toolchains the Linux job image holds (`shipyard toolchain install` of the
   glibc routes) are installed here, as the engine's jobs find them in the image.
   What only a runner needs (container packages, installing shipyard, checkout and setup-python,
   the build cache, artifact uploads, downloads and merges of fragments, apt-get on the runner)
   is not run: that is the engine's overhead, and the table says where it goes.
2. The engine: one `shipyard ci run --workflow nightly --variant cpu --python 3.11`, timed around
   it; per-job seconds from its jobs.json, per-step seconds from act's log (act.log.jsonl). It
   comes second, so whatever the Docker engine's layer cache keeps favours the engine.

`-- --release fixture` runs the small fixture release (tests/fixtures/pipeline: plan, one pure
wheel job, manifest, publish), which is quick. Runs of `shipyard ci run` on one machine take
turns; a wait for another one is said and left out of the engine's time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # the pipeline tests' servers and fixture commit, as bench_publish uses them

from support.docker_daemon import ensure_engine, stop_started_engine  # noqa: E402
from support.pipeline_run import (  # noqa: E402
    PipelineRun,
    clone_checkout,
    commit,
    ember_pipeline,
    lay_fixture_release,
    run_pipeline,
)
from support.publish_servers import devpi_server, unbound_port  # noqa: E402

from shipyard.errors import RunFailed  # noqa: E402
from shipyard.local_ci.workflow_run import ENGINE_LOCK  # noqa: E402
from shipyard.plumbing.file_lock import exclusive  # noqa: E402
from shipyard.plumbing.port_ranges import claimed_port_range  # noqa: E402

COMMITTED = "2026-12-01T12:00:00+00:00"  # both sides' fixture commit: the nightly's dev version
NARROWED = ("--workflow", "nightly", "--variant", "cpu", "--python", "3.11")
WORKFLOW = Path(".github/workflows/nightly.yml")
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")

# Where an engine step's time goes, by the step's name: the first prefix that matches. "work" is
# what the direct side runs too; every other kind is what only a runner needs.
STEP_KINDS: tuple[tuple[str, str], ...] = (
    ("The Linux job image", "the Linux job image (plan job: built once per content, else found)"),
    ("shipyard, from the Linux job image", "checkout, setup-python (the local stand-ins)"),
    ("Install shipyard", "install shipyard (venv, uv pip install shipyard==<version>)"),
    ("Check out", "checkout, setup-python (the local stand-ins)"),
    ("Python for shipyard", "checkout, setup-python (the local stand-ins)"),
    ("Cache key", "build cache (key, restore, save)"),
    ("Build cache", "build cache (key, restore, save)"),
    ("Upload", "artifacts: upload, download, merge fragments, load images"),
    ("Download", "artifacts: upload, download, merge fragments, load images"),
    ("Merge", "artifacts: upload, download, merge fragments, load images"),
    ("Load the images", "artifacts: upload, download, merge fragments, load images"),
    ("Every build job of the plan uploaded", "artifacts: upload, download, merge fragments, load images"),
    ("Every cell of the plan is in the manifest", "artifacts: upload, download, merge fragments, load images"),
    ("Fail the job", "failing the job after the upload (a stable feature failed)"),
    ("Android NDK", "runner packages (apt-get on the runner: NDK, cross compilers, docker client)"),
    ("Docker client", "runner packages (apt-get on the runner: NDK, cross compilers, docker client)"),
)
WORK = "work"
JOB_START_STOP = "job start and stop (containers, act's set-up and clean-up)"


def step_kind(step_name: str) -> str:
    return next((kind for prefix, kind in STEP_KINDS if step_name.startswith(prefix)), WORK)


# --- the two sides' setups: a clone with the fixture commit, and its servers -------------------------

@dataclass
class Side:
    repo: Path
    secrets: dict[str, str]


@contextmanager
def ember_side(base: Path) -> Iterator[Side]:
    """ember's release with every target (devpi, static tree, conda channel, registry) served here."""
    from shipyard.conda.bootstrap import ensure_bootstrap_channel, release_requirements
    from shipyard.conda.bootstrap_plan import bootstrap_cuda_versions
    from shipyard.release.validate import load_spec

    spec = load_spec(REPO)
    # exactly as the suite's conda_bootstrap fixture makes it: built once per machine, reused
    bootstrap = ensure_bootstrap_channel(
        pythons=["3.11"], cuda_versions=bootstrap_cuda_versions(v.cuda for v in spec.release.variants.values()
                                                                if v.cuda),
        requirements=release_requirements(spec))
    with ember_pipeline(base, bootstrap.path, COMMITTED) as pipeline:
        yield Side(pipeline.repo, pipeline.secrets)


@contextmanager
def fixture_side(base: Path) -> Iterator[Side]:
    """The small fixture release (one pure package, wheels only) with its devpi target served here."""
    with claimed_port_range() as ports, devpi_server(base / "devpi", unbound_port(ports)) as devpi:
        password = devpi.add_user("fixture")
        repo = clone_checkout(base / "repo")
        lay_fixture_release(repo, devpi.url, broken=False)
        commit(repo, "fixture: the small release, published to this run's devpi", COMMITTED)
        yield Side(repo, {"SHIPYARD_PYPI_USERNAME": "fixture", "SHIPYARD_PYPI_PASSWORD": password})


SIDES = {"ember": ember_side, "fixture": fixture_side}


# --- the engine side --------------------------------------------------------------------------------

@dataclass
class EngineRun:
    run: PipelineRun
    wall: float
    waited: float  # for another engineer's `shipyard ci run` (the machine's lock), before the timer
    act_span: float  # act's first log record to its last
    job_seconds: dict[str, float]  # job name (as jobs.json) -> seconds, for every job act ran
    job_results: dict[str, str]  # job name -> its result and, for a failure, the step and why
    step_seconds: dict[str, dict[str, float]]  # job name -> step name -> seconds (every stage)


def _stamp(record: Mapping[str, Any]) -> datetime | None:
    stamp = record.get("time")
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")) if isinstance(stamp, str) else None


def _job_name(record: Mapping[str, Any]) -> str:
    """jobs.json's name of the job a record belongs to: the job id and its matrix id."""
    matrix = record.get("matrix") if isinstance(record.get("matrix"), dict) else {}
    return f"{record.get('jobID', '')} {(matrix or {}).get('id', '')}".strip()


def read_steps(log: Path) -> tuple[float, dict[str, dict[str, float]]]:
    """act's span (seconds) and every job's workflow steps' seconds (Pre, Main and Post stages
    together; a composite action's inner steps are inside their step's time)."""
    steps: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    first = last = None
    for line in log.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(record, dict):
            continue
        when = _stamp(record)
        if when:
            first, last = min(first or when, when), max(last or when, when)
        step_id = record.get("stepID") or ()
        if "stepResult" in record and len(step_id) == 1 and isinstance(record.get("executionTime"), int):
            steps[_job_name(record)][str(record.get("step"))] += record["executionTime"] / 1e9
    span = (last - first).total_seconds() if first and last else 0.0
    return span, {job: dict(by_step) for job, by_step in steps.items()}


def _act_runs_of_workflow() -> list[int]:
    """Process ids of act processes on this machine running a workflow file named like ours."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and Path(argv[0].decode(errors="replace")).name == "act" and \
                any(arg.decode(errors="replace").endswith(f"/{WORKFLOW.name}") for arg in argv):
            found.append(int(proc.name))
    return found


def wait_for_other_runs() -> float:
    """Wait for another `shipyard ci run` (the lock it takes) and for any act process running a
    nightly workflow (a run that does not take the lock would share act's container names with
    ours); returns the seconds waited, which the engine's time leaves out."""
    start = time.perf_counter()
    with exclusive(ENGINE_LOCK, wait=False) as free:
        pass
    if not free:
        print(f"bench-pipeline: waiting for another shipyard ci run on this machine to finish (lock {ENGINE_LOCK})",
              flush=True)
        with exclusive(ENGINE_LOCK):
            pass
    said = False
    while pids := _act_runs_of_workflow():
        if not said:
            print(f"bench-pipeline: waiting for act running another {WORKFLOW.name} (pids {pids}): act names "
                  "containers by workflow and job", flush=True)
            said = True
        time.sleep(10)
    return time.perf_counter() - start


def run_engine(side: Side, work: Path) -> EngineRun:
    waited = wait_for_other_runs()
    start = time.perf_counter()
    run = run_pipeline(side.repo, work, side.secrets, *NARROWED, timeout=3 * 3600)
    wall = time.perf_counter() - start
    if run.returncode not in (0, RunFailed.exit_code) or not run.jobs:
        sys.exit(f"bench-pipeline: shipyard ci run did not finish (exit {run.returncode}):\n{run.output[-4000:]}")
    if run.returncode == RunFailed.exit_code:
        # a job failed: the run still went to its end; the direct side runs the same jobs, and the
        # table names the failures, so the ratio is read knowing them
        print(f"bench-pipeline: the engine's run finished with failed jobs (exit {RunFailed.exit_code}): "
              + "; ".join(f"{r['name']}: {r['reason']}" for r in run.jobs if r["result"] == "failure"), flush=True)
    if "waiting for another shipyard ci run" in run.output:
        print("bench-pipeline: the engine's run waited for another shipyard ci run that started in between: its "
              "wall time includes that wait", flush=True)
    span, steps = read_steps(work / "act.log.jsonl")
    ran = [row for row in run.jobs if row["result"] in ("success", "failure")]  # not: not runnable, not started
    return EngineRun(run, wall, waited, span, {row["name"]: float(row["seconds"]) for row in ran},
                     {row["name"]: row["result"] + (f" ({row['reason']})" if row["reason"] else "") for row in ran},
                     steps)


# --- the direct side --------------------------------------------------------------------------------

@dataclass
class DirectStep:
    job: str  # jobs.json's name for the job
    step: str
    seconds: float
    status: str = "0"  # a build step's own status output: 1 is a failing stable feature, recorded, not fatal
    failed: str = ""  # the step failed, which ends its job, as on a runner: its exit status and last line


@dataclass
class Direct:
    """The workflow's work steps run on this host, in `repo`, with a runner's files and variables."""

    repo: Path
    secrets: dict[str, str]
    inputs: dict[str, str]
    logs: Path
    steps: list[DirectStep] = field(default_factory=list)
    plan_outputs: dict[str, str] = field(default_factory=dict)

    def env(self, workflow: Mapping[str, Any], files: Path) -> dict[str, str]:
        ref = subprocess.run(["git", "symbolic-ref", "-q", "HEAD"], cwd=self.repo, capture_output=True, text=True,
                             timeout=60).stdout.strip()
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHIPYARD_")}
        env.update({str(k): str(v) for k, v in (workflow.get("env") or {}).items()})
        env.update({
            # the commit's own sources, as the engine's jobs install them from its checkout
            "PYTHONPATH": str(self.repo / "src"),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            "GITHUB_REF": ref, "GITHUB_WORKSPACE": str(self.repo), "RUNNER_OS": "Linux",
            "RUNNER_TEMP": str(files), "GITHUB_OUTPUT": str(files / "output"), "GITHUB_ENV": str(files / "env"),
            "GITHUB_PATH": str(files / "path"),
        })
        return env

    def value(self, expression: str, matrix: Mapping[str, Any]) -> str:
        """A `${{ }}` expression of the work steps: matrix, secrets, inputs, the plan's outputs."""
        scope, _, name = expression.partition(".")
        if scope == "matrix" and name in matrix:
            return str(matrix[name])
        if scope == "secrets":
            return self.secrets.get(name, "")  # an unset secret is empty, as on GitHub
        if scope == "inputs":
            return self.inputs.get(name, "")
        if expression == "toJSON(needs.plan.outputs)":
            return json.dumps(self.plan_outputs)
        raise ValueError(f"{WORKFLOW}: expression {expression!r}: the benchmark's direct side cannot evaluate it")

    def applies(self, condition: str | None, matrix: Mapping[str, Any]) -> bool:
        if not condition:
            return True
        found = re.fullmatch(r"matrix\.(\w+) != ''", condition.strip())
        if not found:
            raise ValueError(f"{WORKFLOW}: if: {condition!r}: the benchmark's direct side cannot evaluate it")
        return str(matrix.get(found.group(1), "")) != ""

    def run_job(self, workflow: Mapping[str, Any], job_id: str, matrix: Mapping[str, Any]) -> None:
        name = f"{job_id} {matrix.get('id', '')}".strip()
        files = self.logs / "runner" / name.replace(" ", "_")
        files.mkdir(parents=True, exist_ok=True)
        env = self.env(workflow, files)
        for step in workflow["jobs"][job_id]["steps"]:
            script = step.get("run")
            if script is None or step_kind(step["name"]) != WORK or "shipyard " not in script:
                continue  # a runner's own set-up, or an action: the engine's overhead
            if not self.applies(step.get("if"), matrix):
                continue
            for stale in ("output", "env", "path"):
                (files / stale).write_text("")
            step_env = {**env, **{k: EXPRESSION.sub(lambda m: self.value(m.group(1), matrix), str(v))
                                  for k, v in (step.get("env") or {}).items()}}
            body = EXPRESSION.sub(lambda m: self.value(m.group(1), matrix), script)
            log = self.logs / f"{len(self.steps):02d}-{name.replace(' ', '_')}.log"
            start = time.perf_counter()
            with log.open("w") as out:
                done = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", body],
                                      cwd=self.repo, env=step_env, stdout=out, stderr=subprocess.STDOUT,
                                      timeout=3 * 3600)
            outputs = _outputs((files / "output").read_text())
            took = time.perf_counter() - start
            if done.returncode != 0:
                # the job ends here, as on a runner; the jobs after it still run, as the workflow's
                # `if: !cancelled()` lets them
                last = (log.read_text(errors="replace").strip().splitlines() or [""])[-1]
                self.steps.append(DirectStep(name, step["name"], took, failed=f"exit {done.returncode}: {last[:150]}"))
                print(f"bench-pipeline: direct: {name}: step {step['name']!r} failed (exit {done.returncode}); "
                      f"its log: {log}", flush=True)
                return
            self.steps.append(DirectStep(name, step["name"], took, outputs.get("status", "0")))
            if job_id == "plan":
                self.plan_outputs.update(outputs)
            for line in (files / "env").read_text().splitlines():
                key, sep, value = line.partition("=")
                if sep:
                    env[key] = value
            for line in (files / "path").read_text().splitlines():
                env["PATH"] = f"{line}{os.pathsep}{env['PATH']}"


def _outputs(text: str) -> dict[str, str]:
    """A GITHUB_OUTPUT file's `name=value` lines and `name<<DELIMITER` blocks."""
    out: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            key, delimiter = line.split("<<", 1)
            block = []
            for inner in lines:
                if inner == delimiter:
                    break
                block.append(inner)
            out[key] = "\n".join(block)
        elif "=" in line:
            key, value = line.split("=", 1)
            out[key] = value
    return out


def _matrix_output(job: Mapping[str, Any]) -> str | None:
    matrix = str((job.get("strategy") or {}).get("matrix", ""))
    found = re.search(r"needs\.plan\.outputs\.(\w+)", matrix)
    return found.group(1) if found else None


def dispatch_inputs(repo: Path) -> dict[str, str]:
    """The workflow_dispatch inputs `shipyard ci run` gives for NARROWED: the variant, the Python,
    and the release's Linux platforms (what act runs here)."""
    from shipyard.release.validate import load_spec

    platforms = [name for name, platform in load_spec(repo).release.platforms.items() if platform.os == "linux"]
    return {"variant": "cpu", "python": "3.11", "platform": ",".join(platforms)}


def job_image_toolchains(repo: Path) -> None:
    """What the Linux job image holds beside shipyard and apt packages, on this host too: the glibc
    routes' toolchains (`shipyard toolchain install`, into the machine's cache both sides share).
    The engine's jobs find them in the image, which is set-up; so is this, before the timer."""
    from shipyard.ci.linux_job_image import toolchain_routes
    from shipyard.release.validate import load_spec

    for route in toolchain_routes(load_spec(repo)):
        subprocess.run([sys.executable, "-m", "shipyard.cli", "toolchain", "install", route], cwd=repo, check=True,
                       timeout=3600)


def run_direct(side: Side, logs: Path) -> tuple[float, Direct]:
    """Every Linux job of the plan, by the commands of its work steps, in `needs` order, one at a
    time. The CUDA toolkit-image lanes are left out, as `ci run` leaves them (empty for cpu)."""
    job_image_toolchains(side.repo)
    workflow = yaml.safe_load((side.repo / WORKFLOW).read_text())
    direct = Direct(side.repo, side.secrets, dispatch_inputs(side.repo), logs)
    done: set[str] = set()
    start = time.perf_counter()
    for job_id, job in workflow["jobs"].items():
        needs = job.get("needs") or []
        needs = [needs] if isinstance(needs, str) else needs
        assert set(needs) <= done, f"{job_id} needs {needs}: the file's order is not the needs' order"
        output = _matrix_output(job)
        entries = json.loads(direct.plan_outputs[output])["include"] if output else [{}]
        for matrix in entries:
            if matrix.get("os", "linux") == "linux" and not job_id.endswith("-cuda-image"):
                direct.run_job(workflow, job_id, matrix)
        done.add(job_id)
    return time.perf_counter() - start, direct


# --- side by side -----------------------------------------------------------------------------------

def report(release: str, engine: EngineRun, direct_wall: float, direct: Direct) -> str:
    out = [f"bench-pipeline: {release}'s nightly, {' '.join(NARROWED)}",
           f"  engine  `shipyard ci run` (act, bare job containers)  {engine.wall:8.1f} s wall",
           f"          of which act ran the jobs for {engine.act_span:.1f} s; before and after act (runner images, "
           f"run folder, act's servers): {engine.wall - engine.act_span:.1f} s",
           f"  direct  the same shipyard commands on this host         {direct_wall:8.1f} s wall",
           f"  engine / direct: {engine.wall / direct_wall:.2f}x"]
    if engine.waited >= 1:
        out.append(f"  (waited {engine.waited:.0f} s for another shipyard ci run on this machine first; not counted)")
    direct_jobs: dict[str, dict[str, float]] = defaultdict(dict)
    for ran in direct.steps:
        direct_jobs[ran.job][ran.step] = ran.seconds
    out += ["", f"  {'job / its work steps':66} {'engine s':>9} {'direct s':>9} {'ratio':>7}"]
    failed_directly = {(s.job, s.step): s.status for s in direct.steps if s.status != "0"}
    failed_steps = {(s.job, s.step): s.failed for s in direct.steps if s.failed}
    for job in [*engine.job_seconds, *[j for j in direct_jobs if j not in engine.job_seconds]]:
        mine = sum(direct_jobs[job].values())
        if job not in engine.job_seconds:
            out.append(f"  {job[:66]:66} {'not run':>9} {mine:9.1f} {'-':>7}")
        else:
            seconds = engine.job_seconds[job]
            out.append(f"  {job[:66]:66} {seconds:9.1f} {mine:9.1f} {_ratio(seconds, mine):>7}")
            if not engine.job_results[job].startswith("success"):
                out.append(f"      engine: {engine.job_results[job][:150]}")
        for step, took in direct_jobs[job].items():
            theirs = engine.step_seconds.get(job, {}).get(step)
            if theirs is None:
                out.append(f"      {step[:62]:62} {'not run':>9} {took:9.1f} {'-':>7}")
            else:
                out.append(f"      {step[:62]:62} {theirs:9.1f} {took:9.1f} {_ratio(theirs, took):>7}")
            if (job, step) in failed_steps:
                out.append(f"        direct: failed, {failed_steps[(job, step)]}")
            if (job, step) in failed_directly:
                out.append(f"        direct: exit {failed_directly[(job, step)]} (a stable feature failed; recorded, "
                           "as the job records it)")
    # the jobs both sides ran to their end with the same work: a ratio that a failure on one side does not skew
    same = [job for job in engine.job_seconds if engine.job_results[job] == "success" and job in direct_jobs
            and not any(job == failed[0] for failed in failed_steps)]
    if len(same) < len(set(engine.job_seconds) | set(direct_jobs)):
        theirs_same = sum(engine.job_seconds[j] for j in same)
        mine_same = sum(sum(direct_jobs[j].values()) for j in same)
        out += ["", f"  the {len(same)} jobs both sides finished green: engine {theirs_same:.1f} s of job time, direct "
                    f"{mine_same:.1f} s: {_ratio(theirs_same, mine_same)}"]
    kinds: dict[str, float] = defaultdict(float)
    for job, seconds in engine.job_seconds.items():
        steps = engine.step_seconds.get(job, {})
        for step, took in steps.items():
            kinds[step_kind(step)] += took
        kinds[JOB_START_STOP] += max(0.0, seconds - sum(steps.values()))
    total = sum(kinds.values())
    work_direct = sum(s.seconds for s in direct.steps)
    out += ["", "  where the engine's time goes (summed over jobs; act runs independent jobs side by side, so the sum",
            f"  exceeds its wall time): {total:.1f} s of job time",
            f"    {'the work steps (the commands the direct side ran)':76} {kinds.pop(WORK, 0.0):8.1f} s"
            f"   direct: {work_direct:.1f} s"]
    for kind, took in sorted(kinds.items(), key=lambda item: -item[1]):
        out.append(f"    {kind:76} {took:8.1f} s")
    out += ["", "  Both sides: own servers, own clone of the same fixture commit, fresh dist/ and .shipyard/ (no build",
            "  cache shared); shared: the machine's toolchain cache (~/.cache/shipyard: bullseye sysroot, conda",
            "  bootstrap channel) and the Docker engine's layer cache (the direct side runs first)."]
    return "\n".join(out)


def _ratio(engine: float, direct: float) -> str:
    return f"{engine / direct:.1f}x" if direct >= 0.05 else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release", choices=sorted(SIDES), default="ember",
                        help="ember's own release (default; 20-30 min), or the small fixture release (quick)")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temporary one)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-", dir="/var/tmp") as tmp:
        base = args.keep or Path(tmp)
        # a docker engine: the running one, else a dockerd started here and stopped at the end, as
        # the suite's docker_engine fixture does
        ensure_engine(base)
        try:
            return _run_sides(args.release, base)
        finally:
            stop_started_engine(base)


def _run_sides(release: str, base: Path) -> int:
    setup = SIDES[release]
    # the folders' names also name the stand-in base images of ember's sides: one per run
    engine_base, direct_base = base / f"engine-{os.getpid()}", base / f"direct-{os.getpid()}"
    # the direct side first: whatever the Docker engine's layer cache keeps favours the engine's side
    with setup(direct_base) as side:
        direct_wall, direct = run_direct(side, base / "direct-logs")
    print(f"bench-pipeline: direct side done in {direct_wall:.1f} s; the engine's side now", flush=True)
    with setup(engine_base) as side:
        engine = run_engine(side, base / "engine-run")
    print(report(release, engine, direct_wall, direct))
    print("\n  engine's job table (jobs.json):")
    print("\n".join(f"    {line}" for line in engine.run.table().splitlines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
