"""RPC between named workers: functions travel by qualified name, arguments by pickle.

Each worker runs a small TCP server (one thread per connection, calls run on a thread
pool) and registers ``name -> address`` in the rendezvous store. Errors raised by the
callee are re-raised by the caller as the same exception type, with the remote
traceback text in the message.
"""
from __future__ import annotations

import concurrent.futures
import importlib
import itertools
import os
import pickle
import socket
import struct
import sys
import threading
import traceback
from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple, Union

from ember.distributed import collectives
from ember.distributed.errors import DistributedError, DistributedTimeoutError
from ember.distributed.store import TCPStore, Timeout, seconds

_FRAME = struct.Struct("<Q")
_MAX_FRAME = 1 << 31
_DEFAULT_RPC_TIMEOUT = 60.0


class WorkerInfo(NamedTuple):
    name: str
    id: int


class RemoteError(DistributedError):
    """A remote exception whose type could not be rebuilt locally."""


def _qualified_name(fn: Union[Callable, str]) -> Tuple[str, str]:
    if isinstance(fn, str):
        if ":" in fn:
            module, name = fn.split(":", 1)
        else:
            module, _, name = fn.rpartition(".")
        if not module or not name:
            raise ValueError(f"function name {fn!r} must be 'module.name' or 'module:qualname'")
        return module, name
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not module or not qualname or "<" in qualname:
        raise ValueError(f"{fn!r} cannot be called remotely: only importable, named functions travel "
                         "(no lambdas or nested functions)")
    return module, qualname


def _resolve(module: str, qualname: str) -> Callable:
    obj: Any = sys.modules["__main__"] if module == "__main__" else importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _send_frame(sock: socket.socket, lock: threading.Lock, message: Any) -> None:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    with lock:
        sock.sendall(_FRAME.pack(len(payload)) + payload)


def _recv_exact(sock: socket.socket, size: int) -> Optional[bytes]:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _recv_frame(sock: socket.socket) -> Optional[Any]:
    header = _recv_exact(sock, _FRAME.size)
    if header is None:
        return None
    (size,) = _FRAME.unpack(header)
    if size > _MAX_FRAME:
        raise DistributedError(f"rpc: frame of {size} bytes exceeds the limit")
    payload = _recv_exact(sock, size)
    return None if payload is None else pickle.loads(payload)


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
            return self._inner.result(timeout=limit if limit > 0 else None)
        except concurrent.futures.TimeoutError:
            raise DistributedTimeoutError(f"{self._what}: no answer within {limit:g} s") from None

    wait = result

    def add_done_callback(self, fn: Callable[["Future"], None]) -> None:
        self._inner.add_done_callback(lambda _inner: fn(self))


class RRef:
    """A reference to a value held by its owner worker; ``to_here()`` fetches a copy."""

    def __init__(self, owner: str, rref_id: str):
        self._owner, self._id = owner, rref_id

    def owner(self) -> WorkerInfo:
        return _agent_or_raise().worker_info(self._owner)

    def is_owner(self) -> bool:
        return _agent_or_raise().name == self._owner

    def to_here(self, timeout: Optional[Timeout] = None) -> Any:
        agent = _agent_or_raise()
        if agent.name == self._owner:
            return agent.owned_value(self._id, timeout)
        return agent.request(self._owner, ("fetch", self._id), timeout).result()

    local_value = to_here

    def __reduce__(self):
        return (RRef, (self._owner, self._id))

    def __repr__(self) -> str:
        return f"RRef(owner={self._owner!r}, id={self._id!r})"


class _Connection:
    """A client connection to one peer; a reader thread completes futures by request id."""

    def __init__(self, agent: "_Agent", peer: str, address: Tuple[str, int]):
        self.peer = peer
        self.sock = socket.create_connection(address, timeout=agent.timeout)
        self.sock.settimeout(None)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.lock = threading.Lock()
        self.pending: Dict[int, concurrent.futures.Future] = {}
        self.closed = False
        threading.Thread(target=self._read, name=f"rpc-client-{peer}", daemon=True).start()

    def submit(self, request_id: int, message: tuple, future: concurrent.futures.Future) -> None:
        with self.lock:
            if self.closed:
                raise DistributedError(f"rpc: connection to worker {self.peer!r} is closed")
            self.pending[request_id] = future
        try:
            self._send((request_id,) + message)
        except OSError as err:
            self._fail_all(f"rpc: sending to worker {self.peer!r} failed: {err}")

    def _send(self, message: tuple) -> None:
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        with self.lock:
            self.sock.sendall(_FRAME.pack(len(payload)) + payload)

    def _read(self) -> None:
        try:
            while True:
                reply = _recv_frame(self.sock)
                if reply is None:
                    break
                request_id, ok, value = reply
                with self.lock:
                    future = self.pending.pop(request_id, None)
                if future is None:
                    continue
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(_rebuild_error(value, self.peer))
        except Exception:
            pass
        self._fail_all(f"rpc: lost the connection to worker {self.peer!r}")

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


