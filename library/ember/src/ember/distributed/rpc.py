"""RPC between named workers: functions travel by qualified name, arguments by pickle.

Each worker runs a small TCP server (one thread per connection, calls run on a handler
pool) and registers ``name -> address`` in the rendezvous store. Errors raised by the
callee are re-raised by the caller as the same exception type, with the remote
traceback text in the message.

Trust: the server listens on the interface this worker reaches the store through
(loopback for a loopback init method), and every connection must first pass a mutual HMAC
handshake over a secret that rank 0 draws and hands out through the store during the
rendezvous, then deletes (``_rpc_wire``). Nothing is unpickled before that. The store is
the root of trust: whoever can read it during the rendezvous is a member of the group.
Traffic is authenticated at connection set-up, not encrypted.

RRefs are counted: the owner keeps a value while some worker holds a live ``RRef`` to it
(one registration per holding worker), and frees it once the last one is collected.
"""
from __future__ import annotations

import concurrent.futures
import importlib
import itertools
import logging
import os
import pickle
import queue
import socket
import sys
import threading
from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple, Union

from ember.distributed import _rpc_wire as wire
from ember.distributed import collectives
from ember.distributed._rpc_client import Future, RemoteError, _Connection, _describe_error  # noqa: F401 (API)
from ember.distributed._rpc_pool import HandlerPool, blocking
from ember.distributed.errors import DistributedError
from ember.distributed.store import TCPStore, Timeout, seconds

_DEFAULT_RPC_TIMEOUT = 60.0
_DEFAULT_MAX_MESSAGE_SIZE = 1 << 30
_POOL_SIZE = 8
_SECRET_KEY = "rpc/secret"
_log = logging.getLogger("ember.distributed.rpc")


class WorkerInfo(NamedTuple):
    name: str
    id: int


class DebugInfo(NamedTuple):
    """Counters of this worker's agent (``debug_info()``)."""
    owned_rrefs: int            # values this worker keeps for live RRefs
    held_rrefs: int             # distinct RRefs this worker holds
    refused_handshakes: int     # connections that did not prove the secret (nothing of theirs was unpickled)
    refused_messages: int       # frames over max_message_size (the connection is closed)
    handler_threads: int        # threads of the handler pool (more than 8 only while handlers wait)


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


class RRef:
    """A reference to a value held by its owner worker; ``to_here()`` fetches a copy.

    Pickling an RRef (to pass it to another worker) registers one more holder with the
    owner before the message leaves; the receiving worker takes that registration over.
    """

    def __init__(self, agent: "_Agent", owner: str, rref_id: str):
        self._agent, self._owner, self._id = agent, owner, rref_id

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
        self._agent.register_holder(self._owner, self._id)
        return (_adopt_rref, (self._owner, self._id))

    def __del__(self):
        # Runs wherever the collector runs: only a queue put, which is safe in any thread.
        self._agent.release_later(self._owner, self._id, held=True)

    def __repr__(self) -> str:
        return f"RRef(owner={self._owner!r}, id={self._id!r})"


def _adopt_rref(owner: str, rref_id: str) -> RRef:
    return _agent_or_raise().adopt(owner, rref_id)


class _Owned:
    __slots__ = ("value", "holders")

    def __init__(self) -> None:
        self.value: concurrent.futures.Future = concurrent.futures.Future()
        self.holders = 1


