"""One local run of a committed workflow: prepare (images, shares, files), run act, report.

The pieces: act_images.py (bare images), act_host.py (what of the host every container gets),
act_run.py (act's files and command line), act_report.py (the job table).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from shipyard.ci.cuda_builder import builder_image_tag
from shipyard.ci.jobs import PlanFilter, plan_outputs
from shipyard.ci.linux_job_image import OUTPUT as JOB_IMAGE_OUTPUT
from shipyard.ci.linux_job_image import PUSH_VARIABLE, REPOSITORY_VARIABLE
from shipyard.ci.runners import CUDA_BUILDER_IMAGES, LINUX_BUILDER_IMAGE
from shipyard.errors import UsageError, public_url
from shipyard.host import docker_base
from shipyard.local_ci import act_images, act_run
from shipyard.local_ci.act_host import HostShare, pythons_mount, stage_share
from shipyard.local_ci.act_report import ActLog, ExpectedJob, JobRow, expected_jobs, job_table, needed_jobs
from shipyard.local_ci.publish_stand_ins import stage_stand_in_targets
from shipyard.plumbing import command
from shipyard.plumbing.file_lock import exclusive
from shipyard.plumbing.port_ranges import claimed_port_range
from shipyard.plumbing.progress import Progress
from shipyard.release.spec import Release


@dataclass(frozen=True)
class RunOutcome:
    rows: list[JobRow]
    act_status: int
    folder: act_run.RunFolder
    secrets: list[str]  # the secret names passed (never their values)
    act_errors: list[str]  # what act itself reported as fatal, outside any job

    @property
    def failed(self) -> list[JobRow]:
        return [row for row in self.rows if row.counts_as_failure]


def not_runnable_here(release: Release, workflow: Mapping[str, Any],
                      unavailable_images: Mapping[str, str]) -> dict[str, str]:
    """Why jobs cannot run here, by runner label or workflow job id: runners that are not Linux
    (act starts Linux containers), the CUDA toolkit-image lanes whose image the engine lacks,
    and jobs whose container image cannot be made here."""
    out: dict[str, str] = {}
    missing = missing_builder_images()
    for platform in release.platforms.values():
        if platform.os != "linux":
            out[platform.github_runner] = (f"runs on {platform.github_runner}, a {platform.os} runner; act runs "
                                           f"jobs in Linux containers only")
    for job_id, body in workflow.get("jobs", {}).items():
        image = made_here(body)
        if image is not None and image in unavailable_images:
            out[job_id] = unavailable_images[image]
        if "-cuda-image" in job_id and missing:
            out[job_id] = (f"builds in {', '.join(missing.values())}, which the job makes from NVIDIA's archived "
                           f"installer (a host this machine cannot reach) and this engine does not hold")
    return out


def missing_builder_images() -> dict[str, str]:
    """CUDA version -> builder image tag (CUDA_BUILDER_IMAGES), for those this engine does not hold."""
    return {cuda: builder_image_tag(cuda) for cuda in CUDA_BUILDER_IMAGES
            if docker_base.image_labels(builder_image_tag(cuda)) is None}


def variants_without_builder(release: Release) -> tuple[str, ...]:
    """The variants whose CUDA builds only in a builder image (CUDA_BUILDER_IMAGES) this engine does
    not hold: `ci run` leaves them out of the plan when no --variant is given, as it leaves out the
    platforms act cannot run, so that the manifest job finishes a release of what ran."""
    missing = missing_builder_images()
    return tuple(name for name, variant in release.variants.items() if variant.cuda in missing)


# act names a job's container after the workflow's and the job's names only (act-nightly-plan-…),
# so two runs of one workflow on one Docker engine would take each other's containers: runs on
# this machine take turns.
ENGINE_LOCK = Path("/var/tmp") / f"shipyard-ci-run-{os.getuid()}.lock"


@contextmanager
def one_run_per_engine(workflow_name: str, progress: Progress | None) -> Iterator[None]:
    """Hold the machine's `shipyard ci run` lock for the block, saying so while waiting for it.
    Holding it, remove the job containers of `workflow_name` that a killed run left: act would
    meet them under the names it gives this run's jobs."""
    with exclusive(ENGINE_LOCK, wait=False) as held:
        if held:
            _remove_stale_containers(workflow_name, progress)
            yield
            return
    if progress:
        progress(f"waiting for another shipyard ci run on this machine to finish (act names containers by "
                 f"workflow and job, so runs take turns; lock {ENGINE_LOCK})")
    with exclusive(ENGINE_LOCK):
        _remove_stale_containers(workflow_name, progress)
        yield


