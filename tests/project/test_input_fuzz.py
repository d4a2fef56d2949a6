"""Every file every command reads, broken by hypothesis (tests/support/input_fuzz.py says how and what
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
from support.input_fuzz import (
    ESCAPE_DIR,
    KEY_FILE,
    PLANTED_PASSWORD,
    PLANTED_TOKEN,
    PLANTED_URL,
    Mutation,
    Tally,
    Target,
    World,
    _dump,
    _parse,
    _parses,
    _replace,
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


# What the fuzzer found, each a fixed example: (command, file, what is broken, how).
def _swap(path: tuple, value: object) -> object:
    return lambda kind, good: Mutation("type swap", f"{path} = {value!r}",
                                       _dump(kind, _replace(_parse(kind, good), path, value)))


def _cut_supply_chain(kind: str, good: bytes) -> Mutation:
    doc = _parse(kind, good)
    doc.pop("supply_chain")
    return Mutation("truncation", "no supply_chain", _dump(kind, doc))


FOUND = {
    "an envelope's payloadType a list (verify crashed)":
        ("verify dist/", "envelope", _swap(("payloadType",), ["x"])),
    "an envelope's keyid None (verify crashed)":
        ("verify <artifact>", "envelope", _swap(("signatures", 0, "keyid"), None)),
    "a record's sha256 a path (a publish error, not a clear line)":
        ("variants", "dist/manifest.json", _swap(("artifacts", 0, "sha256"), "dist/../../../c")),
    "a record's version a path (promote said 'version 1.7.0, not 1.7.0')":
        ("promote", "dist/manifest.json", _swap(("artifacts", 0, "version"), "../../outside-x")),
    "a control character in an unknown key (two lines, raw bytes)":
        ("keygen", "feature_status.yaml", _swap(("features", 1), {"a\x11b": 1, "c": "./././d"})),
    "a line break in a tests folder (the error took two lines)":
        ("manifest gate", "release.yaml", _swap(("components", "emberaudio", "tests"), "x\ny")),
    "a URL with a password as a tests folder (printed after a slash)":
        ("keygen", "release.yaml", lambda kind, good: Mutation(
            "secret", "tests = a URL", _dump(kind, _replace(_parse(kind, good), ("components", "emberaudio", "tests"),
                                                            PLANTED_URL)), secrets=(PLANTED_PASSWORD,))),
    "a token in a feature's title (written into RELEASE_NOTES.md)":
        ("notes", "feature_status.yaml", lambda kind, good: Mutation(
            "secret", "title = a token", _dump(kind, _replace(_parse(kind, good), ("features", 3, "title"),
                                                              f"reason with {PLANTED_TOKEN} inside")),
            secrets=(PLANTED_TOKEN,))),
    "a NUL byte before the private key (keygen took it)":
        ("keygen", KEY_FILE, lambda kind, good: Mutation("bytes", "NUL at 0", b"\x00" + good, must_refuse=True)),
    "no supply_chain section (attest's message had no file or fix)":
        ("attest", "release.yaml", _cut_supply_chain),
    "a manifest's 'artifacts' key misspelled (read as a release with nothing in it)":
        ("verify dist/", "dist/manifest.json", lambda kind, good: Mutation(
            "bytes", "artifacts misspelled", good.replace(b'"artifacts"', b'"artifac&s"', 1), must_refuse=True)),
    "a record's variant_tag not its variant's (variants crashed)":
        ("variants", "dist/manifest.json", _swap(("artifacts", 0, "variant_tag"), "cu999")),
    "a number where skip reasons go (notes crashed)":
        ("notes", "dist/manifest.json", _swap(("artifacts", 0, "tests", "features", "ember.kernels", "skip_reasons"),
                                              2010392)),
    "a component's path '..' (its tests folder outside the release crashed validation)":
        ("promote", "release.yaml", _swap(("components", "embervision", "path"), "..")),
    "a wheel's platform tag ': :' (variants crashed on the variant's name)":
        ("variants", "dist/manifest.json", lambda kind, good: Mutation(
            "bytes", "': :' in a wheel's tag", good.replace(b'"name": "ember-1.7.0-py3-none-any.whl"',
                                                       b'"name": "ember-1.7.0-py3-none-any: :.whl"', 1),
            must_refuse=True)),
    "a tab inside a test id (YAML allows it; the fuzzer's own reader called it broken)":
        ("validate", "feature_status.yaml", lambda kind, good: Mutation(
            "bytes", "tab in a test id", good.replace(b"test_rdzv_auth.py", b"test_rdzv_auth\t.py", 1),
            must_refuse=not _parses(kind, good.replace(b"test_rdzv_auth.py", b"test_rdzv_auth\t.py", 1)))),
}


@pytest.mark.parametrize("case", list(FOUND))
def test_what_the_fuzzer_found_stays_fixed(world: World, case: str):
    command, file, break_ = FOUND[case]
    target = next(t for t in world.targets if t.command == command
                  and (t.relative == file or (file == "envelope" and t.relative.endswith(".intoto.jsonl"))))
    mutation = break_(target.kind, world.intact[world.root / target.relative])
    outcome = run_example(world, target, mutation)
    assert outcome.verdict in ("clear error", "ok", "verdict"), (case, outcome)
