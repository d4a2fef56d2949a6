"""Launcher options, resolved once into a frozen LaunchConfig."""
from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Tuple

#: The job token's environment variable (the same one ember.distributed.TCPStore reads).
TOKEN_ENV = "EMBER_RDZV_TOKEN"


class UsageError(ValueError):
    """Bad launcher options; ember-run exits with code 2."""


def parse_nnodes(value: str) -> Tuple[int, int]:
    """'N' -> (N, N); 'MIN:MAX' -> (MIN, MAX), with 1 <= MIN <= MAX."""
    try:
        parts = [int(p) for p in str(value).split(":")]
    except ValueError:
        raise UsageError(f"--nnodes must be N or MIN:MAX, got {value!r}") from None
    if len(parts) == 1:
        parts = parts * 2
    if len(parts) != 2 or parts[0] < 1 or parts[0] > parts[1]:
        raise UsageError(f"--nnodes must be N or MIN:MAX with 1 <= MIN <= MAX, got {value!r}")
    return parts[0], parts[1]


def parse_endpoint(value: str) -> Tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--rdzv-endpoint must be host:port, got {value!r}")
    return host, int(port)


def is_loopback(host: str) -> bool:
    """True when ``host`` names this machine's loopback (resolved here, without importing ember)."""
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


def read_token(token_file: Optional[str]) -> Optional[bytes]:
    """The job token from --rdzv-token-file, else $EMBER_RDZV_TOKEN, else None.

    Never from the command line itself (argv shows in ``ps``), and never printed.
    """
    if token_file is not None:
        try:
            token = Path(token_file).read_bytes().strip()
        except OSError as err:
            raise UsageError(f"--rdzv-token-file {token_file}: cannot read it ({err.strerror})") from None
        if not token:
            raise UsageError(f"--rdzv-token-file {token_file} is empty; put the job's token in it")
        try:
            token.decode("utf-8")  # handed to the workers through their environment
        except UnicodeDecodeError:
            raise UsageError(f"--rdzv-token-file {token_file} is not text; use e.g. the output of "
                             "`openssl rand -hex 32`") from None
        return token
    token = os.environ.get(TOKEN_ENV, "").strip()
    return token.encode() if token else None


@dataclass(frozen=True)
class LaunchConfig:
    min_nodes: int
    max_nodes: int
    nproc_per_node: int
    max_restarts: int
    monitor_interval: float
    rdzv_host: Optional[str]  # None with --standalone: a local store on a free port
    rdzv_port: int
    rdzv_id: str
    rdzv_timeout: float
    last_call: float
    grace_period: float
    command: Tuple[str, ...]  # the worker command line, interpreter included
    run_as_module: bool = False
    # Where this node's rendezvous store listens: None for loopback (the only choice without
    # --rdzv-bind), else an address of this host or "0.0.0.0".
    rdzv_bind: Optional[str] = None
    # The job's secret every store and rank-to-rank connection proves; kept out of repr so
    # that no log or traceback shows it.
    rdzv_token: bytes = field(default=b"", repr=False)

    def __post_init__(self):
        if self.nproc_per_node < 1:
            raise UsageError("--nproc-per-node must be >= 1")
        if self.max_restarts < 0:
            raise UsageError("--max-restarts must be >= 0")
        if self.monitor_interval <= 0:
            raise UsageError("--monitor-interval must be > 0")
        if not self.command:
            raise UsageError("the training script (or -m module) is missing")
