"""`shipyard ci …`: generate and check the GitHub Actions workflows, and the small commands their
jobs run (plan, pythons, cache-key, trusted-publishing)."""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shipyard.cli.shared import console, err_console, load_release
from shipyard.errors import MergeError, RunFailed, ToolchainMissing, UsageError, WorkflowDrift

if TYPE_CHECKING:
    from shipyard.release.spec import Release


def _without_stand_ins(args: argparse.Namespace) -> None:
    """UsageError when `--targets` is given to `ci generate` or `ci check`: the workflows are generated
    from release.yaml's own targets; stand-ins are for publish, promote and `ci run` here."""
    if getattr(args, "targets", None):
        raise UsageError(f"--targets {args.targets}: the workflows are generated from release.yaml's own publish "
                         f"targets; stand-ins are for `shipyard publish`, `promote` and `ci run` here: "
                         f"drop --targets")


def cmd_ci_generate(args: argparse.Namespace) -> int:
    from shipyard.ci.drift import write_generated
    from shipyard.ci.jobs import lanes
    from shipyard.ci.repository_sources import check_sources_in_repository, repository_root

    _without_stand_ins(args)
    spec = load_release(args)
    check_sources_in_repository(spec)
    changed = write_generated(spec)
    all_lanes = lanes(spec.release)
    jobs = sum(len(lane.jobs) for lane in all_lanes)
    top = repository_root(spec.root)
    for path in changed:
        console.print(f"wrote {path if top == spec.root.resolve() else top / path}")
    console.print(f"{'updated' if changed else 'unchanged'}: {len(all_lanes)} build lanes, {jobs} build jobs "
                  f"per release (plus plan, manifest and publish)")
    return 0


def cmd_ci_check(args: argparse.Namespace) -> int:
    from shipyard.ci.drift import drift
    from shipyard.ci.repository_sources import check_sources_in_repository

    _without_stand_ins(args)
    spec = load_release(args)
    check_sources_in_repository(spec)
    drifted = drift(spec)
    if drifted:
        for item in drifted:
            err_console.print(item.diff, markup=False, highlight=False, soft_wrap=True)
        raise WorkflowDrift(f"{', '.join(str(d.path) for d in drifted)}: not what release.yaml generates; "
                            f"run `shipyard ci generate` and commit the result")
    console.print("[green]ok[/]: .github/workflows matches release.yaml")
    return 0


def _names(value: str | None) -> tuple[str, ...]:
    """A workflow input's list: names split on commas and blanks; empty means none given."""
    return tuple(name for name in re.split(r"[\s,]+", value or "") if name)


def cmd_ci_plan(args: argparse.Namespace) -> int:
    import json

    from shipyard.ci.jobs import PlanFilter, plan_outputs
    from shipyard.release.cell_filters import check_filters
    from shipyard.release.release_tags import tag_release
    from shipyard.release.tag_channels import tag_channel_problem
    from shipyard.wheel.release_dependencies import selection_dependencies

    spec = load_release(args)
    ref = args.ref or ""
    # A tag push releases what the tag names (the family, or one component), at the version
    # release.yaml gives it; a branch or a dispatch releases everything.
    tagged = tag_release(spec.release, ref.removeprefix("refs/tags/")) if ref.startswith("refs/tags/") else None
    # A component tag builds what its component depends on within the release too (its tests
    # install them, from the same run's packages); the manifest job keeps the tagged one alone.
    components: tuple[str, ...] = ()
    needed: tuple[str, ...] = ()
    if tagged and tagged.component:
        needed = tuple(selection_dependencies(spec, [tagged.component]))
        components = (tagged.component, *needed)
        if needed:
            err_console.print(f"tag {tagged.tag}: also builds {', '.join(needed)} ({tagged.component} depends on "
                              f"{'it' if len(needed) == 1 else 'them'}; built and tested, not released)")
    # Before the channel's name: release.yml names no channel for a pre-release tag it may not publish.
    if tagged and (problem := tag_channel_problem(tagged.tag, tagged.version, args.channel,
                                                  list(spec.release.channels))):
        raise UsageError(problem)
    if args.channel not in spec.release.channels:
        raise UsageError(f"--channel {args.channel}: release.yaml's channels are {', '.join(spec.release.channels)}")
    if (problem := _final_channel_problem(spec.release, args.channel, ref, tagged is not None)) is not None:
        raise UsageError(problem)
    only = PlanFilter(variants=_names(args.variant), pythons=_names(args.python), platforms=_names(args.platform),
                      package_types=_names(args.package_type),
                      components=components, needed=needed)
    check_filters(spec.release, variant=only.variants, python=only.pythons, platform=only.platforms,
                  package_type=only.package_types)
    outputs = plan_outputs(spec.release, only if only != PlanFilter() else None)
    for name, value in outputs.items():
        print(f"{name}={value}")
    for name, value in outputs.items():
        entries = json.loads(value)["include"]
        err_console.print(f"{name}: {len(entries)} jobs ({sum(int(e['cells']) for e in entries)} cells)")
    return 0


