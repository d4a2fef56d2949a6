"""Child process of test_c_api_checks.py: calls one entry point of libember's C API
(ember/c_api.h, through ctypes) with a grid of hostile arguments and prints one line per
case. Run in its own process so that a crash (SIGFPE, SIGSEGV) kills only this child, and
the last ``START`` line names the case that crashed.

    python c_api_probe.py /path/to/libember.so conv2d [fft ...]
"""

from __future__ import annotations

import ctypes
import json
import math
import random
import sys
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

FLOAT32, FLOAT64, COMPLEX128, INT32, INT64, OTHER = range(6)
DTYPES = {np.dtype(np.float32): FLOAT32, np.dtype(np.float64): FLOAT64, np.dtype(np.complex128): COMPLEX128,
          np.dtype(np.int32): INT32, np.dtype(np.int64): INT64}
OK, INVALID, RUNTIME, OOM = 0, 1, 2, 3
MAX_THREADS = 4096  # EMBER_MAX_THREADS
I64_MAX, I64_MIN = 2**63 - 1, -2**63


class EmberArray(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("ndim", ctypes.c_int),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("itemsize", ctypes.c_int64), ("writable", ctypes.c_int), ("name", ctypes.c_char_p),
                ("format", ctypes.c_char_p)]


class Arg:
    """An ember_array describing a numpy array, with fields overridden to lie about it."""

    def __init__(self, array: np.ndarray, label: str, **overrides):
        self.array = array
        shape = overrides.pop("shape", array.shape)
        strides = overrides.pop("strides", array.strides)
        self._shape = (ctypes.c_int64 * max(len(shape), 1))(*shape) if shape is not None else None
        self._strides = (ctypes.c_int64 * max(len(strides), 1))(*strides)
        fields = dict(data=array.ctypes.data, dtype=DTYPES.get(array.dtype, OTHER),
                      ndim=array.ndim if shape is None else len(shape),
                      shape=ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64)) if shape is not None else None,
                      strides=ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64)),
                      itemsize=array.itemsize, writable=1, name=label.encode(), format=array.dtype.char.encode())
        fields.update(overrides)
        self.struct = EmberArray(**fields)

    @property
    def ptr(self):
        return ctypes.byref(self.struct)


# Ways to describe an array that no kernel may trust; each must be refused.
HOSTILE_ARRAYS: Dict[str, Callable[[np.ndarray, str], Optional[Arg]]] = {
    "NULL": lambda a, n: None,
    "ndim=-1": lambda a, n: Arg(a, n, ndim=-1),
    "ndim=65": lambda a, n: Arg(a, n, ndim=65),
    "shape=NULL": lambda a, n: Arg(a, n, shape=None) if a.ndim else Arg(a, n, ndim=1, shape=None),
    "dim=-1": lambda a, n: Arg(a, n, shape=(-1,) + a.shape[1:]),
    "dim=2**62": lambda a, n: Arg(a, n, shape=(2**62,) + a.shape[1:]),
    "dim=int64 max": lambda a, n: Arg(a, n, shape=(I64_MAX,) + a.shape[1:]),
    "dims overflow": lambda a, n: Arg(a, n, shape=(2**32, 2**32) + a.shape[2:]),
    "itemsize=0": lambda a, n: Arg(a, n, itemsize=0),
    "itemsize=-8": lambda a, n: Arg(a, n, itemsize=-8),
    "itemsize=3": lambda a, n: Arg(a, n, itemsize=3),
    "data=NULL": lambda a, n: Arg(a, n, data=None),
    "dtype=other": lambda a, n: Arg(a, n, dtype=OTHER),
    "dtype=int32": lambda a, n: Arg(a, n, dtype=INT32, itemsize=4),
    "dtype=99, name and format NULL": lambda a, n: Arg(a, n, dtype=99, name=None, format=None),
}


def f64(*shape) -> np.ndarray:
    return np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) / 7 + 1


