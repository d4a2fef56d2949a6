"""The main job (`shipyard build --variant cpu`: every CPU cell built and tested) cold, two ways,
side by side in one run on this machine (run by `nox -s bench-main-job`):

- now:    cells tested side by side (the default --test-jobs), environments made by uv with one
          real pip resolution per Python;
- before: one cell at a time, every environment made by pip (`--test-jobs 1 --test-installer pip`).

Cold: each run starts from an empty state folder, so nothing is built or tested from a cache.
Toolchains and downloads are kept, as on a machine that ran bootstrap and the job once: the build
venvs are shared and the test wheelhouse is copied from the project's own state, which a first,
untimed run of the main job fills (it is quick when that state is already warm).

Prints both wall times and their ratio, and the ten slowest tests of each component in each run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIPYARD = [sys.executable, "-m", "shipyard.cli"]
MODES = {
    "now": [],
    "before": ["--test-jobs", "1", "--test-installer", "pip"],
}


def run_main_job(state: Path, dist: Path, log: Path, extra: list[str]) -> float:
    start = time.monotonic()
    with open(log, "w") as out:
        code = subprocess.run([*SHIPYARD, "--root", str(ROOT), "build", "--variant", "cpu", "--state", str(state),
                               "--dist", str(dist), *extra], stdout=out, stderr=subprocess.STDOUT).returncode
    seconds = time.monotonic() - start
    if code != 0:
        sys.exit(f"the main job failed (exit {code}); see {log}")
    return seconds


def cold_state(folder: Path, seed: Path) -> tuple[Path, Path]:
    shutil.rmtree(folder, ignore_errors=True)
    state, dist = folder / "state", folder / "dist"
    state.mkdir(parents=True)
    (state / "envs").symlink_to(seed / "envs", target_is_directory=True)  # build venvs: set-up, shared
    shutil.copytree(seed / "wheelhouse", state / "wheelhouse")  # downloads: kept
    return state, dist


def slowest_by_component(dist: Path) -> dict[str, list[tuple[float, str]]]:
    manifest = json.loads((dist / "manifest.json").read_text())
    slowest: dict[str, list[tuple[float, str]]] = {}
    for artifact in manifest["artifacts"]:
        for test, seconds in (artifact.get("tests") or {}).get("slowest", []):
            slowest.setdefault(artifact["component"], []).append((seconds, f"{test} [{artifact['cell_id']}]"))
    return {c: sorted(tests, reverse=True)[:10] for c, tests in sorted(slowest.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=ROOT / ".shipyard" / "bench-main-job",
                        help="where the cold runs keep their state, dist and logs")
    args = parser.parse_args()
    seed = ROOT / ".shipyard"
    args.work.mkdir(parents=True, exist_ok=True)
    print("priming downloads with the main job on the project's own state (not timed) ...", flush=True)
    primed = run_main_job(seed, ROOT / "dist", args.work / "prime.log", [])
    print(f"  primed in {primed:.0f} s", flush=True)
    seconds: dict[str, float] = {}
    for mode, extra in MODES.items():  # the new way first: a cold page cache costs it, not the old way
        state, dist = cold_state(args.work / mode, seed)
        print(f"{mode}: shipyard build --variant cpu {' '.join(extra)} (cold) ...", flush=True)
        seconds[mode] = run_main_job(state, dist, args.work / f"{mode}.log", extra)
        print(f"  {seconds[mode]:.0f} s", flush=True)
        for component, tests in slowest_by_component(dist).items():
            print(f"  ten slowest tests of {component}:")
            for took, test in tests:
                print(f"    {took:7.2f} s  {test}")
    print(f"\nmain job cold, before (one cell at a time, pip): {seconds['before']:.0f} s")
    print(f"main job cold, now (cells side by side, uv + one pip per Python): {seconds['now']:.0f} s")
    print(f"ratio before/now: {seconds['before'] / seconds['now']:.2f}x")


if __name__ == "__main__":
    main()
