"""ember.matmul vs numpy.matmul and ember.fft vs numpy.fft, side by side on the same inputs.

Run with an interpreter where ember is installed:

    python benchmarks/bench_kernels.py [--quick]

Each case is timed with 1 thread and with all threads. numpy's BLAS is limited with
threadpoolctl when it is installed, otherwise each thread count runs in a child process with
OPENBLAS_NUM_THREADS / OMP_NUM_THREADS / MKL_NUM_THREADS set. numpy.fft (pocketfft) is
single-threaded, so its "all threads" figure is the same work as with one thread. A ratio
is ember time / numpy time: below 1 means ember is faster.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np


def paired_best_times(fn_a, fn_b, repeats: int, min_seconds: float = 0.3):
    """Best per-call times of fn_a and fn_b, measured in alternating rounds so that load
    from other processes hits both alike."""
    def calls_per_round(fn):
        fn()
        t = time.perf_counter()
        fn()
        once = max(time.perf_counter() - t, 1e-7)
        return max(1, int(min_seconds / repeats / once))

    inner_a, inner_b = calls_per_round(fn_a), calls_per_round(fn_b)
    best_a = best_b = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(inner_a):
            fn_a()
        best_a = min(best_a, (time.perf_counter() - t) / inner_a)
        t = time.perf_counter()
        for _ in range(inner_b):
            fn_b()
        best_b = min(best_b, (time.perf_counter() - t) / inner_b)
    return best_a, best_b


def cases(quick: bool):
    rng = np.random.default_rng(0)
    sizes = [256, 512] if quick else [256, 512, 1024]
    for n in sizes:
        for dtype in (np.float32, np.float64):
            a = rng.standard_normal((n, n)).astype(dtype)
            b = rng.standard_normal((n, n)).astype(dtype)
            yield f"matmul {n}x{n}x{n}", dtype.__name__, (lambda a=a, b=b: __import__("ember").matmul(a, b)), \
                (lambda a=a, b=b: np.matmul(a, b))
    lengths = [1024, 4096, 1000, 65536, 10007] if quick else [1024, 4096, 1000, 65536, 1 << 20, 10007, 30030]
    for n in lengths:
        z = rng.standard_normal(n) + 1j * rng.standard_normal(n)
        x = rng.standard_normal(n)
        yield f"fft n={n}", "complex128", (lambda z=z: __import__("ember").fft.fft(z)), (lambda z=z: np.fft.fft(z))
        yield f"rfft n={n}", "float64", (lambda x=x: __import__("ember").fft.rfft(x)), (lambda x=x: np.fft.rfft(x))
    batch = rng.standard_normal((256, 1024)) + 1j * rng.standard_normal((256, 1024))
    yield "fft batch 256x1024", "complex128", (lambda: __import__("ember").fft.fft(batch)), (lambda: np.fft.fft(batch))


def measure(threads: int, quick: bool):
    import ember

    ember.set_num_threads(threads)
    limiter = None
    try:
        from threadpoolctl import threadpool_limits

        limiter = threadpool_limits(limits=threads)
    except ImportError:
        pass  # the parent set the BLAS thread variables for this process
    rows = []
    repeats = 4 if quick else 9
    for name, dtype, ember_fn, numpy_fn in cases(quick):
        t_ember, t_numpy = paired_best_times(ember_fn, numpy_fn, repeats)
        rows.append({"case": name, "dtype": dtype, "threads": threads,
                     "ember_ms": t_ember * 1e3, "numpy_ms": t_numpy * 1e3})
    if limiter is not None:
        limiter.restore_original_limits()
    return rows


def have_threadpoolctl() -> bool:
    try:
        import threadpoolctl  # noqa: F401

        return True
    except ImportError:
        return False


def run_child(threads: int, quick: bool):
    env = dict(os.environ)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "EMBER_NUM_THREADS"):
        env[var] = str(threads)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", str(threads)] + (["--quick"] if quick else [])
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.quick)))
        return

    import ember

    all_threads = os.cpu_count() or 1
    counts = [1] if all_threads == 1 else [1, all_threads]
    rows = []
    for t in counts:
        rows += measure(t, args.quick) if have_threadpoolctl() else run_child(t, args.quick)

    print(f"ember {ember.__version__} vs numpy {np.__version__}; cpu_count={all_threads}; "
          f"BLAS threads via {'threadpoolctl' if have_threadpoolctl() else 'environment (child processes)'}")
    print(f"{'case':<22} {'dtype':<10} {'threads':>7} {'ember ms':>10} {'numpy ms':>10} {'ratio':>7}")
    for r in rows:
        ratio = r["ember_ms"] / r["numpy_ms"]
        print(f"{r['case']:<22} {r['dtype']:<10} {r['threads']:>7} {r['ember_ms']:>10.3f} "
              f"{r['numpy_ms']:>10.3f} {ratio:>7.2f}")
    worst_mm = max(r["ember_ms"] / r["numpy_ms"] for r in rows if r["case"].startswith("matmul"))
    worst_fft = max(r["ember_ms"] / r["numpy_ms"] for r in rows if "fft" in r["case"])
    print(f"worst ratio: matmul {worst_mm:.2f} (target <= 4), fft {worst_fft:.2f} (target <= 2)")


if __name__ == "__main__":
    main()