def _remove_stale_containers(workflow_name: str, progress: Progress | None) -> None:
    prefix = "act-" + re.sub(r"-+", "-", re.sub(r"[^a-zA-Z0-9]", "-", workflow_name)) + "-"  # as act names them
    found = command.run(["docker", "ps", "-a", "--format", "{{.Names}}"], timeout=60, what="docker ps").stdout.split()
    stale = [name for name in found if name.startswith(prefix)]
    if stale:
        if progress:
            progress(f"removing {len(stale)} job container(s) a stopped run left: {', '.join(stale)}")
        command.run(["docker", "rm", "-f", *stale], timeout=300, check=False, what="docker rm")


def served_folders(release: Release) -> tuple[tuple[Path, ...], list[str]]:
    """The folders release.yaml's static and conda targets publish into, which a web server on
    this host serves: an absolute one is mounted at the same path into the runner containers, so
    the publish job writes where the server reads. A relative one is inside the job's workspace
    and ends with the job: the words that say so, for the run's output."""
    folders, notes = [], []
    for target in release.publish.values():
        if target.path is None:
            continue
        if Path(target.path).is_absolute():
            folder = Path(target.path)
            folder.mkdir(parents=True, exist_ok=True)
            folders.append(folder)
        else:
            notes.append(f"publish.{target.name}.path {target.path} is inside the publish job's workspace, which "
                         f"ends with the job; to publish where {target.url} is served, make path absolute "
                         f"(the folder that server serves: a local run mounts it)")
    return tuple(dict.fromkeys(folders)), notes


def left_out_here(release: Release, workflow: Mapping[str, Any], request: act_run.RunRequest,
                  selected: list[str], expected: list[ExpectedJob], why_not: dict[str, str]) -> list[ExpectedJob]:
    """The jobs of the plan that the run's inputs left out because act cannot run them here: the
    `platform` input's (Windows, macOS runners) and the variants of `request.left_out_variants`
    (CUDA builder images this engine lacks), so that the table lists them as not runnable instead
    of dropping them. The run narrows them out of the plan: a manifest job then finishes a release
    of what ran."""
    if not request.platforms and not request.left_out_variants:
        return []
    whole = plan_outputs(release, PlanFilter(variants=(*request.variants, *request.left_out_variants),
                                             pythons=request.pythons,
                                             package_types=request.package_types))
    kept = {(job.job_id, job.matrix_id) for job in expected}
    out = []
    for job in expected_jobs(workflow, whole, selected):
        if job.matrix_id and (job.job_id, job.matrix_id) not in kept and \
                (job.runner in why_not or job.job_id in why_not):
            out.append(job)
    for runner in {job.runner for job in out if job.runner in why_not}:
        why_not[runner] += f" (left out of the plan: --platform {','.join(request.platforms)})"
    for job_id in {job.job_id for job in out if job.job_id in why_not}:
        why_not[job_id] += f" (left out of the plan: variants {','.join(request.left_out_variants)})"
    return out