def _final_channel_problem(release: Release, channel: str, ref: str, tagged: bool) -> str | None:
    """Why a run of `ref` may not publish to `channel` because it is no release tag, or None. The
    channel that holds releases takes only a tagged run: release.yml lets a dispatch choose the
    channel from any branch, and that branch's head is no release."""
    from shipyard.release.tag_channels import pipeline_channels

    pipeline = pipeline_channels(list(release.channels))
    if pipeline is None or channel != pipeline.final or tagged:
        return None
    others = ", ".join(c for c in pipeline.candidates if c != channel) or pipeline.nightly
    return (f"--ref: channel {channel} is published only from a release tag (v{release.release.version}, or "
            f"<component>-v<its version>); push that tag, or dispatch another channel ({others}) "
            f"(got {ref or 'no ref'})")


def cmd_ci_pythons(args: argparse.Namespace) -> int:
    from shipyard.host.toolchains.discover import discover
    from shipyard.plumbing import command

    spec = load_release(args)
    unknown = [p for p in args.python if p not in spec.release.pythons]
    if unknown:
        raise UsageError(f"{', '.join(unknown)}: not among release.yaml's pythons ({', '.join(spec.release.pythons)})")
    inventory = discover()
    missing = [p for p in args.python if inventory.interpreter(p) is None]
    for python in args.python:
        if python not in missing:
            console.print(f"  {python}: {inventory.interpreter(python).path}")  # type: ignore[union-attr]
    if missing:
        uv = shutil.which("uv")
        if uv is None:
            raise ToolchainMissing(f"Pythons {', '.join(missing)} are missing and uv (which installs them) is not on "
                                f"PATH; uv comes with shipyard: put the bin folder of shipyard's venv on PATH, or "
                                f"install those Pythons")
        console.print(f"installing {', '.join(missing)} with uv")
        command.run([uv, "python", "install", *missing], timeout=1800, capture=False)
        discover.cache_clear()
        still = [p for p in missing if discover().interpreter(p) is None]
        if still:
            raise ToolchainMissing(f"uv installed Pythons {', '.join(still)} but shipyard does not find them; put "
                                f"uv's executable folder (~/.local/bin) on PATH")
    console.print(f"[green]ready[/]: Pythons {', '.join(args.python)}")
    return 0


def cmd_ci_builder_dockerfile(args: argparse.Namespace) -> int:
    from shipyard.ci.cuda_builder import builder_dockerfile

    sys.stdout.write(builder_dockerfile(args.cuda))
    return 0


def cmd_ci_cache_key(args: argparse.Namespace) -> int:
    from shipyard.ci.cache import job_cache_key

    print(job_cache_key(load_release(args), args.job))
    return 0


def cmd_ci_trusted_publishing(args: argparse.Namespace) -> int:
    from shipyard.publish.trusted_publishing import check_trusted_publishing

    print(check_trusted_publishing(load_release(args), args.target))
    return 0


