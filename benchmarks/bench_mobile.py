"""Benchmark: ember-lite with and without its CPU caching allocator.

For one model (a small LeNet-like CNN, batch 1), measures in a single process:
  * malloc calls per inference (every malloc in the process, counted by interposing
    glibc's malloc in the ember-lite-bench program), and the allocator's own system mallocs;
  * time per inference (median over alternating rounds), and the ratio plain / caching.

    python benchmarks/bench_mobile.py [--build-dir DIR] [--rounds 9] [--iterations 200] [--threads N]

Needs cmake, a C++ compiler and the ember package (for ember.mobile.export). Builds
library/ember-lite into --build-dir (default /tmp/ember-lite-bench-build) unless the
bench program is already there.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from ember import mobile

REPO = Path(__file__).resolve().parents[1]


def lenet_like() -> mobile.MobileModel:
    rng = np.random.default_rng(1989)

    def normal(*shape, scale):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    return mobile.MobileModel((1, 1, 28, 28), [
        mobile.Conv2d(normal(8, 1, 5, 5, scale=0.2), normal(8, scale=0.1), stride=1, padding=0),
        mobile.ReLU(),
        mobile.Conv2d(normal(16, 8, 5, 5, scale=0.07), normal(16, scale=0.1), stride=2, padding=0),
        mobile.ReLU(),
        mobile.Flatten(1),
        mobile.Linear(normal(64, 16 * 10 * 10, scale=0.025), normal(64, scale=0.1)),
        mobile.ReLU(),
        mobile.Linear(normal(10, 64, scale=0.12), normal(10, scale=0.1)),
        mobile.Softmax(),
    ])


def build(build_dir: Path) -> Path:
    bench = build_dir / "ember-lite-bench"
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    subprocess.run(["cmake", "-S", str(REPO / "library" / "ember-lite"), "-B", str(build_dir),
                    *generator, "-DCMAKE_BUILD_TYPE=Release", "-DEMBER_LITE_BUILD_TESTS=OFF"],
                   check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(build_dir), "--parallel", "2", "--target",
                    "ember-lite-bench"], check=True, capture_output=True)
    return bench


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=Path, default=Path(tempfile.gettempdir()) / "ember-lite-bench-build")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--threads", type=int, default=None,
                        help="ember kernel threads (EMBER_NUM_THREADS); default: ember's own")
    args = parser.parse_args(argv)
    env = dict(os.environ)
    if args.threads:
        env["EMBER_NUM_THREADS"] = str(args.threads)

    bench = build(args.build_dir)
    with tempfile.TemporaryDirectory() as folder:
        model_path = mobile.export(lenet_like(), Path(folder) / "lenet.elm")
        proc = subprocess.run([str(bench), str(model_path), str(args.rounds), str(args.iterations)],
                              capture_output=True, text=True, check=True, env=env)
    result = json.loads(proc.stdout)
    caching, plain = result["caching"], result["plain"]
    print(f"model: LeNet-like CNN, {result['ops']} ops, input (1, 1, 28, 28), "
          f"{result['threads']} kernel threads, {args.rounds} rounds x {args.iterations} inferences per mode")
    print(f"{'':24}{'caching on':>14}{'caching off':>14}")
    print(f"{'malloc calls/inference':24}{caching['mallocs_per_inference']:>14.2f}"
          f"{plain['mallocs_per_inference']:>14.2f}")
    print(f"{'  of which allocator':24}{caching['allocator_system_mallocs_per_inference']:>14.2f}"
          f"{plain['allocator_system_mallocs_per_inference']:>14.2f}")
    print(f"{'allocator requests':24}{caching['allocator_requests_per_inference']:>14.2f}"
          f"{plain['allocator_requests_per_inference']:>14.2f}")
    print(f"{'us/inference (median)':24}{caching['us_per_inference']:>14.2f}{plain['us_per_inference']:>14.2f}")
    print(f"time ratio off/on: {result['time_ratio_plain_over_caching']:.3f}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
