"""libember's C API checks its arguments before it computes: a grid of hostile arguments
(NULL, zero, negative, huge, overflowing, empty, NaN) gives an error status and a message,
never a crash. Each grid runs in a child process (c_api_probe.py), because a SIGFPE or
SIGSEGV would kill pytest itself; the child names every case before it runs it."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import ember
import pytest

pytestmark = pytest.mark.feature("ember.kernels")

PROBE = Path(__file__).resolve().parent / "c_api_probe.py"
_LIB = Path(ember.__file__).resolve().parent / "lib"
LIBEMBER = next((_LIB / name for name in ("libember.so", "libember.dylib", "ember.dll") if (_LIB / name).is_file()),
                None)
GROUPS = ["binary", "unary", "reduce_axis", "reduce_all", "matmul", "softmax", "conv1d", "conv2d", "index_add",
          "fft", "set_num_threads", "cuda_binary", "cuda_unary", "cuda_reduce_axis", "cuda_matmul", "cuda_index_add"]


def _python(code: str, timeout: float = 120, env=None, limit_address_space=False) -> subprocess.CompletedProcess:
    """Runs code in a child Python; with limit_address_space, once numpy and ember are loaded,
    its address space is capped at what it uses plus 512 MiB: room for a few threads, not for
    999 thread stacks, so pthread_create really fails (RLIMIT_NPROC does not bind root)."""
    prologue = textwrap.dedent("""
        import os, resource, numpy, ember
        used = int(open("/proc/self/statm").read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (used + (512 << 20),) * 2)
    """) if limit_address_space else ""
    # One malloc arena: each thread's own would reserve 64 MiB of that address space, and
    # how many get made depends on thread timing.
    env = dict(os.environ if env is None else env, MALLOC_ARENA_MAX="1")
    return subprocess.run([sys.executable, "-c", prologue + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.mark.skipif(LIBEMBER is None, reason=f"no libember shared library in {_LIB}")
def test_hostile_arguments_are_errors_never_crashes():
    # One child for every entry point (a process per entry point costs ~0.5 s each in CI).
    proc = subprocess.run([sys.executable, str(PROBE), str(LIBEMBER), *GROUPS], capture_output=True, text=True,
                          timeout=300)
    started = [line[6:] for line in proc.stdout.splitlines() if line.startswith("START ")]
    results = [json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0, (f"the process died (exit {proc.returncode}) in case "
                                  f"{started[-1] if started else '?'!r}\n{proc.stderr[-3000:]}")
    assert len(results) == len(started)
    assert {r["case"].split(":")[0] for r in results} == set(GROUPS)
    wrong = []
    for r in results:
        expect = r["expect"]
        if expect == "ok":
            if r["status"] != 0 or r["problem"]:
                wrong.append(f"{r['case']}: expected success, got status {r['status']} {r['message']!r} "
                             f"{r['problem']}")
        elif r["status"] == 0 or not r["message"]:
            wrong.append(f"{r['case']}: expected an error with a message, got status {r['status']}")
        elif expect.startswith("error:"):
            _, status, text = expect.split(":", 2)
            if r["status"] != int(status) or text not in r["message"]:
                wrong.append(f"{r['case']}: expected status {status} with {text!r}, got {r['status']} "
                             f"{r['message']!r}")
    assert not wrong, "\n".join(wrong)


def test_conv_stride_zero_and_empty_max_through_python():
    # The reproducers, through ember._C as a caller of the extension would hit them.
    proc = _python("""
        import numpy as np
        from ember import _C
        x, w = np.ones((1, 1, 4, 4)), np.ones((1, 1, 2, 2))
        for call in (lambda: _C.conv2d(x, w, None, np.empty((1, 1, 3, 3)), 0, 0),
                     lambda: _C.conv1d(np.ones((1, 1, 4)), np.ones((1, 1, 2)), None, np.empty((1, 1, 3)), 0, 0),
                     lambda: _C.reduce_axis("max", np.ones((3, 0, 2)), np.empty((3, 2)), 3, 0, 2),
                     lambda: _C.reduce_all("max", np.ones(0))):
            try:
                call()
                print("no error")
            except ValueError as e:
                print("ValueError:", e)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "ValueError: conv2d: stride must be >= 1, got 0",
        "ValueError: conv1d: stride must be >= 1, got 0",
        "ValueError: max: zero-size reduction axis (len 0) has no identity",
        "ValueError: max: zero-size array has no maximum",
    ]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux's")
def test_set_num_threads_that_cannot_start_is_an_error_not_a_hang():
    proc = _python("""
        import numpy as np, ember
        ember.set_num_threads(2)
        try:
            ember.set_num_threads(1000)
            print("no error")
        except RuntimeError as e:
            print("RuntimeError:", e)
        print("threads:", ember.get_num_threads())
        x = np.ones(1 << 22)
        print("sum:", ember.add(x, x).sum())
        ember.set_num_threads(3)
        print("threads:", ember.get_num_threads(), ember.add(x, x).sum())
    """, timeout=60, limit_address_space=True)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("RuntimeError: set_num_threads(1000): could not start 1000 threads"), lines
    assert lines[0].endswith("the thread count stays at 2"), lines
    assert lines[1:] == ["threads: 2", f"sum: {2.0 * (1 << 22)}", f"threads: 3 {2.0 * (1 << 22)}"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux's")
def test_default_thread_count_that_cannot_start_runs_on_the_caller():
    # EMBER_NUM_THREADS asks for more threads than the process may start: kernels still run.
    proc = _python("""
        import numpy as np, ember
        x = np.ones(1 << 22)
        print(ember.add(x, x).sum(), ember.get_num_threads())
    """, timeout=60, env=dict(os.environ, EMBER_NUM_THREADS="1000"), limit_address_space=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(2.0 * (1 << 22)), "1"]
