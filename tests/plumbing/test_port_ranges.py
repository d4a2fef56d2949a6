"""Port ranges of cells tested side by side: claimed by an flock, never shared, below the kernel's
ephemeral ports, and claimable across processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from shipyard.plumbing.port_ranges import SLOTS, claimed_port_range


def _ephemeral_low() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


def test_claims_held_at_once_get_disjoint_ranges_below_the_ephemeral_ports(tmp_path):
    with claimed_port_range(tmp_path) as first, claimed_port_range(tmp_path) as second:
        assert set(first).isdisjoint(second)
        assert max(second) < _ephemeral_low() and min(first) >= 1024
    with claimed_port_range(tmp_path) as again:  # released: the first slot is free again
        assert again == first


def test_a_claim_held_by_another_process_is_not_handed_out(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; "
         "from shipyard.plumbing.port_ranges import claimed_port_range\n"
         f"with claimed_port_range(Path({str(tmp_path)!r})) as r:\n"
         "    print(r.start, flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        theirs = int(holder.stdout.readline())
        with claimed_port_range(tmp_path) as mine:
            assert theirs not in mine
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


def test_every_slot_fits_below_the_ephemeral_ports(tmp_path):
    from contextlib import ExitStack

    with ExitStack() as stack:
        ranges = [stack.enter_context(claimed_port_range(tmp_path)) for _ in range(SLOTS)]
    assert len({r.start for r in ranges}) == SLOTS
    assert max(r.stop for r in ranges) <= _ephemeral_low()