def c128(*shape) -> np.ndarray:
    return (f64(*shape) + 1j).astype(np.complex128)


class Probe:
    """Collects (case, expected status, call) for one entry point and runs them."""

    def __init__(self, lib: ctypes.CDLL):
        self.lib = lib
        self.cases: List[Tuple[str, str, Callable[[], Tuple[int, str]]]] = []

    def status(self, code: int) -> Tuple[int, str]:
        return code, self.lib.ember_last_error().decode(errors="replace") if code else ""

    def add(self, case: str, expect: str, call: Callable[[], int], check: Callable[[], str] = lambda: ""):
        """expect: "ok", "error" (any status but OK, with a message), or "error:<status>:<text>"."""
        def run():
            code, message = self.status(call())
            return code, message, check() if code == OK else ""
        self.cases.append((case, expect, run))

    def hostile_arrays(self, arrays: List[Tuple[str, np.ndarray]], call: Callable[..., int], prefix: str = "",
                       optional: Tuple[str, ...] = ()):
        """For each array argument and each hostile description: the call must fail (a NULL
        is allowed for the `optional` arguments and not tried for them)."""
        for index, (name, array) in enumerate(arrays):
            for label, make in HOSTILE_ARRAYS.items():
                if label == "NULL" and name in optional:
                    continue

                def one(index=index, make=make, name=name, array=array):
                    args = [Arg(a, n) for n, a in arrays]
                    args[index] = make(array, name)
                    return call(*[None if a is None else a.ptr for a in args])
                self.add(f"{prefix}{name}: {label}", "error", one)
        # Then several arguments hostile at once, in seeded random combinations: the checks
        # must not depend on which argument is looked at first.
        rng = random.Random(f"{prefix}{[n for n, _ in arrays]}")
        labels = [label for label in HOSTILE_ARRAYS if label != "NULL"]
        for _ in range(30 if len(arrays) > 1 else 0):
            chosen = {i: rng.choice(labels) for i in rng.sample(range(len(arrays)), rng.randint(2, len(arrays)))}

            def several(chosen=chosen):
                args = [HOSTILE_ARRAYS[chosen[i]](a, n) if i in chosen else Arg(a, n)
                        for i, (n, a) in enumerate(arrays)]
                return call(*[a.ptr for a in args])
            self.add(prefix + ", ".join(f"{arrays[i][0]}: {label}" for i, label in sorted(chosen.items())), "error",
                     several)

    def run(self) -> None:
        for case, expect, run in self.cases:
            print("START " + case, flush=True)
            code, message, problem = run()
            print("RESULT " + json.dumps({"case": case, "expect": expect, "status": code, "message": message,
                                          "problem": problem}), flush=True)


def declare(lib: ctypes.CDLL) -> None:
    p = ctypes.POINTER(EmberArray)
    i64, s = ctypes.c_int64, ctypes.c_char_p
    signatures = {
        "ember_binary": [s, p, p, p], "ember_unary": [s, p, p], "ember_reduce_axis": [s, p, p, i64, i64, i64],
        "ember_reduce_all": [s, p, ctypes.POINTER(ctypes.c_double)], "ember_matmul": [p, p, p],
        "ember_softmax": [p, p], "ember_conv1d": [p, p, p, p, i64, i64], "ember_conv2d": [p, p, p, p, i64, i64],
        "ember_index_add": [p, p, p], "ember_fft_c2c": [p, p, ctypes.c_int, ctypes.c_double],
        "ember_fft_r2c": [p, p, ctypes.c_double], "ember_fft_c2r": [p, p, ctypes.c_double],
        "ember_cuda_binary": [s, p, p, p], "ember_cuda_unary": [s, p, p],
        "ember_cuda_reduce_axis": [s, p, p, i64, i64, i64], "ember_cuda_matmul": [p, p, p],
        "ember_cuda_index_add": [p, p, p], "ember_set_num_threads": [ctypes.c_int],
    }
    for name, argtypes in signatures.items():
        getattr(lib, name).argtypes = argtypes
        getattr(lib, name).restype = ctypes.c_int
    lib.ember_last_error.restype = ctypes.c_char_p
    lib.ember_get_num_threads.restype = ctypes.c_int


