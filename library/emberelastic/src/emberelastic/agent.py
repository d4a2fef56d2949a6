"""The elastic agent: rendezvous, run the local workers, restart on failure or membership change."""
from __future__ import annotations

import signal
import sys
import time
from typing import Optional

from ember.distributed import DistributedError

from emberelastic.config import LaunchConfig
from emberelastic.rendezvous import Rendezvous, RendezvousError, RoundInfo, open_store
from emberelastic.workers import WorkerGroup

EXIT_SUCCESS = 0
EXIT_FAILED = 1


class _Stop(Exception):
    def __init__(self, signum: int):
        self.signum = signum


def _log(message: str) -> None:
    print(f"[ember-run] {message}", file=sys.stderr, flush=True)


class ElasticAgent:
    def __init__(self, config: LaunchConfig):
        self.config = config
        self.store = open_store(config.rdzv_host, config.rdzv_port, config.rdzv_timeout,
                                token=config.rdzv_token, bind=config.rdzv_bind)
        self.rdzv = Rendezvous(self.store, config.rdzv_id, config.min_nodes, config.max_nodes,
                               config.nproc_per_node, config.rdzv_timeout, config.last_call,
                               token=config.rdzv_token)
        self.workers = WorkerGroup(config.command, config.nproc_per_node, config.max_restarts, config.rdzv_id,
                                   token=config.rdzv_token)
        self._signal: Optional[int] = None

    def _on_signal(self, signum, frame) -> None:
        self._signal = signum
        raise _Stop(signum)

    def run(self) -> int:
        """Runs the job to the end; returns the launcher's exit code."""
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            return self._run()
        except _Stop as stop:
            _log(f"received signal {stop.signum}; stopping workers")
            return 128 + stop.signum
        finally:
            # Shutting down must not be cut short by a second signal.
            for s in previous:
                signal.signal(s, signal.SIG_IGN)
            self.workers.stop(self.config.grace_period)
            self._leave()
            for s, handler in previous.items():
                signal.signal(s, handler)

    def _leave(self) -> None:
        try:
            self.rdzv.mark_exited()
            if self.store.is_master:
                # Other agents still read the outcome from our store; give them a moment.
                self.rdzv.wait_for_exits(self._nodes_seen, timeout=10)
        except DistributedError:
            pass
        self.rdzv.close_worker_store()
        self.store.close()

    _nodes_seen = 1

    def _run(self) -> int:
        while True:
            try:
                info = self.rdzv.next_round(lambda: self._signal is not None)
            except RendezvousError as err:
                _log(f"rendezvous failed: {err}")
                return EXIT_FAILED
            self._nodes_seen = max(self._nodes_seen, info.num_nodes)
            _log(f"round {info.round}: node {info.group_rank}/{info.num_nodes}, ranks "
                 f"{info.rank_offset}..{info.rank_offset + self.config.nproc_per_node - 1} of {info.world_size}, "
                 f"restart {info.restart_count}")
            self.workers.start(info)
            outcome = self._monitor(info)
            self.rdzv.close_worker_store()
            if outcome == "succeeded":
                return EXIT_SUCCESS
            if outcome == "failed":
                return EXIT_FAILED
            # "restart": a new round was requested (failure here or elsewhere, or a new node).

    def _monitor(self, info: RoundInfo) -> str:
        finished = False
        while True:
            time.sleep(self.config.monitor_interval)
            why = self.rdzv.job_failed()
            if why:
                _log(why)
                self.workers.stop(self.config.grace_period)
                return "failed"
            state = None if finished else self.workers.poll()
            if state == "failed":
                codes = self.workers.exit_codes()
                self.workers.stop(self.config.grace_period)
                failures = self.rdzv.record_failure()
                if failures > self.config.max_restarts:
                    msg = (f"workers failed (exit codes {codes}) and the {self.config.max_restarts} "
                           f"allowed restarts are used up")
                    self.rdzv.mark_job_failed(msg)
                    _log(msg)
                    return "failed"
                _log(f"worker failure (exit codes {codes}); restarting the group "
                     f"({failures}/{self.config.max_restarts})")
                self.rdzv.request_new_round(info.round)
                return "restart"
            if state == "succeeded":
                finished = True
                self.rdzv.mark_done(info)
            if finished and self.rdzv.all_done(info):
                _log("all workers succeeded")
                return "succeeded"
            if self.rdzv.current_round() != info.round:
                _log("the group changed (a node joined, left or failed); restarting workers")
                self.workers.stop(self.config.grace_period)
                return "restart"
