"""The release matrix as GitHub jobs: one job per (component, variant, platform) and package
type, building every Python of its cells, so a native core is built once per job as it is here.
The pure components of a package type share one job (per variant they are first built for): each
is a small build, and a job of its own paid a whole container's set-up for it.

Jobs fall into lanes, one workflow job (one `strategy.matrix`) each: Linux wheels in the builder
container, Linux wheels of a CUDA version that needs a builder image of its own, Windows and macOS
wheels, pure wheels (once, after the Linux wheels they are tested against), conda packages per
OS, the mobile runtime, and the Docker images. GitHub runs at most 256 jobs from one matrix: a
lane with more is split into numbered lanes when the workflows are generated, and `shipyard ci
plan` refuses to emit a matrix over the limit (`check_lane_size`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from shipyard.ci.runners import CUDA_BUILDER_IMAGES, HOST_OS
from shipyard.errors import MatrixTooLarge, SpecError
from shipyard.release import matrix
from shipyard.release.kinds import IMAGE, KINDS
from shipyard.release.matrix import ANY, Cell, builder_platform, expand
from shipyard.release.spec import Release

# The word a pure job's id has where a native job's has its component: wheel-pure-cpu-linux-x86_64-any
# (the pure wheels, tested against the cpu variant's linux-x86_64 wheels).
PURE = "pure"
# The platform of a job that builds every mobile target of its component and variant.
MOBILE_PLATFORM = "mobile"

@dataclass(frozen=True)
class BuildJob:
    """One GitHub job: every cell of one component, variant and platform of one package type; a
    pure job: every pure component's cell of one package type."""

    kind: str  # wheel | conda | mobile | docker
    components: tuple[str, ...]  # one, but for a pure job (every pure component) and a docker job (the repository)
    variant: str  # the variant the build command takes (a pure job's: the first it stands for)
    variant_tag: str
    platform: str  # the platform built for; "any" for a pure job, "mobile" for the mobile targets
    builder: str  # the platform whose runner builds it
    os: str
    runner: str
    cuda: str
    pythons: tuple[str, ...]
    cells: tuple[str, ...] = field(default=())

    @property
    def id(self) -> str:
        if self.platform == ANY:
            return f"{self.kind}-{PURE}-{self.variant_tag}-{self.builder}-{ANY}"
        return f"{self.kind}-{self.components[0]}-{self.variant_tag}-{self.platform}"

    @property
    def lane(self) -> str:
        own = KINDS[self.kind].ci_lanes
        if len(own) == 1:  # every job of the kind in one lane (mobile, docker)
            return own[0]
        if self.platform == ANY:
            return f"{self.kind}-pure"
        if self.os == "linux" and self.cuda in CUDA_BUILDER_IMAGES:
            return f"{self.kind}-linux-cuda-image"
        return f"{self.kind}-{self.os}"

    @property
    def cuda_host_cxx(self) -> str:
        """The host compiler the job's CUDA toolkit is proved and used with (g++-11 for 11.8), a
        Debian package of that name; "" for a job without CUDA."""
        from shipyard.host.toolchains.cuda_recipes import cuda_toolkit_recipe

        return cuda_toolkit_recipe(self.cuda).host_cxx if self.cuda else ""

    def matrix_entry(self) -> dict[str, str]:
        return {"id": self.id, "components": " ".join(self.components), "variant": self.variant,
                "variant_tag": self.variant_tag, "platform": self.platform, "builder": self.builder,
                "os": self.os, "runner": self.runner, "cuda": self.cuda, "cuda_host_cxx": self.cuda_host_cxx,
                "pythons": " ".join(self.pythons), "cells": str(len(self.cells))}