class _Agent:
    def __init__(self, name: str, rank: int, world_size: int, store: TCPStore, timeout: float,
                 owns_store: bool):
        self.name, self.rank, self.world_size = name, rank, world_size
        self.store, self.timeout, self._owns_store = store, timeout, owns_store
        self._listener = socket.create_server(("", 0))
        self._listener.settimeout(0.2)
        self._stopping = threading.Event()
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="rpc")
        self._owned: Dict[str, concurrent.futures.Future] = {}
        self._owned_lock = threading.Lock()
        self._connections: Dict[str, _Connection] = {}
        self._connections_lock = threading.Lock()
        self._server_sockets = []
        self._ids = itertools.count(1)
        self._accept_thread = threading.Thread(target=self._accept, name="rpc-accept", daemon=True)
        self._accept_thread.start()

        self._workers: Dict[str, Tuple[int, Tuple[str, int]]] = {}
        self._ready = threading.Event()

    def rendezvous(self) -> None:
        """Publishes this worker's address and waits for every other worker's."""
        store, rank = self.store, self.rank
        host = store.client.local_address()
        store.set(f"rpc/worker/{rank}", f"{self.name}\n{host}\n{self._listener.getsockname()[1]}")
        store.wait([f"rpc/worker/{r}" for r in range(self.world_size)], self.timeout)
        for r in range(self.world_size):
            peer_name, peer_host, peer_port = store.get(f"rpc/worker/{r}").decode().split("\n")
            if peer_name in self._workers:
                raise ValueError(f"rpc: worker name {peer_name!r} is used by ranks "
                                 f"{self._workers[peer_name][0]} and {r}")
            self._workers[peer_name] = (r, (peer_host, int(peer_port)))
        self._ready.set()

    # ---- serving ---------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            conn.settimeout(None)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._server_sockets.append(conn)
            threading.Thread(target=self._serve, args=(conn,), name="rpc-serve", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        send_lock = threading.Lock()
        try:
            while True:
                message = _recv_frame(conn)
                if message is None:
                    return
                request_id, kind = message[0], message[1]
                if kind == "remote":
                    # Registered before the call runs, so a fetch that follows on this
                    # connection always finds the slot.
                    with self._owned_lock:
                        self._owned[message[2]] = concurrent.futures.Future()
                self._executor.submit(self._handle, conn, send_lock, request_id, kind, message[2:])
        except (OSError, EOFError, pickle.UnpicklingError, DistributedError):
            return
        finally:
            conn.close()

    def _handle(self, conn, send_lock, request_id, kind, args) -> None:
        try:
            if kind == "call":
                module, qualname, fn_args, fn_kwargs = args
                reply = (request_id, True, _resolve(module, qualname)(*fn_args, **fn_kwargs))
            elif kind == "remote":
                rref_id, module, qualname, fn_args, fn_kwargs = args
                slot = self._owned[rref_id]
                try:
                    slot.set_result(_resolve(module, qualname)(*fn_args, **fn_kwargs))
                except BaseException as exc:
                    slot.set_exception(exc)
                    raise
                reply = (request_id, True, None)
            elif kind == "fetch":
                reply = (request_id, True, self.owned_value(args[0], None))
            else:
                raise DistributedError(f"rpc: unknown request kind {kind!r}")
        except BaseException as exc:
            reply = (request_id, False, _describe_error(exc))
        try:
            try:
                _send_frame(conn, send_lock, reply)
            except (pickle.PicklingError, TypeError, AttributeError) as exc:
                _send_frame(conn, send_lock, (request_id, False, _describe_error(exc)))
        except OSError:
            pass

    def owned_value(self, rref_id: str, timeout: Optional[Timeout]) -> Any:
        with self._owned_lock:
            slot = self._owned.get(rref_id)
        if slot is None:
            raise DistributedError(f"rpc: worker {self.name!r} owns no RRef {rref_id!r}")
        limit = self.timeout if timeout is None else seconds(timeout)
        return slot.result(timeout=limit)

    # ---- calling ---------------------------------------------------------------------
    def worker_info(self, name: str) -> WorkerInfo:
        # A peer that finished its rendezvous first may call us while we still read ours.
        self._ready.wait(self.timeout)
        if name not in self._workers:
            raise ValueError(f"rpc: unknown worker {name!r}; known: {sorted(self._workers)}")
        return WorkerInfo(name, self._workers[name][0])

    def _connection(self, name: str) -> _Connection:
        with self._connections_lock:
            conn = self._connections.get(name)
            if conn is None or conn.closed:
                self.worker_info(name)
                conn = _Connection(self, name, self._workers[name][1])
                self._connections[name] = conn
            return conn

    def request(self, to: str, message: tuple, timeout: Optional[Timeout]) -> Future:
        limit = self.timeout if timeout is None else seconds(timeout)
        inner: concurrent.futures.Future = concurrent.futures.Future()
        self._connection(to).submit(next(self._ids), message, inner)
        return Future(inner, f"rpc {message[0]} on worker {to!r}", limit)

    def new_rref_id(self) -> str:
        return f"{self.name}:{os.getpid()}:{next(self._ids)}"

    def shutdown(self, graceful: bool) -> None:
        if graceful:
            # Nobody leaves until every worker is done calling the others.
            self.store.set(f"rpc/done/{self.rank}", b"1")
            self.store.wait([f"rpc/done/{r}" for r in range(self.world_size)], self.timeout)
        self._stopping.set()
        self._listener.close()
        with self._connections_lock:
            for conn in self._connections.values():
                conn.close()
        for conn in self._server_sockets:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._executor.shutdown(wait=False)
        if self._owns_store:
            self.store.close()


_agent: Optional[_Agent] = None


def _agent_or_raise() -> _Agent:
    if _agent is None:
        raise RuntimeError("RPC is not initialized; call ember.distributed.rpc.init_rpc() first")
    return _agent


def _to_name(to: Union[str, WorkerInfo]) -> str:
    return to.name if isinstance(to, WorkerInfo) else str(to)


def init_rpc(name: str, rank: int = -1, world_size: int = -1, init_method: Optional[str] = None,
             timeout: Timeout = _DEFAULT_RPC_TIMEOUT, store: Optional[TCPStore] = None) -> None:
    """Starts this worker's RPC agent and waits until all ``world_size`` workers registered.

    The store is, in order: ``store``, the default process group's store, or a new one
    from ``init_method`` (``tcp://`` or ``env://``; rank 0 hosts it).
    """
    global _agent
    if _agent is not None:
        raise RuntimeError("RPC is already initialized")
    owns_store = False
    if store is None and collectives.is_initialized():
        store = collectives.default_store()
        rank = collectives.get_rank() if rank < 0 else rank
        world_size = collectives.get_world_size() if world_size < 0 else world_size
    elif store is None:
        host, port, rank, world_size = collectives._parse_init_method(init_method or "env://", rank, world_size)
        store = TCPStore(host, port, world_size, is_master=(rank == 0), timeout=timeout)
        owns_store = True
    if rank < 0 or world_size < 1:
        raise ValueError("init_rpc needs rank and world_size")
    agent = _Agent(name, rank, world_size, store, seconds(timeout), owns_store)
    # Published before the rendezvous: peers may call functions that use the agent as
    # soon as they have seen our address.
    _agent = agent
    try:
        agent.rendezvous()
    except BaseException:
        _agent = None
        agent.shutdown(graceful=False)
        raise


def get_worker_info(name: Optional[str] = None) -> WorkerInfo:
    agent = _agent_or_raise()
    return agent.worker_info(agent.name if name is None else name)


def rpc_async(to: Union[str, WorkerInfo], func: Union[Callable, str], args: tuple = (),
              kwargs: Optional[dict] = None, timeout: Optional[Timeout] = None) -> Future:
    """Runs ``func(*args, **kwargs)`` on worker ``to``; returns a Future of its result."""
    module, qualname = _qualified_name(func)
    return _agent_or_raise().request(_to_name(to), ("call", module, qualname, tuple(args), dict(kwargs or {})),
                                     timeout)


def rpc_sync(to: Union[str, WorkerInfo], func: Union[Callable, str], args: tuple = (),
             kwargs: Optional[dict] = None, timeout: Optional[Timeout] = None) -> Any:
    """Runs ``func(*args, **kwargs)`` on worker ``to`` and returns its result."""
    return rpc_async(to, func, args, kwargs, timeout).result()


def remote(to: Union[str, WorkerInfo], func: Union[Callable, str], args: tuple = (),
           kwargs: Optional[dict] = None, timeout: Optional[Timeout] = None) -> RRef:
    """Runs ``func`` on worker ``to``, which keeps the result; returns an RRef to it."""
    agent = _agent_or_raise()
    module, qualname = _qualified_name(func)
    owner = _to_name(to)
    rref_id = agent.new_rref_id()
    agent.request(owner, ("remote", rref_id, module, qualname, tuple(args), dict(kwargs or {})), timeout)
    return RRef(owner, rref_id)


def shutdown(graceful: bool = True) -> None:
    """Stops the agent; with ``graceful`` first waits until every worker reached shutdown.

    The agent keeps serving until then: other workers may still be calling us.
    """
    global _agent
    agent = _agent
    if agent is None:
        return
    try:
        agent.shutdown(graceful)
    finally:
        _agent = None
