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


def _race(change, copy, rounds: int = 20000) -> list[Exception]:
    """`copy()` `rounds` times while another thread runs `change()` in a loop: the errors seen."""
    stop = threading.Event()

    def again_and_again() -> None:
        while not stop.is_set():
            change()

    changer = threading.Thread(target=again_and_again)
    changer.start()
    failures: list[Exception] = []
    try:
        for _ in range(rounds):
            try:
                copy()
            except KeyError as exc:
                failures.append(exc)
    finally:
        stop.set()
        changer.join(timeout=30)
    return failures


def test_a_test_venv_environment_is_copied_whole_while_a_wheel_is_packed_beside_it(tmp_path):
    """The cells' test environments (testing/venv.py) are made while other cells pack wheels:
    their copy of the environment takes the lock too (it read os.environ bare, the same race)."""
    from shipyard.testing.venv import _isolated_env

    def pack() -> None:
        with source_date_epoch(1):
            pass

    assert _race(pack, lambda: _isolated_env(tmp_path), rounds=5000) == []


def test_patched_environ_sets_and_restores_under_the_lock_and_leaves_the_rest_alone(monkeypatch):
    """The conda builds' settings (PATH for patchelf, the recipes' variables) go through
    command.patched_environ: a copy taken meanwhile is whole, and afterwards the environment is
    what it was, a variable that was unset unset again."""
    monkeypatch.setenv("SHIPYARD_TEST_KEPT", "before")
    monkeypatch.delenv("SHIPYARD_TEST_NEW", raising=False)

    def render() -> None:
        with command.patched_environ({"SHIPYARD_TEST_NEW": "x", "SHIPYARD_TEST_KEPT": "during"}):
            pass

    assert _race(render, command.environ_snapshot, rounds=5000) == []
    with command.patched_environ({"SHIPYARD_TEST_NEW": "x", "SHIPYARD_TEST_KEPT": None}):
        seen = command.environ_snapshot()
        assert seen["SHIPYARD_TEST_NEW"] == "x" and "SHIPYARD_TEST_KEPT" not in seen
    after = command.environ_snapshot()
    assert after["SHIPYARD_TEST_KEPT"] == "before" and "SHIPYARD_TEST_NEW" not in after
