"""ember.profiler: records ember ops (name, input shapes and dtypes, duration, and with
``with_stack=True`` the ``file:line`` of the user code that called them).

    with ember.profiler.profile(with_stack=True) as prof:
        ember.matmul(a, b)
    print(prof.key_averages().table())
    prof.export_chrome_trace("trace.json")
"""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

__all__ = ["profile", "record_function", "ProfilerEvent", "EventList", "FunctionEventAvg"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_lock = threading.Lock()
_active: Optional["profile"] = None
_thread_state = threading.local()


@dataclass(frozen=True)
class ProfilerEvent:
    """One recorded op call; times are in nanoseconds since the profile started."""

    name: str
    input_shapes: Tuple[Tuple[int, ...], ...]
    input_dtypes: Tuple[str, ...]
    start_ns: int
    duration_ns: int
    thread_id: int
    stack: Tuple[str, ...] = ()

    @property
    def cpu_time_us(self) -> float:
        return self.duration_ns / 1000.0


@dataclass
class FunctionEventAvg:
    """Aggregate of the events that share a key (op name, optionally shapes or stack)."""

    key: str
    count: int = 0
    cpu_time_total_ns: int = 0
    cpu_time_min_ns: int = 0
    cpu_time_max_ns: int = 0
    input_shapes: Tuple[Tuple[int, ...], ...] = ()
    stack: Tuple[str, ...] = ()

    @property
    def cpu_time_total(self) -> float:
        """Total time in microseconds."""
        return self.cpu_time_total_ns / 1000.0

    @property
    def cpu_time(self) -> float:
        """Average time per call in microseconds."""
        return self.cpu_time_total / self.count if self.count else 0.0

    def _add(self, ev: ProfilerEvent) -> None:
        if self.count == 0:
            self.cpu_time_min_ns = self.cpu_time_max_ns = ev.duration_ns
        self.count += 1
        self.cpu_time_total_ns += ev.duration_ns
        self.cpu_time_min_ns = min(self.cpu_time_min_ns, ev.duration_ns)
        self.cpu_time_max_ns = max(self.cpu_time_max_ns, ev.duration_ns)


class EventList(list):
    """A list of events or averages that prints as a table."""

    def table(self, sort_by: str = "cpu_time_total", row_limit: int = 100) -> str:
        """Text table of the rows, largest `sort_by` first."""
        rows = list(self)
        if rows and hasattr(rows[0], sort_by):
            rows.sort(key=lambda r: getattr(r, sort_by), reverse=True)
        rows = rows[:row_limit]
        averaged = bool(rows) and isinstance(rows[0], FunctionEventAvg)
        headers = ["Name", "Calls", "Total (us)", "Avg (us)", "Min (us)", "Max (us)", "Input shapes", "Source"]
        body = []
        for r in rows:
            if averaged:
                body.append([
                    r.key, str(r.count), f"{r.cpu_time_total:.1f}", f"{r.cpu_time:.1f}",
                    f"{r.cpu_time_min_ns / 1000:.1f}", f"{r.cpu_time_max_ns / 1000:.1f}",
                    _format_shapes(r.input_shapes), r.stack[0] if r.stack else "",
                ])
            else:
                us = f"{r.cpu_time_us:.1f}"
                body.append([r.name, "1", us, us, us, us, _format_shapes(r.input_shapes),
                             r.stack[0] if r.stack else ""])
        widths = [max(len(h), *(len(row[i]) for row in body)) if body else len(h)
                  for i, h in enumerate(headers)]
        sep = "  ".join("-" * w for w in widths)
        lines = [sep, "  ".join(h.ljust(w) for h, w in zip(headers, widths)), sep]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in body]
        lines.append(sep)
        total = sum(getattr(r, "cpu_time_total_ns", getattr(r, "duration_ns", 0)) for r in self)
        lines.append(f"Self CPU time total: {total / 1e6:.3f} ms")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def _format_shapes(shapes: Sequence[Tuple[int, ...]]) -> str:
    return "[" + ", ".join("[" + ", ".join(str(d) for d in s) + "]" for s in shapes) + "]"


def _user_stack() -> Tuple[str, ...]:
    """file:line of each caller frame outside the ember package, innermost first."""
    frames = []
    f = sys._getframe(1)
    while f is not None:
        filename = f.f_code.co_filename
        if not os.path.abspath(filename).startswith(_PACKAGE_DIR):
            frames.append(f"{filename}:{f.f_lineno}")
        f = f.f_back
    return tuple(frames)