def expect_equal(got: np.ndarray, want) -> Callable[[], str]:
    return lambda: "" if np.array_equal(got, want, equal_nan=True) else f"result {got!r}, expected {want!r}"


def binary(pr: Probe, lib, cuda: bool = False) -> None:
    fn = lib.ember_cuda_binary if cuda else lib.ember_binary
    a, b, o = f64(2, 3), f64(2, 3), np.empty((2, 3))
    pr.hostile_arrays([("a", a), ("b", b), ("out", o)], lambda *p: fn(b"add", *p))
    pr.add("op name NULL", "error", lambda: fn(None, Arg(a, "a").ptr, Arg(b, "b").ptr, Arg(o, "out").ptr))
    pr.add("op name unknown", "error", lambda: fn(b"pow", Arg(a, "a").ptr, Arg(b, "b").ptr, Arg(o, "out").ptr))
    pr.add("out read-only", "error", lambda: fn(b"add", Arg(a, "a").ptr, Arg(b, "b").ptr,
                                                 Arg(o, "out", writable=0).ptr))
    if not cuda:
        # Strides that are not a multiple of the itemsize (this used to divide by itemsize 0).
        pr.add("misaligned strides", "error", lambda: fn(b"add", Arg(a, "a", strides=(12, 4)).ptr, Arg(b, "b").ptr,
                                                          Arg(o, "out").ptr))
        e, eo = np.empty((0, 3)), np.empty((0, 3))
        pr.add("empty operands", "ok", lambda: fn(b"mul", Arg(e, "a").ptr, Arg(e, "b").ptr, Arg(eo, "out").ptr))
        n, no = np.array([np.nan, np.inf, -np.inf]), np.empty(3)
        pr.add("NaN and inf values", "ok", lambda: fn(b"div", Arg(n, "a").ptr, Arg(n, "b").ptr, Arg(no, "out").ptr),
               expect_equal(no, np.full(3, np.nan)))


def unary(pr: Probe, lib, cuda: bool = False) -> None:
    fn = lib.ember_cuda_unary if cuda else lib.ember_unary
    x, o = f64(2, 3), np.empty((2, 3))
    pr.hostile_arrays([("x", x), ("out", o)], lambda *p: fn(b"exp", *p))
    pr.add("op name NULL", "error", lambda: fn(None, Arg(x, "x").ptr, Arg(o, "out").ptr))
    pr.add("size mismatch", "error", lambda: fn(b"relu", Arg(x, "x").ptr, Arg(np.empty(5), "out").ptr))
    if not cuda:
        e, eo = np.empty((3, 0)), np.empty((3, 0))
        pr.add("empty", "ok", lambda: fn(b"tanh", Arg(e, "x").ptr, Arg(eo, "out").ptr))


