"""The thread pool that runs RPC handlers, with managed blocking for nested calls.

A handler that makes an RPC of its own and waits for the answer holds a thread without
using it. With a fixed pool, enough concurrent nested calls (A calls B calls A ...) fill
every thread with waiters and the answers they wait for queue behind them forever. Here a
handler that waits marks itself blocked (``blocking()``), and the pool may then start
another thread: at most ``size`` threads *run* at a time, waiting ones do not count.
"""
from __future__ import annotations

import collections
import contextlib
import logging
import threading
from typing import Any, Callable, Deque, Iterator, Tuple

from ember.distributed.errors import DistributedError

_log = logging.getLogger("ember.distributed.rpc")
_thread = threading.local()


class HandlerPool:
    def __init__(self, size: int, name: str):
        self._size, self._name = size, name
        self._cond = threading.Condition()
        self._queue: Deque[Tuple[Callable[..., Any], tuple]] = collections.deque()
        self._threads = self._idle = self._blocked = 0
        self._closed = False

    @property
    def threads(self) -> int:
        return self._threads

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        with self._cond:
            if self._closed:
                raise DistributedError("rpc: the agent is shut down")
            self._queue.append((fn, args))
            self._grow()

    def _grow(self) -> None:
        # Holds the condition. Idle threads take queued work; beyond them, start a thread
        # while fewer than `size` threads are running (blocked ones excluded).
        if len(self._queue) <= self._idle:
            self._cond.notify()
        elif self._threads - self._blocked < self._size:
            self._threads += 1
            threading.Thread(target=self._work, name=f"{self._name}-{self._threads}", daemon=True).start()

    def _work(self) -> None:
        _thread.pool = self
        while True:
            with self._cond:
                while not self._queue:
                    if self._closed or self._threads - self._blocked > self._size:
                        self._threads -= 1
                        return
                    self._idle += 1
                    self._cond.wait()
                    self._idle -= 1
                fn, args = self._queue.popleft()
            try:
                fn(*args)
            except BaseException:  # a handler reports its own errors; never lose the thread silently
                _log.exception("rpc: a request handler failed")
            del fn, args  # nothing of a finished call stays alive while this thread idles

    def _set_blocked(self, delta: int) -> None:
        with self._cond:
            self._blocked += delta
            if delta > 0 and self._queue:
                self._grow()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._queue.clear()
            self._cond.notify_all()


@contextlib.contextmanager
def blocking() -> Iterator[None]:
    """Marks the current pool thread (if it is one) as waiting, so that its pool may grow."""
    pool = getattr(_thread, "pool", None)
    if pool is None:
        yield
        return
    pool._set_blocked(1)
    try:
        yield
    finally:
        pool._set_blocked(-1)