def cmd_ci_fragments(args: argparse.Namespace) -> int:
    from shipyard.ci.fragments import missing_cells, missing_fragments, planned_cells, read_plan_jobs
    from shipyard.record.manifest import MANIFEST_FIX, require_manifest
    from shipyard.release.release_tags import released_components

    jobs = read_plan_jobs(Path(args.plan))
    missing = missing_fragments(jobs, Path(args.folder))
    expected = len(jobs)
    if missing:
        raise MergeError(f"{len(missing)} of {expected} build jobs uploaded no fragment (they failed before "
                         f"their upload; their logs say why): {', '.join(missing)}")
    console.print(f"every build job of the plan uploaded its fragment ({expected})")
    if args.dist is None:
        return 0
    # A fragment can still lack cells of its job: the release is complete when every planned cell
    # has a record (an artifact, failing features included, or not applicable).
    release = load_release(args).release
    cells = planned_cells(release, jobs, Path(args.plan), released_components(release, args.ref))
    manifest = require_manifest(Path(args.dist) / "manifest.json", MANIFEST_FIX)
    absent = missing_cells(cells, manifest)
    if absent:
        raise MergeError(f"{Path(args.dist) / 'manifest.json'}: {len(absent)} of {len(cells)} cells of the plan have "
                         f"no record, so the release is incomplete and is not published; the logs of their jobs say "
                         f"why: {', '.join(absent)}")
    console.print(f"every cell of the plan is in the merged manifest ({len(cells)})")
    return 0


def cmd_ci_run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from shipyard.local_ci.act_report import render_table
    from shipyard.local_ci.act_run import RunRequest
    from shipyard.local_ci.workflow_run import run_workflow, variants_without_builder

    spec = load_release(args)  # with --targets, the stand-ins: what the publish job will publish to
    platforms = _names(",".join(args.platform or [])) or tuple(
        name for name, platform in spec.release.platforms.items() if platform.os == "linux")
    variants = _names(",".join(args.variant or []))
    left_out: tuple[str, ...] = ()
    if not variants and (left_out := variants_without_builder(spec.release)):
        # as for Windows and macOS: a plan without them, so the manifest job finishes a release of what ran
        variants = tuple(name for name in spec.release.variants if name not in left_out)
        err_console.print(f"leaving {', '.join(left_out)} out of the plan: its jobs build in a CUDA builder image "
                          f"this engine does not hold (made from NVIDIA's archived installer); the table lists them "
                          f"as not runnable", markup=False, highlight=False)
    request = RunRequest(workflow=args.workflow, job=args.job, variants=variants,
                         pythons=_names(",".join(args.python or [])), platforms=platforms,
                         package_types=_names(",".join(args.package_type or [])), channel=args.channel, ref=args.ref,
                         variables=_variables(args.var or []), left_out_variants=left_out)
    from shipyard.release.cell_filters import check_filters

    check_filters(spec.release, variant=request.variants, python=request.pythons, platform=request.platforms,
                  package_type=request.package_types)

    def finished(row: Any) -> None:
        seconds = f" in {row.seconds:.0f} s" if row.seconds else ""
        err_console.print(f"{row.name}: {row.result}{seconds}" + (f" ({row.reason})" if row.reason else ""),
                          markup=False, highlight=False)

    from shipyard.ci.repository_sources import repository_root

    # act runs the repository's workflows on a clone of the whole repository (the release folder may
    # be below its top: ci/release_folder.py).
    outcome = run_workflow(spec.release, repository_root(spec.root), request,
                           work=Path(args.work) if args.work else None,
                           secret_file=Path(args.secret_file) if args.secret_file else None,
                           targets_file=Path(args.targets) if getattr(args, "targets", None) else None,
                           progress=lambda text: err_console.print(text, markup=False, highlight=False),
                           on_job=finished)
    print(render_table(outcome.rows))
    print(f"run folder: {outcome.folder.root} (act's log: {outcome.folder.log.name}, the table as JSON: "
          f"{outcome.folder.job_table.name}, artifacts: {outcome.folder.artifacts.name}/)")
    if outcome.secrets:
        print(f"secrets passed from a 0600 file: {', '.join(outcome.secrets)}")
    if outcome.failed:
        raise RunFailed(f"{len(outcome.failed)} job(s) failed: {', '.join(r.name for r in outcome.failed)}; "
                        f"act's log is {outcome.folder.log}")
    if outcome.act_status != 0 and not any(r.result in ("success", "failure") for r in outcome.rows):
        why = f": {outcome.act_errors[-1]}" if outcome.act_errors else ""
        raise RunFailed(f"act exited {outcome.act_status} before any job ran{why}; see {outcome.folder.log}")
    return 0