class _Agent:
    def __init__(self, name: str, rank: int, world_size: int, store: TCPStore, timeout: float,
                 owns_store: bool, max_message_size: int):
        self.name, self.rank, self.world_size = name, rank, world_size
        self.store, self.timeout, self._owns_store = store, timeout, owns_store
        self.max_message_size = max_message_size
        self.secret = b""
        self._have_secret = threading.Event()
        # The interface the store is reached through: loopback for a loopback init method.
        self.host = store.client.local_address()
        self._listener = socket.create_server((self.host, 0))
        self._listener.settimeout(0.2)
        self._stopping = threading.Event()
        self._pool = HandlerPool(_POOL_SIZE, "rpc")
        self._owned: Dict[str, _Owned] = {}
        self._owned_lock = threading.Lock()
        self._held: Dict[str, int] = {}   # rref id -> live RRef objects here (one registration)
        self._held_lock = threading.Lock()
        self._releases: "queue.SimpleQueue[Optional[Tuple[str, str, bool]]]" = queue.SimpleQueue()
        self.refused_handshakes = self.refused_messages = 0
        self._connections: Dict[str, _Connection] = {}
        self._connections_lock = threading.Lock()
        self._server_sockets: list = []
        self._ids = itertools.count(1)
        self._workers: Dict[str, Tuple[int, Tuple[str, int]]] = {}
        self._ready = threading.Event()
        threading.Thread(target=self._accept, name="rpc-accept", daemon=True).start()
        threading.Thread(target=self._release_loop, name="rpc-release", daemon=True).start()

    def rendezvous(self) -> None:
        """Agrees on the secret, publishes this worker's address and waits for every other worker's."""
        store, rank = self.store, self.rank
        if rank == 0:
            store.set(_SECRET_KEY, wire.new_secret().hex())
        self.secret = bytes.fromhex(store.get(_SECRET_KEY, self.timeout).decode())
        self._have_secret.set()
        port = self._listener.getsockname()[1]
        store.set(f"rpc/worker/{rank}", f"{self.name}\n{self.host}\n{port}")
        store.wait([f"rpc/worker/{r}" for r in range(self.world_size)], self.timeout)
        if rank == 0:
            # Every worker has read it (each published its address after reading): a
            # process that reaches the store later finds no secret to learn.
            store.delete_key(_SECRET_KEY)
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
                conn, peer = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self._server_sockets.append(conn)
            threading.Thread(target=self._serve, args=(conn, peer), name="rpc-serve", daemon=True).start()

    def _refuse(self, peer: Tuple[str, int], why: str) -> None:
        _log.warning("rpc: worker %r refused a connection from %s:%d: %s", self.name, peer[0], peer[1], why)

    def _serve(self, conn: socket.socket, peer: Tuple[str, int]) -> None:
        # A peer may connect while this worker still waits for the secret.
        if not self._have_secret.wait(self.timeout) or self._stopping.is_set():
            conn.close()
            return
        try:
            wire.accept_handshake(conn, self.secret, self.timeout)
        except (wire.AuthenticationError, OSError) as err:
            self.refused_handshakes += 1
            self._refuse(peer, str(err))
            conn.close()
            return
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        send_lock = threading.Lock()
        try:
            while True:
                message = wire.receive(conn, self.max_message_size)
                if message is None:
                    return
                self._dispatch(conn, send_lock, message)
                del message  # an RRef in it must not outlive the call because this loop waits
        except wire.FrameTooLarge as err:
            self.refused_messages += 1
            self._refuse(peer, str(err))
            try:
                wire.send(conn, send_lock, wire.encode((0, False, str(err)), self.max_message_size))
            except OSError:
                pass
            wire.drain_and_close(conn)
        except (OSError, EOFError, pickle.UnpicklingError, DistributedError):
            return
        finally:
            conn.close()

    def _dispatch(self, conn: socket.socket, send_lock: threading.Lock, message: tuple) -> None:
        request_id, kind = message[0], message[1]
        # Reference counting is handled here, in order per connection, and never waits on
        # the pool: a holder's registration always lands before its own release.
        if kind == "addref":
            ok = self.count_holder(message[2], +1)
            self._reply(conn, send_lock, (request_id, ok, None if ok else _describe_error(
                DistributedError(f"rpc: worker {self.name!r} owns no RRef {message[2]!r}"))))
            return
        if kind == "release":
            self.count_holder(message[2], -1)
            return
        if kind == "remote":
            # Registered before the call runs, so a fetch that follows always finds the slot.
            with self._owned_lock:
                self._owned[message[2]] = _Owned()
        self._pool.submit(self._handle, conn, send_lock, request_id, kind, message[2:])

    def _handle(self, conn, send_lock, request_id, kind, args) -> None:
        try:
            if kind == "call":
                module, qualname, fn_args, fn_kwargs = args
                reply = (request_id, True, _resolve(module, qualname)(*fn_args, **fn_kwargs))
            elif kind == "remote":
                rref_id, module, qualname, fn_args, fn_kwargs = args
                with self._owned_lock:
                    slot = self._owned.get(rref_id)
                value: concurrent.futures.Future = slot.value if slot else concurrent.futures.Future()
                try:
                    value.set_result(_resolve(module, qualname)(*fn_args, **fn_kwargs))
                except BaseException as exc:
                    value.set_exception(exc)
                    raise
                reply = (request_id, True, None)
            elif kind == "fetch":
                reply = (request_id, True, self.owned_value(args[0], None))
            else:
                raise DistributedError(f"rpc: unknown request kind {kind!r}")
        except BaseException as exc:
            reply = (request_id, False, _describe_error(exc))
        self._reply(conn, send_lock, reply)

    def _reply(self, conn, send_lock, reply: tuple) -> None:
        try:
            try:
                frame = wire.encode(reply, self.max_message_size)
            except Exception as exc:  # unpicklable, too large, or an RRef whose owner is unreachable
                frame = wire.encode((reply[0], False, _describe_error(exc)), self.max_message_size)
            wire.send(conn, send_lock, frame)
        except OSError:
            pass

    def owned_value(self, rref_id: str, timeout: Optional[Timeout]) -> Any:
        with self._owned_lock:
            slot = self._owned.get(rref_id)
        if slot is None:
            raise DistributedError(f"rpc: worker {self.name!r} owns no RRef {rref_id!r}")
        limit = self.timeout if timeout is None else seconds(timeout)
        with blocking():
            return slot.value.result(timeout=limit)

    # ---- RRef reference counts -------------------------------------------------------
    def count_holder(self, rref_id: str, delta: int) -> bool:
        """Owner side: one holder more or less; the value goes when none is left."""
        with self._owned_lock:
            slot = self._owned.get(rref_id)
            if slot is None:
                return False
            slot.holders += delta
            if slot.holders <= 0:
                del self._owned[rref_id]
        return True

    def register_holder(self, owner: str, rref_id: str) -> None:
        """One more registration for an RRef about to be pickled; confirmed before it travels."""
        if owner == self.name:
            self.count_holder(rref_id, +1)
        else:
            self.request(owner, ("addref", rref_id), None).result()

    def adopt(self, owner: str, rref_id: str) -> RRef:
        """An RRef arriving here with one registration (pickled, or just created by remote())."""
        with self._held_lock:
            already = self._held.get(rref_id, 0)
            self._held[rref_id] = already + 1
        if already:
            self.release_later(owner, rref_id, held=False)  # this worker is registered already
        return RRef(self, owner, rref_id)

    def release_later(self, owner: str, rref_id: str, held: bool) -> None:
        self._releases.put((owner, rref_id, held))

    def _release_loop(self) -> None:
        while True:
            item = self._releases.get()
            if item is None:
                return
            owner, rref_id, held = item
            if held:
                with self._held_lock:
                    left = self._held.get(rref_id, 1) - 1
                    if left > 0:
                        self._held[rref_id] = left
                        continue
                    self._held.pop(rref_id, None)
            if owner == self.name:
                self.count_holder(rref_id, -1)
                continue
            try:
                conn = self._connection(owner)
                conn.send(wire.encode((0, "release", rref_id), self.max_message_size))
            except (DistributedError, ValueError, OSError):
                pass  # the owner is gone, and its values with it

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

    def debug_info(self) -> DebugInfo:
        with self._owned_lock, self._held_lock:
            return DebugInfo(len(self._owned), len(self._held), self.refused_handshakes, self.refused_messages,
                             self._pool.threads)

    def shutdown(self, graceful: bool) -> None:
        if graceful:
            # Nobody leaves until every worker is done calling the others.
            self.store.set(f"rpc/done/{self.rank}", b"1")
            self.store.wait([f"rpc/done/{r}" for r in range(self.world_size)], self.timeout)
        self._stopping.set()
        self._releases.put(None)
        self._listener.close()
        with self._connections_lock:
            for conn in self._connections.values():
                conn.close()
        for conn in self._server_sockets:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._pool.close()
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
             timeout: Timeout = _DEFAULT_RPC_TIMEOUT, store: Optional[TCPStore] = None,
             max_message_size: int = _DEFAULT_MAX_MESSAGE_SIZE) -> None:
    """Starts this worker's RPC agent and waits until all ``world_size`` workers registered.

    The store is, in order: ``store``, the default process group's store, or a new one
    from ``init_method`` (``tcp://`` or ``env://``; rank 0 hosts it). A message (request
    or reply) whose pickle exceeds ``max_message_size`` bytes is refused.
    """
    global _agent
    if _agent is not None:
        raise RuntimeError("RPC is already initialized")
    if max_message_size < 1:
        raise ValueError(f"init_rpc: max_message_size must be a positive number of bytes, got {max_message_size!r}")
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
    agent = _Agent(name, rank, world_size, store, seconds(timeout), owns_store, int(max_message_size))
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


def debug_info() -> DebugInfo:
    """This worker's counters: owned and held RRefs, refused connections and messages, handler threads."""
    return _agent_or_raise().debug_info()


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
    """Runs ``func`` on worker ``to``, which keeps the result while an RRef to it lives."""
    agent = _agent_or_raise()
    module, qualname = _qualified_name(func)
    owner = _to_name(to)
    rref_id = agent.new_rref_id()
    agent.request(owner, ("remote", rref_id, module, qualname, tuple(args), dict(kwargs or {})), timeout)
    # The owner counts this worker as a holder from the "remote" request on.
    return agent.adopt(owner, rref_id)


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
