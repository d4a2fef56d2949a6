"""Build-time ratios, measured side by side in one run (run by `nox -s bench-build`).

1. shipyard: building N Pythons of one variant vs building one (the native core is built
   once and reused), against the same ratio for a plain per-Python PEP 517 build of the same
   project (no reuse). `--component` picks the project (ember, embervision, ...); shipyard's
   two builds alternate for `--rounds` rounds and their medians are compared. Each ratio
   is given in wall time and in CPU time; the CPU ratio holds on a machine shared with other
   jobs, where wall time does not.
2. An unchanged re-run of `shipyard build --variant cpu` (everything cached): shipyard's own
   seconds.
3. abi3 (a component's `limited_api`): building the fixture release tests/fixtures/abi3release for
   every Python vs for one. Its one cp39-abi3 wheel per variant is built once either way, so the
   goal is <= 1.05x; its tests on each Python are the test stage's, not measured here.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from shipyard.host.toolchains.discover import discover
from shipyard.host.toolchains.resolve import Missing, resolve
from shipyard.plumbing import command
from shipyard.release.matrix import expand
from shipyard.release.validate import load_spec
from shipyard.wheel.build_env import ensure_build_env
from shipyard.wheel.build_request import BuildRequest
from shipyard.wheel.native_core import shipyard_cmake_defines
from shipyard.wheel.variant_wheels import build_variant

ROOT = Path(__file__).resolve().parent.parent
ABI3_RELEASE = ROOT / "tests" / "fixtures" / "abi3release"


@dataclass(frozen=True)
class Cost:
    """Wall seconds, and CPU seconds of this process and every tool it waited for. CPU time
    hardly moves when other jobs share the machine; wall time does."""

    wall: float
    cpu: float


def _cpu_seconds() -> float:
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


def median(costs: list[Cost]) -> Cost:
    """The median of each figure (wall and CPU separately)."""
    return Cost(statistics.median(c.wall for c in costs), statistics.median(c.cpu for c in costs))


def timed(fn) -> Cost:  # noqa: ANN001
    start, cpu = time.monotonic(), _cpu_seconds()
    fn()
    return Cost(time.monotonic() - start, _cpu_seconds() - cpu)


def report(name: str, one: Cost, many: Cost, n: int, note: str = "", further_note: str = "") -> None:
    print(f"  {name:<22} 1 Python {one.wall:7.1f} s   {n} Pythons {many.wall:7.1f} s   "
          f"ratio {many.wall / one.wall:5.2f}x{note}")
    print(f"  {'':<22} CPU      {one.cpu:7.1f} s            {many.cpu:7.1f} s   ratio {many.cpu / one.cpu:5.2f}x")
    if n > 1:
        print(f"  {'':<22} each further Python: {(many.wall - one.wall) / (n - 1):5.2f} s wall, "
              f"{(many.cpu - one.cpu) / (n - 1):5.2f} s CPU{further_note}")


def shipyard_build(spec, state: Path, dist: Path, component: str, pythons: tuple[str, ...],  # noqa: ANN001
                   variant: str) -> Cost:
    # Keep the build venvs (setup, like nox's own venvs); drop everything built.
    for sub in ("cache", "build", "raw", "repaired", "labelled"):
        shutil.rmtree(state / sub, ignore_errors=True)
    shutil.rmtree(dist, ignore_errors=True)
    request = BuildRequest(variant=variant, pythons=pythons, components=(component,), run_tests=False,
                           dist=dist, state=state)
    return timed(lambda: build_variant(spec, request))


def plain_builds(project: Path, state: Path, pythons: tuple[str, ...], defines: dict[str, str]) -> Cost:
    """A plain PEP 517 build per Python (`python -m build`, no isolation, in the same build venvs)
    with the same CMake definitions, each compiling everything."""
    inventory = discover()
    settings = [f"--config-setting=cmake.define.{k}={v}" for k, v in defines.items()]
    envs = [ensure_build_env(inventory.interpreter(p), project, state) for p in pythons]
    out = Path(tempfile.mkdtemp(prefix="bench-plain-"))
    try:
        def run() -> None:
            for env in envs:
                with tempfile.TemporaryDirectory() as build_dir:
                    command.run([env.python, "-m", "build", "--wheel", "--no-isolation", "--skip-dependency-check",
                                 "--outdir", out, f"--config-setting=build-dir={build_dir}", *settings, project],
                                timeout=3600, what="python -m build --wheel")
        return timed(run)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def abi3_row(rounds: int) -> None:
    """The abi3 row: the fixture abi3 release built for every Python here vs for the lowest alone,
    alternating for `rounds` rounds (medians), build venvs warmed first."""
    work = Path(tempfile.mkdtemp(prefix="bench-abi3-"))
    try:
        root = work / "release"
        shutil.copytree(ABI3_RELEASE, root)
        spec = load_spec(root)
        (component,) = spec.release.components
        pythons = tuple(p for p in spec.release.pythons if discover().interpreter(p))
        state, dist = root / ".shipyard", root / "dist"
        for python in pythons:
            ensure_build_env(discover().interpreter(python), root / spec.release.components[component].path, state)
        costs = [(shipyard_build(spec, state, dist, component, pythons[:1], "cpu"),
                  shipyard_build(spec, state, dist, component, pythons, "cpu")) for _ in range(rounds)]
        one, many = median([a for a, _ in costs]), median([b for _, b in costs])
        report("abi3 (one wheel):", one, many, len(pythons), "  (goal <= 1.05x)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--component", default="ember")
    parser.add_argument("--variant", default="cpu", help="variant name, e.g. cpu or cuda11")
    parser.add_argument("--skip-rerun", action="store_true", help="skip the unchanged re-run measurement")
    parser.add_argument("--abi3-only", action="store_true", help="measure the abi3 row alone")
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternating rounds of shipyard's 1- and N-Python builds (medians reported)")
    args = parser.parse_args()
    if args.abi3_only:
        abi3_row(args.rounds)
        return 0
    spec = load_spec(ROOT)
    component = spec.release.components[args.component]
    project = ROOT / component.path
    all_pythons = tuple(p for p in spec.release.pythons if discover().interpreter(p))
    one = ("3.11",) if "3.11" in all_pythons else all_pythons[:1]
    work = Path(tempfile.mkdtemp(prefix="bench-build-"))
    state, dist = work / "state", work / "dist"
    variant = spec.release.variants[args.variant]
    cell = next(c for c in expand(spec.release) if c.variant == args.variant and c.component == args.component
                and c.platform == discover().host_platform)
    toolchain = resolve(cell, spec.release, discover())
    if isinstance(toolchain, Missing):
        raise SystemExit(f"bench-build: {cell.id}: {toolchain}")
    defines = shipyard_cmake_defines(variant, toolchain)
    print(f"bench-build: {args.component}, variant {args.variant}, N = {len(all_pythons)} Pythons "
          f"({', '.join(all_pythons)})")
    # Warm the build venvs first so neither side pays for them.
    for python in all_pythons:
        ensure_build_env(discover().interpreter(python), project, state)
    # A build's wall time swings by a second between identical runs (the core's compile under the
    # machine's other work): the two builds alternate, and each side's median round is reported.
    rounds = [(shipyard_build(spec, state, dist, args.component, one, args.variant),
               shipyard_build(spec, state, dist, args.component, all_pythons, args.variant))
              for _ in range(args.rounds)]
    if args.rounds > 1:
        for i, (a, b) in enumerate(rounds, 1):
            print(f"  round {i}: 1 Python {a.wall:5.1f} s, {len(all_pythons)} Pythons {b.wall:5.1f} s: "
                  f"{b.wall / a.wall:4.2f}x")
    ship_one, ship_all = median([a for a, _ in rounds]), median([b for _, b in rounds])
    plain_one = plain_builds(project, state, one, defines)
    plain_all = plain_builds(project, state, all_pythons, defines)
    n = len(all_pythons)
    report("shipyard (core once):", ship_one, ship_all, n, "  (goal <= 1.2x for ember)", "  (goal <= 0.7 s wall)")
    report("plain PEP 517 build:", plain_one, plain_all, n)
    print(f"  shipyard {n}-Python build vs plain: {ship_all.wall / plain_all.wall:5.2f}x the time, "
          f"{ship_all.cpu / plain_all.cpu:5.2f}x the CPU")
    shutil.rmtree(work, ignore_errors=True)
    abi3_row(args.rounds)
    if not args.skip_rerun:
        request = BuildRequest(variant="cpu", dist=ROOT / "dist", state=ROOT / ".shipyard")
        first = timed(lambda: build_variant(spec, request))
        rerun = timed(lambda: build_variant(spec, request))
        print(f"  build-cpu (all components, all Pythons, tests): first run here {first.wall:.1f} s, "
              f"unchanged re-run {rerun.wall:.2f} s of shipyard's own time (limit 5 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
