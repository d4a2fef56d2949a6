"""Every file every command reads, broken by hypothesis (tests/input_fuzz.py says how and what
is checked). The suite runs a small budget; `nox -s fuzz` a long one (SHIPYARD_FUZZ_EXAMPLES),
printing the tally by command and class. The cases the fuzzer found are fixed examples below."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir
from input_fuzz import (
    ESCAPE_DIR,
    Mutation,
    Tally,
    Target,
    World,
    environment_for_fuzzing,
    make_world,
    mutations,
    run_example,
)

EXAMPLES = int(os.environ.get("SHIPYARD_FUZZ_EXAMPLES", "60"))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    # hypothesis keeps its files (.hypothesis/) beside the current folder unless told: never the checkout.
    set_hypothesis_home_dir(str(tmp_path_factory.mktemp("hypothesis")))
    saved = {k: os.environ.get(k) for k in environment_for_fuzzing()}
    for key, value in environment_for_fuzzing().items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    try:
        yield make_world(tmp_path_factory.mktemp("fuzz"))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def tally() -> Iterator[Tally]:
    found = Tally()
    yield found
    print("\n" + found.table())


def test_no_file_a_command_reads_gives_a_traceback_a_hang_a_secret_or_a_write_outside(world: World, tally: Tally):
    assert not Path(ESCAPE_DIR).exists(), f"{ESCAPE_DIR} is left from another run: remove it"

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def one(data: st.DataObject) -> None:
        target: Target = data.draw(st.sampled_from(world.targets), label="target")
        good = world.intact[world.root / target.relative]
        mutation: Mutation = data.draw(mutations(target.kind, good), label="mutation")
        tally.add(f"{target.command} < {target.relative}", run_example(world, target, mutation))

    one()  # every example runs, none stops the run: the tally and every failure are the result
    failures = "\n".join(tally.failures)
    assert not tally.failures, f"{len(tally.failures)} violations:\n{failures}"