def _describe_inputs(args, kwargs) -> Tuple[Tuple[Tuple[int, ...], ...], Tuple[str, ...]]:
    shapes, dtypes = [], []
    for a in list(args) + list(kwargs.values()):
        shape = getattr(a, "shape", None)
        dtype = getattr(a, "dtype", None)
        if shape is not None and dtype is not None:
            shapes.append(tuple(int(d) for d in shape))
            dtypes.append(str(dtype))
        elif isinstance(a, (int, float, complex)) and not isinstance(a, bool):
            shapes.append(())
            dtypes.append("Scalar")
    return tuple(shapes), tuple(dtypes)


def record_op(name: str) -> Callable:
    """Decorator for ember's public ops: records a call while a profiler is active.

    Only the outermost ember op of a call chain is recorded, so ops built from other ops
    count once.
    """

    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prof = _active
            depth = getattr(_thread_state, "depth", 0)
            if prof is None or depth > 0:
                return fn(*args, **kwargs)
            stack = _user_stack() if prof.with_stack else ()
            shapes, dtypes = _describe_inputs(args, kwargs) if prof.record_shapes else ((), ())
            _thread_state.depth = depth + 1
            start = time.perf_counter_ns()
            try:
                return fn(*args, **kwargs)
            finally:
                end = time.perf_counter_ns()
                _thread_state.depth = depth
                prof._record(name, shapes, dtypes, start, end, stack)

        return wrapper

    return decorate


class profile:
    """Context manager that records every ember op called while it is active."""

    def __init__(self, enabled: bool = True, with_stack: bool = False, record_shapes: bool = True):
        self.enabled = enabled
        self.with_stack = with_stack
        self.record_shapes = record_shapes
        self._events: List[ProfilerEvent] = []
        self._events_lock = threading.Lock()
        self._t0 = 0
        self._previous: Optional[profile] = None

    def __enter__(self) -> "profile":
        global _active
        if self.enabled:
            with _lock:
                self._previous = _active
                self._t0 = time.perf_counter_ns()
                _active = self
        return self

    def __exit__(self, *exc) -> None:
        global _active
        if self.enabled:
            with _lock:
                _active = self._previous

    def _record(self, name, shapes, dtypes, start, end, stack) -> None:
        ev = ProfilerEvent(name, shapes, dtypes, start - self._t0, end - start,
                           threading.get_ident(), stack)
        with self._events_lock:
            self._events.append(ev)

    def events(self) -> EventList:
        """Every recorded event, in the order the calls finished."""
        with self._events_lock:
            return EventList(self._events)

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0) -> EventList:
        """Events grouped by op name (and input shapes, and the top stack frames if asked)."""
        groups: Dict[tuple, FunctionEventAvg] = {}
        for ev in self.events():
            key = (ev.name,
                   ev.input_shapes if group_by_input_shape else None,
                   ev.stack[:group_by_stack_n] if group_by_stack_n else None)
            avg = groups.get(key)
            if avg is None:
                avg = groups[key] = FunctionEventAvg(
                    key=ev.name,
                    input_shapes=ev.input_shapes if group_by_input_shape else (),
                    stack=ev.stack[:group_by_stack_n] if group_by_stack_n else ev.stack[:1])
            avg._add(ev)
        return EventList(groups.values())

    def table(self, sort_by: str = "cpu_time_total", row_limit: int = 100) -> str:
        return self.key_averages().table(sort_by=sort_by, row_limit=row_limit)

    def export_chrome_trace(self, path: str) -> None:
        """Write the events as Chrome trace JSON (chrome://tracing, Perfetto)."""
        pid = os.getpid()
        trace = []
        for ev in self.events():
            args = {"shapes": [list(s) for s in ev.input_shapes], "dtypes": list(ev.input_dtypes)}
            if ev.stack:
                args["stack"] = list(ev.stack)
            trace.append({
                "name": ev.name, "cat": "ember_op", "ph": "X",
                "ts": ev.start_ns / 1000.0, "dur": ev.duration_ns / 1000.0,
                "pid": pid, "tid": ev.thread_id, "args": args,
            })
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"traceEvents": trace, "displayTimeUnit": "ms"}, f, indent=1)

    def __iter__(self) -> Iterator[ProfilerEvent]:
        return iter(self.events())


class record_function:
    """Context manager that records a user-named range as one event."""

    def __init__(self, name: str):
        self.name = name
        self._start = 0
        self._stack: Tuple[str, ...] = ()

    def __enter__(self) -> "record_function":
        prof = _active
        if prof is not None and prof.with_stack:
            self._stack = _user_stack()
        self._start = time.perf_counter_ns()
        return self

    def __exit__(self, *exc) -> None:
        prof = _active
        if prof is not None:
            prof._record(self.name, (), (), self._start, time.perf_counter_ns(), self._stack)