def made_here(job: Mapping[str, Any]) -> str | None:
    """The image a job's container needs made here before the run: the one it names, or for the
    Linux job image (the plan job's output) the builder base that image is made FROM; None for a
    job on the runner, or an image only an expression names."""
    container = job.get("container")
    image = container.get("image") if isinstance(container, dict) else container
    if not isinstance(image, str):
        return None
    if f"outputs.{JOB_IMAGE_OUTPUT}" in image:
        return LINUX_BUILDER_IMAGE
    return None if "${{" in image else image


def prepare_images(workflow: Mapping[str, Any], job_ids: list[str], share: HostShare,
                   progress: Progress | None) -> tuple[str, dict[str, str]]:
    """The runner image, and the job container images that cannot be made here (with why)."""
    docker_base.ensure_docker_engine(required=True)
    runner = act_images.runner_image(share, progress=progress)
    unavailable = {}
    for image in dict.fromkeys(filter(None, (made_here(workflow["jobs"][job_id]) for job_id in job_ids))):
        made = act_images.job_image(image, share, progress=progress)
        if not made.available:
            unavailable[image] = made.origin
    return runner, unavailable


# The repository variables a local run gives the workflow unless told otherwise (--var): the Linux
# job image stays in this machine's engine, which act's jobs share, under a name of its own.
LOCAL_VARIABLES = {REPOSITORY_VARIABLE: "shipyard/act-job", PUSH_VARIABLE: "false"}


def forget_older_job_images(kept: str, progress: Progress | None) -> None:
    """Remove the local Linux job images (LOCAL_VARIABLES' repository) but `kept`, the one this run
    used: each run of a changed shipyard builds a new one, and the engine would keep them all."""
    repository = LOCAL_VARIABLES[REPOSITORY_VARIABLE]
    found = command.run(["docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", repository], timeout=60,
                        check=False, what="docker image ls").stdout.split()
    older = [tag for tag in found if tag != kept]
    if older:
        if progress:
            progress(f"removing {len(older)} older Linux job image(s): {', '.join(older)}")
        command.run(["docker", "image", "rm", *older], timeout=300, check=False, what="docker image rm")


