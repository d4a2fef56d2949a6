"""A fault-injecting TCP proxy on loopback (Debian 12 has no toxiproxy): in front of a server, it
answers some connections with a 503 or a 429 (a rate limit, `Retry-After: 1` unless told otherwise),
resets others (RST), drops others (closes with a FIN without answering: "the server closed the connection without a
response"), stalls others, and passes the rest through ("slow": after a pause, not counted as a fault).

A `plan` decides per new connection, from its number and its first request line (so a test can
fail uploads and let reads through); the proxy counts every fault it injected, by fault and
request method. "lost" passes the request on and waits for the server's answer, then resets the
client's connection: the server has acted, the client never learns it. "cut-request" sends the
server the headers and only part of the body, then resets both sides (a fault mid-body: the
server must not act on half a file). "cut-answer" passes the whole request on and the client only
part of the answer, then resets (the server has acted; the client reads a truncated answer);
"cut-body" the same, but the client gets the answer's headers whole and then only part of its body
(a download that breaks after it began, past a client's per-request retries). It
runs an asyncio loop in a thread of its own and listens on 127.0.0.1 only.

Every request it passes on says `Connection: close`, so the server closes each connection after
its answer and the client opens a new one for its next request: a client that keeps connections
alive (requests does) still meets the plan once per request, not once per connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import threading
from collections import Counter
from collections.abc import Callable

Fault = str  # "pass", "slow", "503", "429", "reset", "drop", "stall", "lost", "cut-request", "cut-answer", "cut-body"


class FaultProxy:
    def __init__(self, upstream_port: int, plan: Callable[[int, str], Fault], *, stall_seconds: float = 5.0,
                 slow_seconds: float = 0.1, seed: int = 0, retry_after: int = 1) -> None:
        self.upstream_port = upstream_port
        self.plan = plan
        self.stall_seconds = stall_seconds
        self.slow_seconds = slow_seconds
        self.retry_after = retry_after  # the seconds a 429 asks to wait
        self.injected: Counter[str] = Counter()  # fault -> count
        self.injected_by_method: Counter[tuple[str, str]] = Counter()  # (fault, request method) -> count
        self._rng = random.Random(seed)  # where a cut falls; drawn in the proxy's thread only
        self.connections = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.port = 0

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the fault proxy did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            with contextlib.suppress(Exception):
                self._loop.run_until_complete(server.wait_closed())
            self._loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            first = await asyncio.wait_for(reader.read(65536), 30)
        except (TimeoutError, ConnectionError):
            writer.close()
            return
        first = _one_request_per_connection(first)
        line = first.split(b"\r\n", 1)[0].decode("latin-1")
        fault = self.plan(self.connections, line)
        if fault not in ("pass", "slow"):
            self.injected[fault] += 1
            self.injected_by_method[(fault, line.split(" ", 1)[0])] += 1
        try:
            if fault == "503":
                writer.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 11\r\nConnection: close\r\n\r\n"
                             b"injected 503")
                await writer.drain()
                return
            if fault == "429":  # a rate limit that names its wait, as PyPI's and registries' do
                writer.write(f"HTTP/1.1 429 Too Many Requests\r\nRetry-After: {self.retry_after}\r\n".encode() +
                             b"Content-Length: 12\r\n"
                             b"Connection: close\r\n\r\ninjected 429")
                await writer.drain()
                return
            if fault == "drop":  # the finally's close: a FIN, no answer (a reset is an RST)
                return
            if fault == "lost":
                await self._forward_until_answered(first, reader)
            if fault == "cut-request":
                await self._send_part(first)
            if fault in ("cut-answer", "cut-body"):
                await self._answer_part(first, reader, writer, whole_head=fault == "cut-body")
            if fault in ("reset", "lost", "cut-request", "cut-answer", "cut-body"):
                _reset(writer)
                return
            if fault == "stall":
                await asyncio.sleep(self.stall_seconds)
                return
            if fault == "slow":
                await asyncio.sleep(self.slow_seconds)
            await self._pipe(first, reader, writer)
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _send_on(self, first: bytes, reader: asyncio.StreamReader
                       ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, asyncio.Future[None]] | None:
        """A connection to the server with `first` sent and the rest of the client's request being
        copied on (the future; cancel it when done); None when the server cannot be reached."""
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            return None
        up_writer.write(first)

        async def send() -> None:
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                while data := await reader.read(65536):
                    up_writer.write(data)
                    await up_writer.drain()

        return up_reader, up_writer, asyncio.ensure_future(send())

    async def _forward_until_answered(self, first: bytes, reader: asyncio.StreamReader) -> None:
        """Send the request on to the server and wait for the first byte of its answer: it has acted."""
        opened = await self._send_on(first, reader)
        if opened is None:
            return
        up_reader, up_writer, sending = opened
        try:
            await asyncio.wait_for(up_reader.read(1), 60)
        except (TimeoutError, ConnectionError):
            pass
        finally:
            sending.cancel()
            with contextlib.suppress(Exception):
                up_writer.close()

    async def _send_part(self, first: bytes) -> None:
        """The headers and a part of the body (of what the client sent so far), then a reset."""
        head, _, body = first.partition(b"\r\n\r\n")
        try:
            _, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            return
        up_writer.write(head + b"\r\n\r\n" + body[:self._rng.randint(0, max(0, len(body) - 1))])
        with contextlib.suppress(Exception):
            await up_writer.drain()
            await asyncio.sleep(0.05)
        _reset(up_writer)
        with contextlib.suppress(Exception):
            up_writer.close()

    async def _answer_part(self, first: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                           whole_head: bool = False) -> None:
        """The whole request on to the server; to the client, only a part of the answer's first bytes
        (`whole_head`: all of its headers, then a part of the body's first bytes)."""
        opened = await self._send_on(first, reader)
        if opened is None:
            return
        up_reader, up_writer, sending = opened
        try:
            head = await asyncio.wait_for(up_reader.readuntil(b"\r\n\r\n"), 60) if whole_head else b""
            answer = await asyncio.wait_for(up_reader.read(65536), 60)
            writer.write(head + answer[:self._rng.randint(1, max(1, len(answer) - 1))])
            await writer.drain()
            await asyncio.sleep(0.05)  # let the part reach the client before the reset discards it
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            sending.cancel()
            with contextlib.suppress(Exception):
                up_writer.close()

    async def _pipe(self, first: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            return
        up_writer.write(first)

        async def copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                with contextlib.suppress(Exception):
                    dst.close()

        await asyncio.gather(copy(reader, up_writer), copy(up_reader, writer))


def _one_request_per_connection(first: bytes) -> bytes:
    """The request with `Connection: close` in place of any Connection header it had."""
    head, sep, body = first.partition(b"\r\n\r\n")
    if not sep:  # the headers did not arrive whole in the first read: pass them on as they are
        return first
    lines = [line for line in head.split(b"\r\n") if not line.lower().startswith(b"connection:")]
    return b"\r\n".join([*lines, b"Connection: close"]) + sep + body


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST instead of FIN: SO_LINGER with a zero timeout."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
