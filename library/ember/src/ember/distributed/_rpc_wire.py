"""The RPC wire: a mutual HMAC challenge-response, then length-prefixed pickle frames of bounded size.

A connection carries no pickle until both ends proved they know the group's secret: the
server sends a fresh nonce, the client answers with its own nonce and an HMAC-SHA256 over
both, and the server answers with an HMAC over both in the other order. Nonces from each
side make a recorded handshake useless on another connection. Frames larger than the
receiver's limit are refused from their 8-byte header, before a byte of the body is read.
"""
from __future__ import annotations

import hashlib
import hmac
import pickle
import secrets
import socket
import struct
import threading
import time
from typing import Any, Optional

from ember.distributed.errors import DistributedError

MAGIC = b"ember-rpc/1\n"
NONCE_SIZE = 32
DIGEST_SIZE = hashlib.sha256().digest_size
FRAME = struct.Struct("<Q")
SECRET_SIZE = 32


class AuthenticationError(DistributedError):
    """The peer did not prove it knows the group's secret (or is not an ember RPC agent)."""


class FrameTooLarge(DistributedError):
    """A frame's header announced more bytes than the receiver accepts."""

    def __init__(self, size: int, limit: int):
        super().__init__(f"rpc: a message of {size} bytes exceeds the limit of {limit} bytes "
                         "(init_rpc(max_message_size=...))")
        self.size, self.limit = size, limit


def new_secret() -> bytes:
    return secrets.token_bytes(SECRET_SIZE)


def _mac(secret: bytes, role: bytes, first: bytes, second: bytes) -> bytes:
    return hmac.new(secret, role + first + second, hashlib.sha256).digest()


def recv_exact(sock: socket.socket, size: int) -> Optional[bytes]:
    """Exactly ``size`` bytes, or None if the peer closed first."""
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def accept_handshake(sock: socket.socket, secret: bytes, timeout: float) -> None:
    """Server side: raises AuthenticationError unless the client proves the secret within ``timeout``."""
    sock.settimeout(timeout)
    try:
        server_nonce = secrets.token_bytes(NONCE_SIZE)
        sock.sendall(MAGIC + server_nonce)
        if recv_exact(sock, len(MAGIC)) != MAGIC:  # a stranger is turned away at its first bytes
            raise AuthenticationError("rpc: the peer did not speak the ember RPC handshake")
        answer = recv_exact(sock, NONCE_SIZE + DIGEST_SIZE)
        if answer is None:
            raise AuthenticationError("rpc: the peer hung up during the handshake")
        client_nonce, proof = answer[:NONCE_SIZE], answer[NONCE_SIZE:]
        if not hmac.compare_digest(proof, _mac(secret, b"client", server_nonce, client_nonce)):
            raise AuthenticationError("rpc: the peer's handshake does not prove the group's secret")
        sock.sendall(_mac(secret, b"server", client_nonce, server_nonce))
    except socket.timeout:
        raise AuthenticationError(f"rpc: no handshake within {timeout:g} s") from None
    sock.settimeout(None)


def offer_handshake(sock: socket.socket, secret: bytes, timeout: float) -> None:
    """Client side: proves the secret and checks that the server knows it too."""
    sock.settimeout(timeout)
    try:
        hello = recv_exact(sock, len(MAGIC) + NONCE_SIZE)
        if hello is None or not hello.startswith(MAGIC):
            raise AuthenticationError("rpc: the peer is not an ember RPC agent")
        server_nonce = hello[len(MAGIC):]
        client_nonce = secrets.token_bytes(NONCE_SIZE)
        sock.sendall(MAGIC + client_nonce + _mac(secret, b"client", server_nonce, client_nonce))
        proof = recv_exact(sock, DIGEST_SIZE)
        if proof is None:
            raise AuthenticationError("rpc: the peer refused our handshake (a different secret?)")
        if not hmac.compare_digest(proof, _mac(secret, b"server", client_nonce, server_nonce)):
            raise AuthenticationError("rpc: the peer's handshake does not prove the group's secret")
    except socket.timeout:
        raise AuthenticationError(f"rpc: no handshake within {timeout:g} s") from None
    sock.settimeout(None)


def encode(message: Any, limit: int) -> bytes:
    """The frame for ``message``; FrameTooLarge if its pickle exceeds ``limit``."""
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    if len(payload) > limit:
        raise FrameTooLarge(len(payload), limit)
    return FRAME.pack(len(payload)) + payload


def send(sock: socket.socket, lock: threading.Lock, frame: bytes) -> None:
    with lock:
        sock.sendall(frame)


def receive(sock: socket.socket, limit: int) -> Optional[Any]:
    """The next message, None at a clean end; FrameTooLarge before reading an oversized body."""
    header = recv_exact(sock, FRAME.size)
    if header is None:
        return None
    (size,) = FRAME.unpack(header)
    if size > limit:
        raise FrameTooLarge(size, limit)
    payload = recv_exact(sock, size)
    return None if payload is None else pickle.loads(payload)


def drain_and_close(sock: socket.socket, seconds: float = 2.0) -> None:
    """Half-closes, discards what the peer still sends for up to ``seconds``, then closes.

    Closing with unread bytes would reset the connection and could destroy a last frame
    (a refusal) before the peer reads it.
    """
    try:
        sock.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            sock.settimeout(left)
            if not sock.recv(1 << 16):
                break
    except OSError:
        pass
    finally:
        sock.close()
