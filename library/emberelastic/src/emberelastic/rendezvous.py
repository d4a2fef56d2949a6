"""Rendezvous rounds on ember's TCP store.

Keys live under ``emberelastic/<rdzv_id>/``. ``round`` is the open round. An agent joins
round r by taking a slot number (``add``); the round closes (first ``compare_set`` wins)
when MAX nodes joined, or when at least MIN joined and ``last_call`` seconds passed. An
agent that finds its round closed without it, or that must restart, bumps ``round`` so
every agent re-forms the group in the next round.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

from ember.distributed import DistributedError, DistributedTimeoutError, TCPStore


class RendezvousError(RuntimeError):
    """The group could not be formed (timeout, or the job was marked failed)."""


@dataclass(frozen=True)
class RoundInfo:
    round: int
    group_rank: int  # this node's rank among the nodes of the round
    num_nodes: int
    rank_offset: int  # global rank of this node's local rank 0
    world_size: int
    restart_count: int
    master_addr: str
    master_port: int


def open_store(host: Optional[str], port: int, timeout: float, token: bytes = b"",
               bind: Optional[str] = None) -> TCPStore:
    """Hosts the store if this node can bind ``bind``:port (loopback when None), else connects
    to whoever does. Every connection proves it holds ``token``."""
    if host is None:  # standalone
        return TCPStore("127.0.0.1", 0, is_master=True, timeout=timeout, token=token)
    try:
        return TCPStore(host, port, is_master=True, timeout=timeout, token=token,
                        bind=bind if bind is not None else "127.0.0.1")
    except DistributedError:
        # Another agent (here or on the host that owns the address) already serves it.
        return TCPStore(host, port, is_master=False, timeout=timeout, token=token)


class Rendezvous:
    def __init__(self, store: TCPStore, run_id: str, min_nodes: int, max_nodes: int,
                 nproc_per_node: int, timeout: float, last_call: float, token: bytes = b""):
        self.store = store
        self.token = token
        self.prefix = f"emberelastic/{run_id}/"
        self.min_nodes, self.max_nodes = min_nodes, max_nodes
        self.nproc = nproc_per_node
        self.timeout, self.last_call = timeout, last_call
        # The store the workers of the current round form their group through; served by the
        # agent of node 0 for the whole round (MASTER_ADDR/MASTER_PORT).
        self.worker_store: Optional[TCPStore] = None

    def key(self, name: str) -> str:
        return self.prefix + name

    def current_round(self) -> int:
        return self.store.add(self.key("round"), 0)

    def request_new_round(self, after: int) -> None:
        """Moves the job past round ``after`` (no-op if someone already did)."""
        self.current_round()  # makes sure the key exists
        self.store.compare_set(self.key("round"), str(after), str(after + 1))

    def record_failure(self) -> int:
        return self.store.add(self.key("failures"), 1)

    def mark_job_failed(self, why: str) -> None:
        self.store.set(self.key("failed"), why)

    def job_failed(self) -> Optional[str]:
        if self.store.check([self.key("failed")]):
            return self.store.get(self.key("failed")).decode()
        return None

    def next_round(self, stop_requested=lambda: False) -> RoundInfo:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if stop_requested():
                raise RendezvousError("stop requested during rendezvous")
            why = self.job_failed()
            if why:
                raise RendezvousError(why)
            r = self.current_round()
            if self.store.check([self.key(f"r{r}/closed")]):
                # Closed without us: ask everyone to re-form the group with us in it.
                self.request_new_round(r)
                time.sleep(0.05)
                continue
            slot = self.store.add(self.key(f"r{r}/joined"), 1) - 1
            self.store.set(self.key(f"r{r}/nproc/{slot}"), str(self.nproc))
            info = self._wait_for_close(r, slot, deadline, stop_requested)
            if info is not None:
                return info
        raise RendezvousError(f"rendezvous did not complete within {self.timeout:g} s "
                              f"(needs at least {self.min_nodes} nodes)")

    def _wait_for_close(self, r: int, slot: int, deadline: float, stop_requested) -> Optional[RoundInfo]:
        enough_since = None
        closed_key = self.key(f"r{r}/closed")
        while time.monotonic() < deadline:
            if stop_requested():
                raise RendezvousError("stop requested during rendezvous")
            if self.store.check([closed_key]):
                break
            if self.current_round() != r:
                return None
            joined = self.store.add(self.key(f"r{r}/joined"), 0)
            if joined >= self.min_nodes and enough_since is None:
                enough_since = time.monotonic()
            if joined >= self.max_nodes or (enough_since is not None and
                                             time.monotonic() - enough_since >= self.last_call):
                self.store.compare_set(closed_key, "", str(min(joined, self.max_nodes)))
                break
            time.sleep(0.05)
        else:
            raise RendezvousError(f"rendezvous round {r} timed out with too few nodes")
        num_nodes = int(self.store.get(closed_key))
        if slot >= num_nodes:
            # Arrived as the round closed: the next round includes us (if below MAX).
            if num_nodes >= self.max_nodes:
                time.sleep(0.2)  # the job is full; wait for a member to leave
            else:
                self.request_new_round(r)
            return None
        nprocs = [int(self.store.get(self.key(f"r{r}/nproc/{i}"))) for i in range(num_nodes)]
        restart_count = self.store.add(self.key("failures"), 0)
        master_key = self.key(f"r{r}/master")
        if slot == 0:
            # Serve the round's store here, on a port the kernel picks and that stays bound. A
            # port found free, released and bound again by rank 0 later can be taken in between
            # (or met by a peer's connect to itself), and the round then hangs until its timeout.
            self.close_worker_store()
            host = self.store.client.local_address()
            # It listens only on the address it publishes: the one this node reaches the
            # rendezvous store through (loopback for a loopback rendezvous).
            self.worker_store = TCPStore(host, 0, is_master=True, timeout=self.timeout, token=self.token,
                                         bind=host)
            self.store.set(master_key, f"{host}:{self.worker_store.port}")
        master_host, _, master_port = self.store.get(master_key).decode().rpartition(":")
        return RoundInfo(round=r, group_rank=slot, num_nodes=num_nodes, rank_offset=sum(nprocs[:slot]),
                         world_size=sum(nprocs), restart_count=restart_count,
                         master_addr=master_host, master_port=int(master_port))

    # ---- end of a round ----------------------------------------------------------------
    def close_worker_store(self) -> None:
        """Stops serving the round's store (its workers are gone or done)."""
        if self.worker_store is not None:
            self.worker_store.close()
            self.worker_store = None

    def mark_done(self, info: RoundInfo) -> None:
        self.store.set(self.key(f"r{info.round}/done/{info.group_rank}"), "1")

    def all_done(self, info: RoundInfo) -> bool:
        return self.store.check([self.key(f"r{info.round}/done/{i}") for i in range(info.num_nodes)])

    def mark_exited(self) -> None:
        try:
            self.store.add(self.key("exited"), 1)
        except DistributedError:
            pass

    def wait_for_exits(self, count: int, timeout: float) -> None:
        """The store's host lingers until the other agents stopped needing it."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                if self.store.add(self.key("exited"), 0) >= count:
                    return
            except (DistributedError, DistributedTimeoutError):
                return
            time.sleep(0.05)