def reduce_axis(pr: Probe, lib, cuda: bool = False) -> None:
    fn = lib.ember_cuda_reduce_axis if cuda else lib.ember_reduce_axis
    x, o = f64(2, 3, 4), np.empty((2, 4))
    pr.hostile_arrays([("x", x), ("out", o)], lambda px, po: fn(b"sum", px, po, 2, 3, 4))
    views = [(0, 3, 4), (-1, 3, 4), (2, -3, -4), (-2, -3, 4), (2, 3, -4), (I64_MAX, 3, 4), (2, I64_MAX, I64_MAX),
             (I64_MIN, -1, 24), (2**32, 2**32, 1), (1, 24, 1)]
    for op in (b"sum", b"max"):
        for view in views:
            pr.add(f"{op.decode()} view {view}", "error", lambda op=op, v=view: fn(op, Arg(x, "x").ptr,
                                                                                   Arg(o, "out").ptr, *v))
    # A max over an empty axis has no value (it returned uninitialised memory).
    ex, eo = np.empty((2, 0, 3)), np.full((2, 3), 7.0)
    pr.add("max over an empty axis", "error:1:zero-size",
           lambda: fn(b"max", Arg(ex, "x").ptr, Arg(eo, "out").ptr, 2, 0, 3))
    pr.add("max over an empty axis, inner 1", "error:1:zero-size",
           lambda: fn(b"max", Arg(np.empty((4, 0)), "x").ptr, Arg(np.empty(4), "out").ptr, 4, 0, 1))
    pr.add("op name NULL", "error", lambda: fn(None, Arg(x, "x").ptr, Arg(o, "out").ptr, 2, 3, 4))
    if not cuda:
        so = np.full((2, 3), 7.0)
        pr.add("sum over an empty axis", "ok", lambda: fn(b"sum", Arg(ex, "x").ptr, Arg(so, "out").ptr, 2, 0, 3),
               expect_equal(so, np.zeros((2, 3))))
        mo = np.empty((0, 2))
        pr.add("max with nothing to keep", "ok",
               lambda: fn(b"max", Arg(np.empty((0, 3, 2)), "x").ptr, Arg(mo, "out").ptr, 0, 3, 2))


def reduce_all(pr: Probe, lib) -> None:
    x, result = f64(2, 3), ctypes.c_double()
    pr.hostile_arrays([("x", x)], lambda px: lib.ember_reduce_all(b"sum", px, ctypes.byref(result)))
    pr.add("result NULL", "error", lambda: lib.ember_reduce_all(b"sum", Arg(x, "x").ptr, None))
    pr.add("op name NULL", "error", lambda: lib.ember_reduce_all(None, Arg(x, "x").ptr, ctypes.byref(result)))
    pr.add("max of an empty array", "error:1:zero-size",
           lambda: lib.ember_reduce_all(b"max", Arg(np.empty(0), "x").ptr, ctypes.byref(result)))
    pr.add("sum of an empty array", "ok",
           lambda: lib.ember_reduce_all(b"sum", Arg(np.empty((0, 4)), "x").ptr, ctypes.byref(result)),
           lambda: "" if result.value == 0 else f"sum {result.value}")
    nan = np.array([1.0, np.nan])
    pr.add("max with NaN", "ok", lambda: lib.ember_reduce_all(b"max", Arg(nan, "x").ptr, ctypes.byref(result)),
           lambda: "" if math.isnan(result.value) else f"max {result.value}")


def matmul(pr: Probe, lib, cuda: bool = False) -> None:
    fn = lib.ember_cuda_matmul if cuda else lib.ember_matmul
    a, b, o = f64(2, 3), f64(3, 4), np.empty((2, 4))
    pr.hostile_arrays([("a", a), ("b", b), ("out", o)], fn)
    pr.add("inner mismatch", "error", lambda: fn(Arg(a, "a").ptr, Arg(f64(2, 4), "b").ptr, Arg(o, "out").ptr))
    pr.add("1-D operand", "error", lambda: fn(Arg(f64(3), "a").ptr, Arg(b, "b").ptr, Arg(np.empty(4), "out").ptr))
    if not cuda:
        zo = np.full((2, 3), 7.0)
        pr.add("k = 0", "ok", lambda: fn(Arg(np.empty((2, 0)), "a").ptr, Arg(np.empty((0, 3)), "b").ptr,
                                         Arg(zo, "out").ptr), expect_equal(zo, np.zeros((2, 3))))


def softmax(pr: Probe, lib) -> None:
    x, o = f64(2, 3), np.empty((2, 3))
    pr.hostile_arrays([("x", x), ("out", o)], lib.ember_softmax)
    pr.add("3-D input", "error", lambda: lib.ember_softmax(Arg(f64(1, 2, 3), "x").ptr, Arg(o, "out").ptr))
    pr.add("no columns", "ok", lambda: lib.ember_softmax(Arg(np.empty((2, 0)), "x").ptr,
                                                         Arg(np.empty((2, 0)), "out").ptr))


