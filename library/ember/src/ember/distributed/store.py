"""TCPStore: the rendezvous key-value store (server thread on one process, clients everywhere)."""
from __future__ import annotations

import datetime
from typing import Iterable, Optional, Union

from ember import _distributed as _C

Timeout = Union[float, int, datetime.timedelta]


def seconds(timeout: Timeout) -> float:
    """Normalises a timeout given as seconds or a timedelta to float seconds."""
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


def _bind_host(host: str) -> str:
    # Loopback endpoints bind loopback only; anything else listens on every interface
    # so that peers reaching us through any address of this host get through.
    return "127.0.0.1" if host in ("127.0.0.1", "localhost") else ""


class TCPStore:
    """A store client; with ``is_master=True`` this process also serves the store on ``port``.

    ``port=0`` with ``is_master=True`` picks a free port (read it back from ``.port``).
    Every call takes the store's timeout unless given one, and raises
    ``DistributedTimeoutError`` naming the keys that did not appear.
    """

    def __init__(self, host_name: str, port: int, world_size: Optional[int] = None,
                 is_master: bool = False, timeout: Timeout = 300.0):
        self.host = host_name
        self.world_size = world_size
        self._server = _C.StoreServer(_bind_host(host_name), int(port)) if is_master else None
        self.port = self._server.port if self._server is not None else int(port)
        connect_host = "127.0.0.1" if is_master and host_name in ("", "0.0.0.0") else host_name
        self.client = _C.StoreClient(connect_host, self.port, seconds(timeout))

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
