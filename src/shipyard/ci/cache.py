"""The actions/cache key of a build job, from shipyard's own cache key function.

The cached folder is `.shipyard/cache`, where shipyard keeps each cell's build under the key of
its inputs; a job whose inputs are unchanged restores its entries and every cell is a cache hit,
so an unchanged cell is a no-op on CI as it is here. The actions/cache key names the same inputs
(the component's sources, its release.yaml sections, the runner and image), so a change makes a
new entry, while `restore-keys` (the job id) still restores the last one for the cells that
did not change.
"""

from __future__ import annotations

from shipyard.ci.cuda_builder import builder_image_tag
from shipyard.ci.jobs import BuildJob, build_jobs, docker_jobs
from shipyard.ci.runners import CUDA_BUILDER_IMAGES, LINUX_BUILDER_IMAGE
from shipyard.errors import UsageError, nearest
from shipyard.host.source_tree import hash_tree
from shipyard.plumbing.build_cache import cache_key
from shipyard.release.spec import Spec


def find_job(spec: Spec, job_id: str) -> BuildJob:
    jobs = {job.id: job for job in [*build_jobs(spec.release), *docker_jobs(spec.release)]}
    if job_id not in jobs:
        hint = nearest(job_id, jobs)
        raise UsageError(f"no job {job_id!r} in the release pipeline" + (f"; did you mean {hint!r}?" if hint else "")
                         + " (`shipyard ci plan` lists them)")
    return jobs[job_id]


def job_cache_key(spec: Spec, job_id: str) -> str:
    """`<job id>-<sha256 of its inputs>`: restore-keys match on the job id."""
    job = find_job(spec, job_id)
    release = spec.release
    # each component's sources and release.yaml section (a docker job's: the images' folder and repository)
    components = {name: release.components.get(name) for name in job.components}
    sources = " ".join(hash_tree(c.source_dir(spec.root) if c else spec.root / "docker") for c in components.values())
    section = {"components": {name: c.model_dump(mode="json") if c else name for name, c in components.items()},
               "variant": release.variants[job.variant].model_dump(mode="json"),
               "platform": job.builder, "version": release.release.version, "cells": list(job.cells)}
    builder = builder_image_tag(job.cuda) if job.cuda in CUDA_BUILDER_IMAGES else LINUX_BUILDER_IMAGE
    image = builder if job.os == "linux" else ""
    key = cache_key(kind=f"github-{job.kind}", sources=sources, spec_section=section,
                    toolchain=f"{job.runner} {image}".strip(), python=" ".join(job.pythons))
    return f"{job.id}-{key}"