def conv(pr: Probe, lib, dims: int) -> None:
    fn = lib.ember_conv2d if dims == 2 else lib.ember_conv1d
    space = (5,) * dims
    x, w, b, o = f64(1, 2, *space), f64(3, 2, *(2,) * dims), f64(3), np.empty((1, 3, *(4,) * dims))

    def call(px, pw, pb, po, stride=1, padding=0):
        return fn(px, pw, pb, po, stride, padding)

    pr.hostile_arrays([("input", x), ("weight", w), ("bias", b), ("out", o)], call, optional=("bias",))
    args = lambda: (Arg(x, "input").ptr, Arg(w, "weight").ptr, Arg(b, "bias").ptr, Arg(o, "out").ptr)  # noqa: E731
    # A stride of 0 divided by zero: SIGFPE killed the process.
    for stride in (0, -1, -2**31, I64_MIN):
        pr.add(f"stride {stride}", "error:1:stride must be >= 1", lambda s=stride: fn(*args(), s, 0))
    for padding in (-1, I64_MIN):
        pr.add(f"padding {padding}", "error:1:padding must be >= 0", lambda p=padding: fn(*args(), 1, p))
    for stride, padding in ((I64_MAX, 0), (1, 2**62), (1, I64_MAX), (2**62, 2**62), (1, 1), (2, 0)):
        pr.add(f"stride {stride} padding {padding}", "error", lambda s=stride, p=padding: fn(*args(), s, p))
    pr.add("kernel larger than the input", "error",
           lambda: fn(Arg(f64(1, 2, *(1,) * dims), "input").ptr, Arg(w, "weight").ptr, None,
                      Arg(np.empty((1, 3, *(0,) * dims)), "out").ptr, 1, 0))
    pr.add("channel mismatch", "error", lambda: fn(Arg(f64(1, 3, *space), "input").ptr, Arg(w, "weight").ptr, None,
                                                   Arg(o, "out").ptr, 1, 0))
    pr.add("bias size mismatch", "error", lambda: fn(Arg(x, "input").ptr, Arg(w, "weight").ptr,
                                                     Arg(f64(4), "bias").ptr, Arg(o, "out").ptr, 1, 0))
    # An empty batch with a huge padding: nothing to compute, and no scratch buffer of
    # kdim x 2^61 elements either.
    big = 5 + 2 * 2**29 - 2 + 1
    pr.add("empty batch, padding 2**29", "ok",
           lambda: fn(Arg(np.empty((0, 2, *space)), "input").ptr, Arg(w, "weight").ptr, None,
                      Arg(np.empty((0, 3, *(1,) * dims)), "out", shape=(0, 3, *(big,) * dims)).ptr, 1, 2**29))
    pr.add("no output channels", "ok",
           lambda: fn(Arg(x, "input").ptr, Arg(np.empty((0, 2, *(2,) * dims)), "weight").ptr, None,
                      Arg(np.empty((1, 0, *(4,) * dims)), "out").ptr, 1, 0))


def index_add(pr: Probe, lib, cuda: bool = False) -> None:
    fn = lib.ember_cuda_index_add if cuda else lib.ember_index_add
    o, index, source = f64(4, 3), np.array([0, 3], np.int64), f64(2, 3)
    pr.hostile_arrays([("out", o), ("index", index), ("source", source)], fn)
    for bad in (-1, 4, I64_MAX, I64_MIN):
        pr.add(f"index {bad}", "error", lambda v=bad: fn(Arg(o, "out").ptr,
                                                         Arg(np.array([0, v], np.int64), "index").ptr,
                                                         Arg(source, "source").ptr))
    pr.add("float index", "error", lambda: fn(Arg(o, "out").ptr, Arg(np.array([0.0, 1.0]), "index").ptr,
                                              Arg(source, "source").ptr))