def build_jobs(release: Release, cells: Iterable[Cell] | None = None) -> list[BuildJob]:
    """The jobs that build `cells` (default: the whole matrix), in matrix order."""
    jobs: dict[tuple[str, str, str, str], list[Cell]] = {}
    for cell in expand(release) if cells is None else cells:
        if not KINDS[cell.package_type].ci_lanes:
            continue  # made by another kind's jobs (an sdist by `shipyard build`), in their lanes
        if cell.is_pure:  # with the other pure components tested against the same variant and builder
            key = (cell.package_type, PURE, cell.variants[0], builder_platform(release, cell).name)
        else:
            key = (cell.package_type, cell.component, cell.variant,
                   MOBILE_PLATFORM if KINDS[cell.package_type].on_mobile_targets else cell.platform)
        jobs.setdefault(key, []).append(cell)
    out = []
    for (kind, _, variant_name, _), members in jobs.items():
        first = members[0]
        platform = MOBILE_PLATFORM if KINDS[kind].on_mobile_targets else first.platform  # ANY for a pure job
        variant = release.variants[variant_name]
        builder = builder_platform(release, first)
        # An abi3 cell's job sets up every Python it is tested on, its one build's among them.
        pythons = tuple(dict.fromkeys(p for c in members for p in c.test_pythons))
        if first.is_pure:  # built once, with the release's Pythons available for its tests
            pythons = release.pythons
        components = tuple(dict.fromkeys(c.component for c in members))
        out.append(BuildJob(kind=kind, components=components, variant=variant.name, variant_tag=variant.tag,
                            platform=platform, builder=builder.name, os=builder.os, runner=builder.github_runner,
                            cuda="" if first.is_pure else variant.cuda or "", pythons=pythons,
                            cells=tuple(c.id for c in members)))
    return out


def docker_jobs(release: Release) -> list[BuildJob]:
    """One job per variant of release.yaml's images section: a runtime and a devel image."""
    images = release.images
    if images is None:
        return []
    platform = release.platforms[images.platform]
    return [BuildJob(kind=IMAGE.name, components=(images.repository,), variant=name,
                     variant_tag=release.variants[name].tag, platform=platform.name, builder=platform.name,
                     os=platform.os, runner=platform.github_runner,
                     cuda=release.variants[name].cuda or "", pythons=(images.python,))
            for name in images.variants]


@dataclass(frozen=True)
class Lane:
    """One workflow job and its matrix. `part` numbers the lanes a big one was split into."""

    name: str
    jobs: tuple[BuildJob, ...]
    part: int = 0

    @property
    def job_id(self) -> str:
        return f"{self.name}-{self.part}" if self.part else self.name

    @property
    def output(self) -> str:
        """The plan job's output holding this lane's matrix."""
        return self.job_id.replace("-", "_").replace(".", "_")

    @property
    def kind(self) -> str:
        return self.jobs[0].kind

    @property
    def os(self) -> str:
        return self.jobs[0].os

    def matrix(self) -> dict[str, list[dict[str, str]]]:
        return {"include": [job.matrix_entry() for job in self.jobs]}


# The order lanes appear in the workflow (and run in, where they depend on each other): each
# kind's, in the registry's order.
LANE_ORDER = tuple(lane for kind in KINDS.values() for lane in kind.ci_lanes)


def lanes(release: Release, limit: int | None = None) -> list[Lane]:
    """Every lane with at least one job, split into parts of at most `limit` jobs (default:
    GitHub's limit per matrix)."""
    limit = limit or matrix.GITHUB_MATRIX_LIMIT
    by_lane: dict[str, list[BuildJob]] = {}
    for job in [*build_jobs(release), *docker_jobs(release)]:
        by_lane.setdefault(job.lane, []).append(job)
    unknown = set(by_lane) - set(LANE_ORDER)
    if unknown:
        raise SpecError(f"release.yaml: no GitHub job lane for {', '.join(sorted(unknown))}; "
                            f"shipyard.ci.jobs.LANE_ORDER lists the lanes the workflows have")
    out = []
    for name in LANE_ORDER:
        members = by_lane.get(name, [])
        if len(members) <= limit:
            if members:
                out.append(Lane(name, tuple(members)))
            continue
        for part, start in enumerate(range(0, len(members), limit), start=1):
            out.append(Lane(name, tuple(members[start:start + limit]), part))
    return out