def run_workflow(release: Release, repo: Path, request: act_run.RunRequest, *, work: Path | None = None,
                 secret_file: Path | None = None, environ: Mapping[str, str] = os.environ,
                 progress: Progress | None = None, targets_file: Path | None = None,
                 on_job: Callable[[JobRow], None] | None = None) -> RunOutcome:
    """Run the committed workflow `request.workflow` under act; every job's row, and act's status.
    With `targets_file` (a local targets file; `release` then holds its stand-ins), the publish job
    publishes to those stand-ins (publish_stand_ins.py)."""
    act = act_run.find_act()
    if secret_file is not None:
        act_run.check_private(secret_file)  # before any work: a loose secret file is refused at once
    text = act_run.committed_workflow_text(repo, request.workflow)
    name = f"{request.workflow}.yml"
    workflow = yaml.safe_load(text)
    jobs = workflow.get("jobs", {})
    if request.job and request.job not in jobs:
        raise UsageError(f"{name}: jobs: no job {request.job!r}; use one of {', '.join(jobs)} "
                         f"(got --job {request.job})")
    # PyYAML reads the key `on` as True (YAML 1.1); GitHub reads it as the word.
    on = workflow.get("on", workflow.get(True)) or {}
    dispatch = (on.get("workflow_dispatch") or {}) if isinstance(on, dict) else {}
    declared = dispatch.get("inputs") or {}
    if request.channel and "channel" not in declared:
        channel = workflow.get("env", {}).get("SHIPYARD_CHANNEL", "its channel")
        raise UsageError(f"{name}: always publishes to {channel}; use --workflow release for another channel "
                         f"(got --channel {request.channel})")
    inputs = request.inputs(declared)
    root = work or Path(tempfile.mkdtemp(prefix="shipyard-ci-run-", dir="/var/tmp"))
    folder = act_run.RunFolder(root.resolve())
    folder.root.mkdir(parents=True, exist_ok=True)
    workflow_file = folder.workflow_dir / name
    workflow_file.parent.mkdir(parents=True, exist_ok=True)
    workflow_file.write_text(text)
    selected = needed_jobs(workflow, request.job)
    share = stage_share(folder.host, environ)
    if progress:
        for item in share.left_out:
            progress(f"not carried into the containers: {item}")
    runner, unavailable = prepare_images(workflow, selected, share, progress)
    folders, folder_notes = served_folders(release)
    if progress and release.conda and any(job.startswith("conda-") for job in selected):
        progress("the conda lanes solve their dependencies from release.yaml's conda.channels: "
                 + ", ".join(public_url(channel) for channel in release.conda.channels))
    if progress and "publish" in selected:
        for note in folder_notes:
            progress(note)
    clone = act_run.clean_clone(repo, folder)
    stand_ins = None if targets_file is None else stage_stand_in_targets(targets_file, folder, release, environ)
    act_run.write_env_file(share, folder, stand_ins.env if stand_ins else None)
    workflow_secrets = act_run.workflow_secrets(text)
    secrets = act_run.write_secret_file(folder, workflow_secrets, environ, secret_file)
    # A stand-in's variable the workflow passes from a secret of the run reaches the publish step that way.
    passed = set(secrets) & set(workflow_secrets)
    unset = [name for name in stand_ins.unset if name not in passed] if stand_ins else []
    if progress and unset and "publish" in selected:
        progress(f"the stand-ins of {targets_file} name credential variables neither this environment nor the "
                 f"run's secrets set: {', '.join(unset)}; the publish job will stop at the first")
    act_run.write_event(folder, inputs, request.ref)
    linux = tuple(dict.fromkeys(p.github_runner for p in release.platforms.values() if p.os == "linux"))
    setup = act_run.ActSetup(act=act, repo=clone, workflow_file=workflow_file, folder=folder, runner_image=runner,
                             runner_labels=linux, share=share, pythons=pythons_mount(),
                             stand_ins=act_run.stage_stand_ins(folder), inputs=inputs, job=request.job,
                             cache_server=folder.root / "cache-server", served_folders=folders,
                             variables=act_run.workflow_variables(text, environ,
                                                                  {**LOCAL_VARIABLES, **request.variables}),
                             read_only_files=(stand_ins.file,) if stand_ins else ())
    log = ActLog()

    def event(record: dict[str, object]) -> None:
        finished = log.feed(record)
        if finished is not None and on_job is not None:
            on_job(finished)

    if progress:
        progress(f"act: {request.workflow}.yml at {request.ref or 'HEAD'}"
                 + (f", job {request.job} and what it needs" if request.job else ", every job")
                 + "".join(f", {k}={v}" for k, v in inputs.items()) + f"; log: {folder.log}")
    with one_run_per_engine(str(workflow.get("name") or request.workflow), progress), claimed_port_range() as ports:
        status = act_run.run_act(replace(setup, server_ports=(ports[0], ports[1])), event)
    used = log.outputs.get("plan", {}).get(JOB_IMAGE_OUTPUT, "")
    if used.startswith(LOCAL_VARIABLES[REPOSITORY_VARIABLE] + ":"):
        forget_older_job_images(used, progress)
    expected = expected_jobs(workflow, log.outputs.get("plan", {}), selected)
    why_not = not_runnable_here(release, workflow, unavailable)
    expected += left_out_here(release, workflow, request, selected, expected, why_not)
    expected.sort(key=lambda job: list(jobs).index(job.job_id))  # in the workflow's order, as act ran them
    rows = job_table(log, expected, why_not)
    folder.job_table.write_text(json.dumps([{"job": r.job_id, "name": r.name, "container": r.container,
                                             "seconds": round(r.seconds, 1), "result": r.result, "reason": r.reason}
                                            for r in rows], indent=1) + "\n")
    return RunOutcome(rows, status, folder, secrets, log.errors)
