"""Data-parallel SGD for linear regression on synthetic data, with ember's allreduce.

Run under the launcher:  ember-run --standalone --nproc-per-node 2 -m emberelastic.examples.train_sgd
or alone (one process):   python -m emberelastic.examples.train_sgd
Every rank draws its own shard from one known linear model, computes the gradient of the
mean squared error on its shard, and the gradients are averaged with all_reduce(AVG), so
all ranks keep identical weights. Prints the final loss; exits 1 if it did not converge.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

import ember.distributed as dist


def make_shard(rank: int, samples: int, features: int, noise: float):
    """This rank's (X, y) drawn from the job-wide true model."""
    true_w = np.random.default_rng(0).standard_normal(features)
    rng = np.random.default_rng(100 + rank)
    x = rng.standard_normal((samples, features))
    y = x @ true_w + 0.5 + noise * rng.standard_normal(samples)
    return x, y, true_w


def global_mse(x, y, w, b) -> float:
    """Mean squared error over every rank's shard."""
    err = x @ w + b - y
    sums = np.array([float(err @ err), float(len(y))])
    dist.all_reduce(sums, dist.ReduceOp.SUM)
    return sums[0] / sums[1]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--samples", type=int, default=512, help="samples per rank")
    p.add_argument("--features", type=int, default=8)
    p.add_argument("--noise", type=float, default=0.01)
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds a collective may wait for a peer before failing (a lost node is noticed then)")
    args = p.parse_args(argv)

    standalone = "RANK" not in os.environ
    if standalone:
        dist.init_process_group("tcp", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
    else:
        dist.init_process_group("tcp", init_method="env://", timeout=args.timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    x, y, true_w = make_shard(rank, args.samples, args.features, args.noise)
    w, b = np.zeros(args.features), 0.0

    first = global_mse(x, y, w, b)
    for step in range(args.steps):
        err = x @ w + b - y
        grad = np.concatenate([2.0 * x.T @ err / len(y), [2.0 * err.mean()]])
        dist.all_reduce(grad, dist.ReduceOp.AVG)
        w -= args.lr * grad[:-1]
        b -= args.lr * grad[-1]
    final = global_mse(x, y, w, b)
    restart = os.environ.get("EMBER_ELASTIC_RESTART_COUNT", "0")
    if rank == 0:
        print(f"world_size={world} restart={restart} steps={args.steps} initial loss={first:.6f} "
              f"final loss={final:.6f} weight error={np.abs(w - true_w).max():.2e}", flush=True)
    dist.destroy_process_group()
    converged = final < 10 * args.noise ** 2 + 1e-4 and final < first
    return 0 if converged else 1


if __name__ == "__main__":
    sys.exit(main())
