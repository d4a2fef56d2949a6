"""The local worker processes of one node: start with the rendezvous' env, watch, stop."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence

from emberelastic.rendezvous import RoundInfo


def _die_with_parent() -> None:
    # Runs in the child before exec: if the agent is SIGKILLed, its workers go too, so a
    # vanished node never leaves processes behind (Linux only).
    os.setsid()
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except Exception:
            pass


class WorkerGroup:
    def __init__(self, command: Sequence[str], nproc: int, max_restarts: int, run_id: str,
                 token: bytes = b""):
        self.command = list(command)
        self.token = token
        self.nproc = nproc
        self.max_restarts = max_restarts
        self.run_id = run_id
        self.procs: List[subprocess.Popen] = []

    def environment(self, info: RoundInfo, local_rank: int) -> Dict[str, str]:
        env = dict(os.environ)
        env.update({
            "RANK": str(info.rank_offset + local_rank),
            "LOCAL_RANK": str(local_rank),
            "WORLD_SIZE": str(info.world_size),
            "LOCAL_WORLD_SIZE": str(self.nproc),
            "GROUP_RANK": str(info.group_rank),
            "GROUP_WORLD_SIZE": str(info.num_nodes),
            "MASTER_ADDR": info.master_addr,
            "MASTER_PORT": str(info.master_port),
            "EMBER_ELASTIC_RESTART_COUNT": str(info.restart_count),
            "TORCHELASTIC_RESTART_COUNT": str(info.restart_count),
            "MAX_RESTARTS": str(self.max_restarts),
            "EMBER_ELASTIC_RUN_ID": self.run_id,
            # The agent of node 0 serves MASTER_PORT; rank 0 must connect, not bind it.
            "TORCHELASTIC_USE_AGENT_STORE": "True",
            "PYTHONUNBUFFERED": "1",
        })
        # The job token reaches the workers through their environment only (never argv):
        # their store and rank-to-rank connections prove it.
        if self.token:
            env["EMBER_RDZV_TOKEN"] = self.token.decode()
        else:
            env.pop("EMBER_RDZV_TOKEN", None)
        return env

    def start(self, info: RoundInfo) -> None:
        self.procs = [subprocess.Popen(self.command, env=self.environment(info, lr),
                                       preexec_fn=_die_with_parent if os.name == "posix" else None)
                      for lr in range(self.nproc)]

    def poll(self) -> Optional[str]:
        """'failed' if any worker failed, 'succeeded' if all exited 0, else None (running)."""
        codes = [p.poll() for p in self.procs]
        if any(c not in (None, 0) for c in codes):
            return "failed"
        if all(c == 0 for c in codes):
            return "succeeded"
        return None

    def exit_codes(self) -> List[Optional[int]]:
        return [p.poll() for p in self.procs]

    def stop(self, grace_period: float) -> None:
        """SIGTERM every worker's process group, then SIGKILL whatever is left after the grace period."""
        self._signal_all(signal.SIGTERM)
        end = time.monotonic() + grace_period
        while time.monotonic() < end and any(p.poll() is None for p in self.procs):
            time.sleep(0.05)
        self._signal_all(signal.SIGKILL)
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.procs = []

    def _signal_all(self, sig: int) -> None:
        for p in self.procs:
            try:
                if os.name == "posix":
                    os.killpg(p.pid, sig)  # the worker and anything it spawned
                elif p.poll() is None:
                    p.kill() if sig == getattr(signal, "SIGKILL", None) else p.terminate()
            except (ProcessLookupError, PermissionError):
                pass