def _variables(given: list[str]) -> dict[str, str]:
    """--var NAME=VALUE options as {NAME: VALUE}."""
    variables = {}
    for item in given:
        name, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise UsageError(f"--var: not NAME=VALUE with NAME letters, digits and _; write it as "
                             f"--var SHIPYARD_INDEX_URL=http://... (got {item})")
        variables[name] = value
    return variables


def cmd_ci_cibuildwheel(args: argparse.Namespace) -> int:
    from shipyard.ci.cibuildwheel_config import cibuildwheel_config

    spec = load_release(args)
    config = cibuildwheel_config(spec, platform=args.platform, variant=args.variant, component=args.component,
                                 pythons=tuple(args.python or ()),
                                 core_prefix=Path(args.core_prefix) if args.core_prefix else None)
    if args.output:
        Path(args.output).write_text(config.toml())
        err_console.print(f"wrote {args.output}: cibuildwheel --platform {config.platform} builds "
                          f"{' '.join(config.build)}", markup=False, highlight=False)
        print(config.project)  # the package folder cibuildwheel takes as its argument
    else:
        sys.stdout.write(config.toml())
    return 0


def cmd_ci_native_core(args: argparse.Namespace) -> int:
    from shipyard.ci.cibuildwheel_config import cibuildwheel_platform, platform_cells
    from shipyard.cli.shared import state_folder
    from shipyard.wheel.native_core import build_core_once

    spec = load_release(args)
    cibuildwheel_platform(spec, args.platform)  # one line for a platform the cibuildwheel lanes do not build
    variant = spec.release.find_variant(args.variant)
    component = spec.release.components.get(args.component)
    if variant is None or component is None or component.native_core is None:
        with_core = [name for name, c in spec.release.components.items() if c.native_core is not None]
        raise UsageError(f"--variant {args.variant} --component {args.component}: not a variant and a component with "
                         f"a native_core in release.yaml; components with one: {', '.join(with_core) or 'none'}")
    cells = platform_cells(spec, args.platform, variant.name, component.name)
    if not cells:
        raise UsageError(f"--platform {args.platform}: release.yaml builds no {component.name} wheel of variant "
                         f"{variant.name} there; `shipyard matrix` lists the cells")
    prefix = build_core_once(spec, cells[0], prefix=Path(args.prefix).resolve(), state=state_folder(args))
    console.print(f"[green]built[/]: {component.name}'s core for {variant.tag} in {prefix}")
    return 0


def cmd_ci_bootstrap(args: argparse.Namespace) -> int:
    from shipyard.host.apt_install import install_lane_packages

    installed = install_lane_packages(args.lane, say=lambda text: err_console.print(text, markup=False))
    console.print(f"[green]ready[/]: the {args.lane} lane's apt packages"
                  + (f" ({len(installed)} installed)" if installed else ""))
    return 0


def cmd_ci_linux_job_image(args: argparse.Namespace) -> int:
    import os

    from shipyard.ci.linux_job_image import JobImageRequest, default_repository, ensure_job_image

    spec = load_release(args)
    push = args.push.strip().lower() not in ("false", "no", "0")
    request = JobImageRequest(repository=args.repository or default_repository(os.environ.get("GITHUB_REPOSITORY", "")),
                              push=push, index_url=args.index_url or "", wheel_url=args.wheel_url or "")
    ref = ensure_job_image(spec, request, progress=lambda text: err_console.print(text, markup=False))
    print(f"linux_job_image={ref}")
    return 0


