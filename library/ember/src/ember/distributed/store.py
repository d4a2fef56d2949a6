"""TCPStore: the rendezvous key-value store (server thread on one process, clients everywhere)."""
from __future__ import annotations

import datetime
import ipaddress
import os
import socket
from typing import Iterable, Optional, Union

from ember import _distributed as _C

Timeout = Union[float, int, datetime.timedelta]


def seconds(timeout: Timeout) -> float:
    """Normalises a timeout given as seconds or a timedelta to float seconds."""
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


#: The job's shared secret: every connection to a store (and between ranks) proves it
#: holds it. Given to processes through the environment, never on a command line.
TOKEN_ENV = "EMBER_RDZV_TOKEN"
#: Where a store's master listens when its host is not loopback (an address of this host,
#: or 0.0.0.0 for every interface); the ``bind=`` argument of TCPStore wins over it.
BIND_ENV = "EMBER_RDZV_BIND"


def is_loopback(host: str) -> bool:
    """True when ``host`` names this machine's loopback interface (it is resolved if needed)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        return ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
    except OSError:
        return False


def token_from_env() -> bytes:
    """The job token from ``EMBER_RDZV_TOKEN`` (empty without one)."""
    return os.environ.get(TOKEN_ENV, "").encode()


def _as_token(token: Union[None, bytes, str]) -> bytes:
    if token is None:
        return token_from_env()
    return token.encode() if isinstance(token, str) else bytes(token)


def _bind_address(host: str, bind: Optional[str]) -> str:
    """Where a master listens: loopback for a loopback host, else what the caller stated."""
    if bind is None:
        bind = os.environ.get(BIND_ENV) or None
    if bind is not None:
        return "" if bind in ("", "0.0.0.0") else bind
    if host in ("", "0.0.0.0") or not is_loopback(host):
        raise ValueError(
            f"TCPStore(is_master=True) for host {host!r} would listen beyond loopback; state the "
            f"address to listen on with bind=ADDRESS (or the {BIND_ENV} environment variable; "
            "'0.0.0.0' for every interface); ember-run takes it as --rdzv-bind ADDRESS")
    return "127.0.0.1"


class TCPStore:
    """A store client; with ``is_master=True`` this process also serves the store on ``port``.

    ``port=0`` with ``is_master=True`` picks a free port (read it back from ``.port``).
    Every call takes the store's timeout unless given one, and raises
    ``DistributedTimeoutError`` naming the keys that did not appear.

    A master listens on loopback when ``host_name`` is loopback; otherwise it needs ``bind``
    (an address of this host, or ``'0.0.0.0'`` for every interface) and a token. Every
    connection proves it holds ``token`` (bytes or str; default ``$EMBER_RDZV_TOKEN``) in a
    challenge-response handshake; a store refuses a peer with another token or none.
    """

    def __init__(self, host_name: str, port: int, world_size: Optional[int] = None,
                 is_master: bool = False, timeout: Timeout = 300.0, *,
                 token: Union[None, bytes, str] = None, bind: Optional[str] = None):
        self.host = host_name
        self.world_size = world_size
        secret = _as_token(token)
        self._server = (_C.StoreServer(_bind_address(host_name, bind), int(port), secret)
                        if is_master else None)
        self.port = self._server.port if self._server is not None else int(port)
        connect_host = "127.0.0.1" if is_master and host_name in ("", "0.0.0.0") else host_name
        try:
            self.client = _C.StoreClient(connect_host, self.port, seconds(timeout), secret)
        except BaseException:
            if self._server is not None:
                self._server.stop()
            raise

    @property
    def is_master(self) -> bool:
        return self._server is not None

    @property
    def timeout(self) -> float:
        return self.client.timeout

    @property
    def rejected_connections(self) -> int:
        """Connections the local server dropped for protocol violations (0 on clients)."""
        return self._server.rejected_connections if self._server is not None else 0

    def set(self, key: str, value: Union[bytes, str]) -> None:
        self.client.set(key, value)

    def get(self, key: str, timeout: Optional[Timeout] = None) -> bytes:
        """Value of ``key``, waiting for it to be set."""
        return self.client.get(key, None if timeout is None else seconds(timeout))

    def add(self, key: str, amount: int) -> int:
        """Atomically adds ``amount`` to the integer at ``key`` (0 if unset); returns the sum."""
        return self.client.add(key, int(amount))

    def compare_set(self, key: str, expected: Union[bytes, str], desired: Union[bytes, str]) -> bytes:
        """Sets ``desired`` if the value equals ``expected``; returns the value afterwards."""
        return self.client.compare_set(key, expected, desired)

    def wait(self, keys: Iterable[str], timeout: Optional[Timeout] = None) -> None:
        self.client.wait(list(keys), None if timeout is None else seconds(timeout))

    def check(self, keys: Iterable[str]) -> bool:
        return self.client.check(list(keys))

    def delete_key(self, key: str) -> bool:
        return self.client.delete_key(key)

    def num_keys(self) -> int:
        return self.client.num_keys()

    def close(self) -> None:
        """Stops the local server, if this process hosts one."""
        if self._server is not None:
            self._server.stop()
