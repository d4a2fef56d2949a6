"""A child's environment is copied whole while another thread sets and removes a variable."""

from __future__ import annotations

import threading

from shipyard.plumbing import command
from shipyard.wheel.repair import source_date_epoch


def test_the_environment_a_command_gets_is_copied_whole_while_a_wheel_is_packed_beside_it():
    """Wheels of several Pythons are packed side by side: packing sets SOURCE_DATE_EPOCH for a
    moment and removes it, while another thread starts a build (command.run copies the process
    environment). Copied without the lock, a variable removed between its name and its value
    raised KeyError('SOURCE_DATE_EPOCH') and failed a cuda11 cell of the suite."""
    stop = threading.Event()

    def pack_again_and_again() -> None:
        while not stop.is_set():
            with source_date_epoch(1):
                pass

    packer = threading.Thread(target=pack_again_and_again)
    packer.start()
    failures = []
    try:
        for _ in range(20000):
            try:
                command.environ_snapshot()
            except KeyError as exc:
                failures.append(exc)
    finally:
        stop.set()
        packer.join(timeout=30)
    assert failures == []