def add_ci_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("ci", help="the GitHub Actions release pipeline: generate and check its workflows")
    csub = p.add_subparsers(dest="ci_command", required=True)
    g = csub.add_parser("generate", help="write .github/workflows/release.yml and nightly.yml from release.yaml")
    g.set_defaults(func=cmd_ci_generate)
    c = csub.add_parser("check", help="fail when the committed workflows differ from what release.yaml generates")
    c.set_defaults(func=cmd_ci_check)
    pl = csub.add_parser("plan", help="(the plan job) print each lane's matrix as GITHUB_OUTPUT lines")
    pl.add_argument("--channel", required=True, help="the channel this run publishes to")
    pl.add_argument("--ref", help="GITHUB_REF: a tag v<release.version>[-rcN] releases every component, "
                                  "<component>-v<its version>[-rcN] that one alone")
    pl.add_argument("--variant", help="only these variants (names or tags, comma-separated; empty: every one)")
    pl.add_argument("--python", help="only these Pythons (comma-separated; empty: every one)")
    pl.add_argument("--platform",
                    help="only the jobs that build on these platforms (comma-separated; empty: every one)")
    pl.add_argument("--package-type", help="only these package types: wheel, conda, mobile, docker (comma-separated; "
                                           "empty: every one)")
    pl.set_defaults(func=cmd_ci_plan)
    py = csub.add_parser("pythons", help="(build jobs) make these Pythons available, installing missing ones with uv")
    py.add_argument("python", nargs="+", help="Python versions, as release.yaml's pythons name them (3.11 …)")
    py.set_defaults(func=cmd_ci_pythons)
    from shipyard.ci.runners import CUDA_BUILDER_IMAGES

    d = csub.add_parser("builder-dockerfile", help="(CUDA image lanes) print the Dockerfile of a CUDA version's "
                                                   "builder image, from shipyard's package data (docker build -)")
    d.add_argument("cuda", choices=sorted(CUDA_BUILDER_IMAGES), help="the CUDA version no runner installs")
    d.set_defaults(func=cmd_ci_builder_dockerfile)
    k = csub.add_parser("cache-key", help="(build jobs) the actions/cache key of a job: its id and shipyard's "
                                          "cache key of its inputs")
    k.add_argument("job", help="a job id of the plan, e.g. wheel-ember-cpu-linux-x86_64")
    k.set_defaults(func=cmd_ci_cache_key)
    cw = csub.add_parser("cibuildwheel", help="(Windows and macOS wheel jobs) the cibuildwheel configuration of a "
                                              "job's cells, from release.yaml (cibuildwheel --config-file)")
    cw.add_argument("--platform", required=True, help="a Windows or macOS platform of release.yaml (windows-amd64 …)")
    cw.add_argument("--variant", required=True, help="variant name or tag: cpu, cuda11, cu118, …")
    cw.add_argument("--component", required=True, help="the component the job builds")
    cw.add_argument("--python", action="append", help="only this Python (repeatable; default: the release's)")
    cw.add_argument("--core-prefix", help="where before-all installs the native core (default: "
                                          "<root>/.shipyard/cibuildwheel/<component>-<tag>-core)")
    cw.add_argument("--output", help="write the TOML here and print the component's folder (cibuildwheel's package "
                                     "argument); default: print the TOML")
    cw.set_defaults(func=cmd_ci_cibuildwheel)
    nc = csub.add_parser("native-core", help="(cibuildwheel's before-all) build a component's native core for a "
                                             "variant once, for every Python's build to link")
    nc.add_argument("--platform", required=True, help="the Windows or macOS platform of release.yaml it is built for")
    nc.add_argument("--variant", required=True, help="variant name or tag")
    nc.add_argument("--component", required=True, help="a component with a native_core")
    nc.add_argument("--prefix", required=True, help="the install prefix every Python's build links")
    nc.add_argument("--state", help="work folder (default: <root>/.shipyard)")
    nc.set_defaults(func=cmd_ci_native_core)
    ji = csub.add_parser("linux-job-image", help="(the plan job) build the image every Linux container job starts "
                                                 "in, unless the registry (or the engine) holds it; prints "
                                                 "linux_job_image=<reference> for GITHUB_OUTPUT")
    ji.add_argument("--repository", help="where the image goes (default: ghcr.io/<GITHUB_REPOSITORY>/shipyard-job)")
    ji.add_argument("--push", default="true", help="false: keep the image in this Docker engine, which the jobs "
                                                   "share (runners on one machine, shipyard ci run); default: true")
    ji.add_argument("--index-url", help="an index searched for shipyard before PyPI (SHIPYARD_INDEX_URL)")
    ji.add_argument("--wheel-url", help="the URL of this version's shipyard wheel (SHIPYARD_WHEEL_URL)")
    ji.set_defaults(func=cmd_ci_linux_job_image)
    b = csub.add_parser("bootstrap", help="(Linux container jobs) install the apt packages a CI lane needs, "
                                          "those not installed yet (as root)")
    from shipyard.host.apt_install import lane_packages

    b.add_argument("lane", help=f"a Linux lane: {', '.join(lane_packages())}")
    b.set_defaults(func=cmd_ci_bootstrap)
    r = csub.add_parser("run", help="run a committed workflow here under act, on bare Debian runners; "
                                    "prints a table of its jobs (docs/pipeline.md, 'Reproduce a CI job')")
    r.add_argument("--workflow", default="nightly", help="the workflow file's name: nightly (default) or release")
    r.add_argument("--job", help="one workflow job (e.g. wheel-linux) and the jobs it needs; default: all")
    r.add_argument("--variant", action="append", help="only these variants (the plan job's `variant` input)")
    r.add_argument("--python", action="append", help="only these Pythons (the plan job's `python` input)")
    r.add_argument("--platform", action="append",
                   help="only the jobs that build on these platforms (the plan job's `platform` input; default: the "
                        "release's Linux platforms, the ones act runs here; the others are listed as not runnable)")
    r.add_argument("--package-type", action="append",
                   help="only these package types: wheel, conda, mobile, docker (the plan job's `package_type` input)")
    r.add_argument("--channel", help="release.yml's channel input (nightly.yml always publishes to nightly)")
    r.add_argument("--ref", help="the ref the run is for, as GITHUB_REF (e.g. refs/tags/v1.7.0-rc1)")
    r.add_argument("--secret-file", help="a 0600 file of NAME=value secrets for the workflow (default: the "
                                         "secrets the workflow reads, from this environment)")
    r.add_argument("--work", help="the run's folder (default: a new one under /var/tmp)")
    r.add_argument("--var", action="append", metavar="NAME=VALUE",
                   help="a repository variable the workflow reads as ${{ vars.NAME }} (repeatable), e.g. "
                        "SHIPYARD_INDEX_URL, the index the jobs install shipyard from (default: those the "
                        "workflow reads, from this environment)")
    r.set_defaults(func=cmd_ci_run)
    f = csub.add_parser("fragments", help="(manifest job) fail unless every build job of the plan uploaded its "
                                          "fragment")
    f.add_argument("--plan", required=True, help="a JSON file of the plan job's outputs (toJSON(needs.plan.outputs))")
    f.add_argument("folder", help="where the fragments were downloaded (fragment-<job id>/ each)")
    f.add_argument("--dist", help="also fail unless the merged manifest in this folder records every cell of the "
                                  "plan (as an artifact or not applicable)")
    f.add_argument("--ref", help="the run's git ref (GITHUB_REF): for a component tag, the manifest records that "
                                 "component's cells only (the plan built what it depends on too)")
    f.set_defaults(func=cmd_ci_fragments)
    t = csub.add_parser("trusted-publishing", help="(publish job) check that the job's OIDC token is exchanged for "
                                                    "an upload token of a pypi target (shipyard publish does the "
                                                    "exchange itself)")
    t.add_argument("--target", required=True, help="a pypi target of release.yaml's publish with "
                   "trusted_publishing: true")
    t.set_defaults(func=cmd_ci_trusted_publishing)
