"""The calling side of RPC: futures, remote errors rebuilt locally, and one connection per peer."""
from __future__ import annotations

import concurrent.futures
import pickle
import socket
import threading
import traceback
from typing import Any, Callable, Dict, Optional, Tuple

from ember.distributed import _rpc_wire as wire
from ember.distributed._rpc_pool import blocking
from ember.distributed.errors import DistributedError, DistributedTimeoutError
from ember.distributed.store import Timeout, seconds


class RemoteError(DistributedError):
    """A remote exception whose type could not be rebuilt locally."""


def _describe_error(exc: BaseException) -> dict:
    try:
        pickled = pickle.dumps(exc)
        pickle.loads(pickled)
    except Exception:
        pickled = None
    return {"type": f"{type(exc).__module__}.{type(exc).__qualname__}", "message": str(exc),
            "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
            "pickled": pickled}


def _rebuild_error(info: dict, worker: str) -> BaseException:
    text = (f"{info['message']}\n\nRemote traceback (on worker {worker!r}):\n{info['traceback']}")
    if info["pickled"] is not None:
        try:
            original = pickle.loads(info["pickled"])
            rebuilt = type(original)(text)
            rebuilt.remote_traceback = info["traceback"]
            return rebuilt
        except Exception:
            pass
    error = RemoteError(f"{info['type']}: {text}")
    error.remote_traceback = info["traceback"]
    return error


class Future:
    """Result of ``rpc_async``: ``wait()``/``result()`` return the value or raise the remote error."""

    def __init__(self, inner: concurrent.futures.Future, what: str, timeout: float):
        self._inner, self._what, self._timeout = inner, what, timeout

    def done(self) -> bool:
        return self._inner.done()

    def result(self, timeout: Optional[Timeout] = None) -> Any:
        limit = self._timeout if timeout is None else seconds(timeout)
        try:
            with blocking():
                return self._inner.result(timeout=limit if limit > 0 else None)
        except concurrent.futures.TimeoutError:
            raise DistributedTimeoutError(f"{self._what}: no answer within {limit:g} s") from None

    wait = result

    def add_done_callback(self, fn: Callable[["Future"], None]) -> None:
        self._inner.add_done_callback(lambda _inner: fn(self))


class _Connection:
    """A client connection to one peer; a reader thread completes futures by request id."""

    def __init__(self, agent: Any, peer: str, address: Tuple[str, int]):
        self.peer, self.limit = peer, agent.max_message_size
        self.sock = socket.create_connection(address, timeout=agent.timeout)
        try:
            wire.offer_handshake(self.sock, agent.secret, agent.timeout)
        except (wire.AuthenticationError, OSError) as err:
            self.sock.close()
            raise DistributedError(f"rpc: cannot connect to worker {peer!r} at {address[0]}:{address[1]}: "
                                   f"{err}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.lock = threading.Lock()
        self.send_lock = threading.Lock()
        self.pending: Dict[int, concurrent.futures.Future] = {}
        self.closed = False
        threading.Thread(target=self._read, name=f"rpc-client-{peer}", daemon=True).start()

    def submit(self, request_id: int, message: tuple, future: concurrent.futures.Future) -> None:
        frame = wire.encode((request_id,) + message, self.limit)  # FrameTooLarge reaches the caller
        with self.lock:
            if self.closed:
                raise DistributedError(f"rpc: connection to worker {self.peer!r} is closed")
            self.pending[request_id] = future
        self.send(frame)

    def send(self, frame: bytes) -> None:
        try:
            wire.send(self.sock, self.send_lock, frame)
        except OSError as err:
            self._fail_all(f"rpc: sending to worker {self.peer!r} failed: {err}")

    def _read(self) -> None:
        why = f"rpc: lost the connection to worker {self.peer!r}"
        try:
            while True:
                reply = wire.receive(self.sock, self.limit)
                if reply is None:
                    break
                request_id, ok, value = reply
                if request_id == 0:  # the peer refuses the connection; value says why
                    why = f"rpc: worker {self.peer!r} refused our message: {value}"
                    break
                with self.lock:
                    future = self.pending.pop(request_id, None)
                if future is None:
                    continue
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(_rebuild_error(value, self.peer))
                del reply, value, future  # the caller's future holds the result, not this loop
        except wire.FrameTooLarge as err:
            why = f"rpc: a reply from worker {self.peer!r} was refused: {err}"
        except Exception:
            pass
        self._fail_all(why)
        self.close()  # the peer may be draining until we hang up

    def _fail_all(self, why: str) -> None:
        with self.lock:
            self.closed = True
            pending, self.pending = self.pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(DistributedError(why))

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