def fft(pr: Probe, lib) -> None:
    x, o = c128(2, 8), np.empty((2, 8), np.complex128)
    r, ro = f64(2, 8), np.empty((2, 5), np.complex128)
    h, ho = c128(2, 5), np.empty((2, 8))
    pr.hostile_arrays([("x", x), ("out", o)], lambda px, po: lib.ember_fft_c2c(px, po, 1, 1.0), prefix="c2c ")
    pr.hostile_arrays([("x", r), ("out", ro)], lambda px, po: lib.ember_fft_r2c(px, po, 1.0), prefix="r2c ")
    pr.hostile_arrays([("x", h), ("out", ho)], lambda px, po: lib.ember_fft_c2r(px, po, 1.0), prefix="c2r ")
    for scale in (math.nan, math.inf, -0.0, 1e308):
        nan_check = (lambda: "" if np.isnan(o).all() else "NaN scale gave numbers") if math.isnan(scale) else None
        pr.add(f"c2c scale {scale}", "ok", lambda s=scale: lib.ember_fft_c2c(Arg(x, "x").ptr, Arg(o, "out").ptr, 0, s),
               nan_check or (lambda: ""))
        pr.add(f"r2c scale {scale}", "ok", lambda s=scale: lib.ember_fft_r2c(Arg(r, "x").ptr, Arg(ro, "out").ptr, s))
        pr.add(f"c2r scale {scale}", "ok", lambda s=scale: lib.ember_fft_c2r(Arg(h, "x").ptr, Arg(ho, "out").ptr, s))
    pr.add("r2c output size mismatch", "error", lambda: lib.ember_fft_r2c(Arg(r, "x").ptr, Arg(o, "out").ptr, 1.0))
    pr.add("empty rows", "ok", lambda: lib.ember_fft_c2c(Arg(np.empty((0, 8), np.complex128), "x").ptr,
                                                         Arg(np.empty((0, 8), np.complex128), "out").ptr, 1, 1.0))


def threads(pr: Probe, lib) -> None:
    before = lib.ember_get_num_threads()
    for n in (0, -1, -2**31, MAX_THREADS + 1, 2**31 - 1):
        pr.add(f"set_num_threads({n})", "error:1:outside 1..4096", lambda n=n: lib.ember_set_num_threads(n))
    pr.add("count unchanged after refusals", "ok", lambda: 0,
           lambda: "" if lib.ember_get_num_threads() == before else f"count is {lib.ember_get_num_threads()}")
    pr.add("set_num_threads(3)", "ok", lambda: lib.ember_set_num_threads(3),
           lambda: "" if lib.ember_get_num_threads() == 3 else "count not 3")


GROUPS: Dict[str, Callable[[Probe, ctypes.CDLL], None]] = {
    "binary": binary, "unary": unary, "reduce_axis": reduce_axis, "reduce_all": reduce_all, "matmul": matmul,
    "softmax": softmax, "conv1d": lambda pr, lib: conv(pr, lib, 1), "conv2d": lambda pr, lib: conv(pr, lib, 2),
    "index_add": index_add, "fft": fft, "set_num_threads": threads,
    "cuda_binary": lambda pr, lib: binary(pr, lib, cuda=True), "cuda_unary": lambda pr, lib: unary(pr, lib, cuda=True),
    "cuda_reduce_axis": lambda pr, lib: reduce_axis(pr, lib, cuda=True),
    "cuda_matmul": lambda pr, lib: matmul(pr, lib, cuda=True),
    "cuda_index_add": lambda pr, lib: index_add(pr, lib, cuda=True),
}


def main() -> None:
    lib = ctypes.CDLL(sys.argv[1])
    declare(lib)
    for group in sys.argv[2:]:
        probe = Probe(lib)
        GROUPS[group](probe, lib)
        probe.cases = [(f"{group}: {case}", expect, run) for case, expect, run in probe.cases]
        probe.run()


if __name__ == "__main__":
    main()
