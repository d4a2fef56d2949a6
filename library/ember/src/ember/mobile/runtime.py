"""ctypes binding of a built ember-lite shared library (libember_lite.so), for checking
the native runtime from Python: load models, run them, read the allocator's stats."""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import Tuple, Union

import numpy as np

ERRBUF_SIZE = 256
MAX_RANK = 6


class LiteError(RuntimeError):
    """A failed ember-lite call: `status` is the el_status name, e.g. "EL_ERR_CHECKSUM"."""

    def __init__(self, status: str, code: int, message: str):
        super().__init__(message)
        self.status = status
        self.code = code


class _Stats(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "alloc_requests", "free_requests", "cache_hits", "cache_misses", "system_mallocs",
        "system_frees", "evictions", "releases", "cached_bytes", "peak_cached_bytes",
        "live_bytes", "max_cached_bytes")] + [("enabled", ctypes.c_int32), ("reserved", ctypes.c_int32)]


@dataclass(frozen=True)
class AllocatorStats:
    """Snapshot of el_allocator_stats (see ember_lite.h for each counter)."""

    alloc_requests: int
    free_requests: int
    cache_hits: int
    cache_misses: int
    system_mallocs: int
    system_frees: int
    evictions: int
    releases: int
    cached_bytes: int
    peak_cached_bytes: int
    live_bytes: int
    max_cached_bytes: int
    enabled: bool


class EmberLite:
    """One loaded libember_lite shared library."""

    def __init__(self, library_path: Union[str, os.PathLike]):
        self.path = os.fspath(library_path)
        lib = ctypes.CDLL(self.path)
        p_model = ctypes.c_void_p
        lib.el_status_name.restype = ctypes.c_char_p
        lib.el_status_name.argtypes = [ctypes.c_int]
        lib.el_model_load.argtypes = [ctypes.c_char_p, ctypes.POINTER(p_model), ctypes.c_char_p, ctypes.c_size_t]
        lib.el_model_load_buffer.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(p_model),
                                             ctypes.c_char_p, ctypes.c_size_t]
        lib.el_model_free.argtypes = [p_model]
        lib.el_model_free.restype = None
        float_p = ctypes.POINTER(ctypes.c_float)
        lib.el_model_run.argtypes = [p_model, float_p, ctypes.c_size_t, float_p, ctypes.c_size_t]
        for name in ("el_model_input_shape", "el_model_output_shape"):
            getattr(lib, name).argtypes = [p_model, ctypes.POINTER(ctypes.c_int64), ctypes.c_int]
        for name in ("el_model_input_numel", "el_model_output_numel"):
            getattr(lib, name).argtypes = [p_model]
            getattr(lib, name).restype = ctypes.c_size_t
        lib.el_model_num_ops.argtypes = [p_model]
        lib.el_last_error.restype = ctypes.c_char_p
        lib.el_allocator_set_enabled.argtypes = [ctypes.c_int]
        lib.el_allocator_set_enabled.restype = None
        lib.el_allocator_set_max_cached_bytes.argtypes = [ctypes.c_uint64]
        lib.el_allocator_set_max_cached_bytes.restype = None
        lib.el_allocator_release.restype = ctypes.c_uint64
        lib.el_allocator_get_stats.argtypes = [ctypes.POINTER(_Stats)]
        lib.el_allocator_get_stats.restype = None
        lib.el_allocator_reset_stats.restype = None
        lib.el_allocator_alloc.argtypes = [ctypes.c_size_t]
        lib.el_allocator_alloc.restype = ctypes.c_void_p
        lib.el_allocator_free.argtypes = [ctypes.c_void_p]
        lib.el_allocator_free.restype = None
        lib.el_set_num_threads.argtypes = [ctypes.c_int]
        lib.el_set_num_threads.restype = ctypes.c_int
        self.lib = lib

    def status_name(self, code: int) -> str:
        return self.lib.el_status_name(code).decode()

    def _raise(self, code: int, message: bytes) -> None:
        raise LiteError(self.status_name(code), code, message.decode(errors="replace"))

    def load(self, source: Union[str, os.PathLike, bytes]) -> "LiteModel":
        """Load a model from a path or from bytes; raises LiteError when it is rejected."""
        handle = ctypes.c_void_p()
        errbuf = ctypes.create_string_buffer(ERRBUF_SIZE)
        if isinstance(source, (bytes, bytearray)):
            data = bytes(source)
            buffer = ctypes.create_string_buffer(data, len(data)) if data else ctypes.create_string_buffer(1)
            code = self.lib.el_model_load_buffer(buffer, len(data), ctypes.byref(handle), errbuf, ERRBUF_SIZE)
        else:
            code = self.lib.el_model_load(os.fsencode(source), ctypes.byref(handle), errbuf, ERRBUF_SIZE)
        if code != 0:
            self._raise(code, errbuf.value)
        return LiteModel(self, handle)

    def allocator_stats(self) -> AllocatorStats:
        raw = _Stats()
        self.lib.el_allocator_get_stats(ctypes.byref(raw))
        values = {name: int(getattr(raw, name)) for name, _ in _Stats._fields_ if name != "reserved"}
        values["enabled"] = bool(values["enabled"])
        return AllocatorStats(**values)

    def set_allocator_enabled(self, enabled: bool) -> None:
        self.lib.el_allocator_set_enabled(1 if enabled else 0)

    def set_max_cached_bytes(self, max_bytes: int) -> None:
        self.lib.el_allocator_set_max_cached_bytes(max_bytes)

    def release_cache(self) -> int:
        return int(self.lib.el_allocator_release())

    def reset_allocator_stats(self) -> None:
        self.lib.el_allocator_reset_stats()

    def set_num_threads(self, n: int) -> None:
        """Threads for ember's kernels; raises LiteError when n is out of range or the
        threads cannot be started (the previous count then stays)."""
        code = self.lib.el_set_num_threads(n)
        if code != 0:
            self._raise(code, self.lib.el_last_error())


class LiteModel:
    """A model loaded by ember-lite; freed when garbage-collected or by close()."""

    def __init__(self, runtime: EmberLite, handle: ctypes.c_void_p):
        self._runtime = runtime
        self._handle = handle
        lib = runtime.lib
        self.num_ops = lib.el_model_num_ops(handle)
        self.input_shape = self._shape(lib.el_model_input_shape)
        self.output_shape = self._shape(lib.el_model_output_shape)

    def _shape(self, getter) -> Tuple[int, ...]:
        dims = (ctypes.c_int64 * MAX_RANK)()
        rank = getter(self._handle, dims, MAX_RANK)
        return tuple(int(d) for d in dims[:rank])

    def run(self, x) -> np.ndarray:
        """Output for input x (any array with the model's element count)."""
        data = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
        out = np.empty(self.output_shape, dtype=np.float32)
        float_p = ctypes.POINTER(ctypes.c_float)
        code = self._runtime.lib.el_model_run(self._handle, data.ctypes.data_as(float_p), data.size,
                                              out.ctypes.data_as(float_p), out.size)
        if code != 0:
            self._runtime._raise(code, self._runtime.lib.el_last_error())
        return out

    def close(self) -> None:
        if self._handle:
            self._runtime.lib.el_model_free(self._handle)
            self._handle = ctypes.c_void_p()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone already
            pass