def check_lane_size(lane: Lane, limit: int | None = None) -> None:
    """Raise MatrixTooLarge when `lane` holds more jobs than GitHub runs from one matrix."""
    limit = limit or matrix.GITHUB_MATRIX_LIMIT
    if len(lane.jobs) > limit:
        raise MatrixTooLarge(f"job {lane.job_id}: its matrix has {len(lane.jobs)} jobs but GitHub Actions runs at "
                             f"most {limit} from one matrix; run `shipyard ci generate`, which splits it into "
                             f"{lane.name}-1, {lane.name}-2, … of at most {limit} jobs each, and commit the workflows")


@dataclass(frozen=True)
class PlanFilter:
    """What a dispatched run narrows the plan to (the workflows' `variant` and `python` inputs);
    empty means the whole release."""

    variants: tuple[str, ...] = ()
    pythons: tuple[str, ...] = ()
    platforms: tuple[str, ...] = ()  # the builders' platforms (a pure job builds on a Linux one)
    package_types: tuple[str, ...] = ()  # wheel, conda, mobile, docker
    # A component tag's one component (release/release_tags.py) and what it depends on within the
    # release: their jobs only, and no images, which bundle the whole family at its version.
    components: tuple[str, ...] = ()
    # Of `components`, those built only for the tests of the others (not released). A native job
    # builds what it depends on itself; a pure job is tested against the native jobs of its kind,
    # variant and builder (ci/linux_lanes.py downloads their fragments): only those are kept.
    needed: tuple[str, ...] = ()

    def narrow(self, job: BuildJob) -> BuildJob | None:
        """`job` with only the Pythons kept, or None when it builds nothing kept. A pure job is built
        once and tested on each of its Pythons: it keeps its one cell and is tested on the kept
        Pythons only. A job without Pythons (mobile) stays as it is."""
        if self.variants and not {job.variant, job.variant_tag} & set(self.variants):
            return None
        if self.components:
            kept = tuple(c for c in job.components if c in self.components)
            if not kept or job.kind == IMAGE.name:
                return None
            if kept != job.components:  # a pure job: only the kept components' cells
                job = replace(job, components=kept, cells=tuple(
                    c for c in job.cells if any(c.startswith(f"{name}-{ANY}-") for name in kept)))
        if self.platforms and job.builder not in self.platforms:
            return None
        if self.package_types and job.kind not in self.package_types:
            return None
        if not self.pythons or not job.pythons:
            return job
        pythons = tuple(p for p in job.pythons if p in self.pythons)
        if job.platform == ANY:
            return replace(job, pythons=pythons) if pythons else None
        tags = {"-cp" + p.replace(".", "") + "-" for p in pythons}
        cells = tuple(c for c in job.cells if any(tag in c for tag in tags))
        return replace(job, pythons=pythons, cells=cells) if pythons else None


def plan_outputs(release: Release, only: PlanFilter | None = None) -> dict[str, str]:
    """The plan job's outputs: each lane's matrix as compact JSON, by output name. Narrowed by
    `only`, a lane left without jobs gets an empty matrix (`{"include":[]}`), so every output the
    workflow reads exists."""
    narrowed = []
    for lane in lanes(release):
        check_lane_size(lane)
        if only is not None:
            lane = replace(lane, jobs=tuple(kept for job in lane.jobs if (kept := only.narrow(job)) is not None))
        narrowed.append(lane)
    if only is not None and only.needed:
        tested_against = {(job.kind, job.variant_tag, job.builder) for lane in narrowed for job in lane.jobs
                          if job.platform == ANY}
        narrowed = [replace(lane, jobs=tuple(
            job for job in lane.jobs if job.platform == ANY or set(job.components) - set(only.needed)
            or (job.kind, job.variant_tag, job.builder) in tested_against)) for lane in narrowed]
    return {lane.output: json.dumps(lane.matrix(), separators=(",", ":")) for lane in narrowed}


def host_runner(release: Release) -> str:
    """The runner of the plan, manifest and publish jobs: the first Linux platform's."""
    for platform in release.platforms.values():
        if platform.os == HOST_OS:
            return platform.github_runner
    raise SpecError("release.yaml: the release pipeline's plan and publish jobs run on a Linux runner; "
                        "add a platform with os: linux and its github_runner")
