"""Each kind of broken input gives exactly one clear error naming file, line, key and value."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from shipyard.cli import main
from shipyard.errors import SpecError
from shipyard.release.validate import load_spec
from shipyard.resources.pytest_plugin.shipyard_test_ids import defined_tests

R, F = "release.yaml", "feature_status.yaml"


def _one_error(spec_copy) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(spec_copy.root)
    text = str(info.value)
    lines = [line for line in text.splitlines()[1:] if line.strip()]
    assert len(lines) == 1, f"expected exactly one error, got:\n{text}"
    return lines[0].strip()


def _line_of(spec_copy, name: str, needle: str) -> int:
    for number, line in enumerate((spec_copy.root / name).read_text().splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(needle)


def test_real_files_are_valid(repo):
    spec = load_spec(repo)
    assert spec.release.release.version == "1.7.0"
    assert main(["--root", str(repo), "validate"]) == 0


def test_a_relative_root_resolves_to_an_absolute_one(repo, monkeypatch):
    # Builds and test runs work in other folders: a relative root must not follow them there.
    monkeypatch.chdir(repo / "library")
    spec = load_spec(Path(".."))
    assert spec.root == repo.resolve()
    assert (spec.root / "library" / "ember" / "windows").is_dir()


def test_bad_yaml_names_file_and_line(spec_copy):
    spec_copy.edit(R, "pythons: [", "pythons: [[")
    with pytest.raises(SpecError) as info:
        load_spec(spec_copy.root)
    assert re.search(r"release\.yaml:\d+: \(syntax\): not valid YAML: .+; fix the syntax at that line", str(info.value))


def test_duplicate_yaml_key(spec_copy):
    spec_copy.edit(R, "  cpu:\n    tag: cpu\n", "  cpu:\n    tag: cpu\n    tag: cpu\n")
    with pytest.raises(SpecError) as info:
        load_spec(spec_copy.root)
    line = _line_of(spec_copy, R, "    tag: cpu") + 1
    assert f"release.yaml:{line}: variants.cpu.tag: duplicate key (the first is at line {line - 1})" in str(info.value)


def test_unknown_key_suggests_the_field(spec_copy):
    spec_copy.edit(R, "    host_gcc_max: 11\n", "    host_gcc_max: 11\n    arch_lst: '8.0'\n")
    error = _one_error(spec_copy)
    line = _line_of(spec_copy, R, "arch_lst")
    assert error.startswith(f"{spec_copy.root / R}:{line}: variants.cuda11.arch_lst: unknown key 'arch_lst'")
    assert "did you mean 'arch_list'" in error


def test_typo_in_variant_name_of_an_exclusion(spec_copy):
    spec_copy.edit(R, "  - variant: cuda10.2\n", "  - variant: cuda10.3\n")
    error = _one_error(spec_copy)
    assert "exclusions.3.variant: matches no variant" in error
    assert "(got 'cuda10.3')" in error and "did you mean 'cuda10.2'" in error


def test_arch_not_supported_by_cuda_version(spec_copy):
    spec_copy.edit(R, '8.6;9.0"', '8.6;9.0;10.0"')
    error = _one_error(spec_copy)
    line = _line_of(spec_copy, R, "8.6;9.0;10.0")
    assert f"release.yaml:{line}: variants.cuda11.arch_list: arch 10.0 is not supported by CUDA 11.8" in error
    assert "(got '10.0')" in error


def test_explicit_ptx_suffix_is_refused_because_ptx_is_implicit(spec_copy):
    spec_copy.edit(R, '8.6;9.0"', '8.6;9.0+PTX"')
    error = _one_error(spec_copy)
    line = _line_of(spec_copy, R, "8.6;9.0+PTX")
    assert (f"release.yaml:{line}: variants.cuda11.arch_list: write 9.0: PTX is implicit, shipyard embeds it "
            "for the highest arch of every CUDA variant") in error


def test_feature_names_a_missing_component(spec_copy):
    spec_copy.edit(F, "component: embervision\n", "component: embervison\n")
    error = _one_error(spec_copy)
    assert "feature_status.yaml" in error and "component: names no component" in error
    assert "(got 'embervison')" in error and "did you mean 'embervision'" in error


def test_duplicate_feature_ids(spec_copy):
    spec_copy.edit(F, "  - id: ember.fft\n", "  - id: ember.kernels\n")
    error = _one_error(spec_copy)
    assert "duplicate feature id (first defined as features[0])" in error
    assert "(got 'ember.kernels')" in error
    # The second occurrence is the one reported.
    lines = (spec_copy.root / F).read_text().splitlines()
    second = [n for n, t in enumerate(lines, 1) if t == "  - id: ember.kernels"][1]
    assert f"feature_status.yaml:{second}:" in error


def test_exclusion_that_matches_nothing(spec_copy):
    spec_copy.edit(R, "exclusions:\n", "exclusions:\n  - component: emberaudio\n    package_type: mobile\n"
                   "    reason: audio is not a mobile package\n")
    error = _one_error(spec_copy)
    assert "exclusions.0: this exclusion matches no cell of the matrix" in error


def test_python_version_as_float(spec_copy):
    spec_copy.edit(R, 'pythons: ["3.9", "3.10",', 'pythons: ["3.9", 3.10,')
    error = _one_error(spec_copy)
    assert error.endswith('pythons.1: Python version given as a number, which YAML reads as 3.1; '
                          'quote it: "3.10" (got 3.10)')


def test_status_typo_suggests_valid_status(spec_copy):
    spec_copy.edit(F, "    status: stable\n", "    status: stabel\n")
    error = _one_error(spec_copy)
    assert "must be one of stable, beta, prototype" in error and "did you mean 'stable'" in error


def test_feature_platform_typo(spec_copy):
    spec_copy.edit(F, "status: {windows-amd64: prototype}", "status: {windows-amd46: prototype}")
    error = _one_error(spec_copy)
    assert "names no platform or mobile target" in error and "did you mean 'windows-amd64'" in error


def test_inline_secret_is_refused_and_never_echoed(spec_copy):
    spec_copy.edit(R, "    token_env: SHIPYARD_CONDA_TOKEN\n",
                   "    token_env: SHIPYARD_CONDA_TOKEN\n    token: s3cr3t-value\n")
    error = _one_error(spec_copy)
    assert "publish.conda-channel: 'token' holds a secret inline" in error
    assert "s3cr3t-value" not in error


def test_cuda_tag_must_match_version(spec_copy):
    spec_copy.edit(R, "tag: cu118", "tag: cu117")
    error = _one_error(spec_copy)
    assert "variants.cuda11: variant 'cuda11': CUDA 11.8 has tag 'cu118', not 'cu117'" in error


def test_test_id_naming_a_missing_test(spec_copy):
    tests = spec_copy.root / "library" / "emberaudio" / "tests"
    (tests / "test_wav.py").write_text("def test_roundtrip():\n    pass\n")
    spec_copy.edit(F, "library/emberaudio/tests/test_wav.py\n", "library/emberaudio/tests/test_wav.py::test_rountrip\n")
    error = _one_error(spec_copy)
    assert "no test 'test_rountrip' in library/emberaudio/tests/test_wav.py" in error


PARAMETRISED = """import pytest

@pytest.mark.parametrize("n", [1, 2])
def test_any_length(n):
    pass

def test_plain():
    pass

@pytest.mark.parametrize("n", list(range(3)))
def test_computed(n):
    pass

def test_on_a_device(device):
    pass
"""


def _parametrised_ids(spec_copy, *ids: str) -> None:
    tests = spec_copy.root / "library" / "emberaudio" / "tests"
    tests.mkdir(exist_ok=True)  # SpecCopy makes the tests folders release.yaml names
    (tests / "test_wav.py").write_text(PARAMETRISED)
    # A fixture with params in a conftest parametrises the tests that take it.
    (tests / "conftest.py").write_text("import pytest\n\n@pytest.fixture(params=['cpu'])\n"
                                       "def device(request):\n    return request.param\n")
    listed = "".join(f"      - library/emberaudio/tests/test_wav.py::{i}\n" for i in ids)
    spec_copy.edit(F, "      - library/emberaudio/tests/test_wav.py\n", listed)


@pytest.mark.parametrize("test_id,problem", [
    ("test_any_length[3]", "test_any_length has no case [3]; use one of its cases (1, 2)"),
    ("test_plain[1]", "test_plain is not parametrised; drop [1] or parametrise the test"),
    ("test_gone[1]", "no test 'test_gone' in library/emberaudio/tests/test_wav.py; fix the name or add the test"),
])
def test_a_parametrised_id_must_name_a_case_the_run_will_have(spec_copy, test_id: str, problem: str) -> None:
    _parametrised_ids(spec_copy, test_id)
    error = _one_error(spec_copy)
    assert error.endswith(f": {problem} (got 'library/emberaudio/tests/test_wav.py::{test_id}')"), error


def test_a_parametrised_id_of_a_case_that_exists_is_valid(spec_copy) -> None:
    # test_any_length[1] is what pytest collects (the same id at run time); the cases of
    # test_computed and test_on_a_device are known only when pytest runs, which judges them.
    _parametrised_ids(spec_copy, "test_any_length[1]", "test_any_length", "test_computed[7]", "test_on_a_device[cpu]")
    load_spec(spec_copy.root)



FIXTURES_WHERE_PYTEST_FINDS_THEM = """
import pytest
if True:
    @pytest.fixture(params=["a"])
    def conditional(request):
        return request.param
try:
    import numpy
except ImportError:
    @pytest.fixture(params=["b"])
    def fallback(request):
        return request.param
class TestOuter:
    class TestInner:
        @pytest.fixture(params=["c"])
        def in_a_class(self, request):
            return request.param
def helper():
    @pytest.fixture(params=["d"])
    def inside_a_function(request):
        return request.param
def test_conditional(conditional): pass
def test_fallback(fallback): pass
def test_in_a_class(in_a_class): pass
def test_inside_a_function(inside_a_function): pass
"""


def test_fixtures_with_params_count_where_pytest_collects_fixtures_only() -> None:
    # A fixture with params at module level (inside an `if` or an `except` too) or in a class
    # parametrises its tests, so their cases are known only at run time (None); pytest never
    # collects one defined inside a function, so a test taking that name has no cases (()).
    tests = defined_tests(ast.parse(FIXTURES_WHERE_PYTEST_FINDS_THEM), "tests/test_x.py")
    assert {t.id.rpartition("::")[2]: t.cases for t in tests} == {
        "test_conditional": None, "test_fallback": None, "test_in_a_class": None, "test_inside_a_function": ()}


def test_test_ids_are_checked_against_the_files_as_they_are_now(spec_copy) -> None:
    """The test files are read once per process, and again when a test file or a conftest.py
    above it changes: a long-lived process (the suite, a notebook) never checks old contents."""
    _parametrised_ids(spec_copy, "test_on_a_device[cpu]", "test_added")
    assert "no test 'test_added' in library/emberaudio/tests/test_wav.py" in _one_error(spec_copy)
    tests = spec_copy.root / "library" / "emberaudio" / "tests"
    (tests / "test_wav.py").write_text(PARAMETRISED + "\ndef test_added():\n    pass\n")
    load_spec(spec_copy.root)
    (tests / "conftest.py").write_text("import pytest\n\n@pytest.fixture\ndef device():\n    return 'cpu'\n")
    assert _one_error(spec_copy).endswith("test_on_a_device is not parametrised; drop [cpu] or parametrise the test "
                                          "(got 'library/emberaudio/tests/test_wav.py::test_on_a_device[cpu]')")

def test_a_unittest_class_of_any_name_holds_tests(spec_copy) -> None:
    # pytest collects a TestCase whatever its name, so its id names tests (the plugin's matcher agrees).
    tests = spec_copy.root / "library" / "emberaudio" / "tests"
    tests.mkdir(exist_ok=True)
    (tests / "test_wav.py").write_text("import unittest\n\nclass WavChecks(unittest.TestCase):\n"
                                       "    def test_roundtrip(self):\n        pass\n\nclass Helper:\n"
                                       "    def test_not_collected(self):\n        pass\n")
    spec_copy.edit(F, "      - library/emberaudio/tests/test_wav.py\n",
                   "      - library/emberaudio/tests/test_wav.py::WavChecks::test_roundtrip\n"
                   "      - library/emberaudio/tests/test_wav.py::Helper::test_not_collected\n")
    assert "no test 'Helper::test_not_collected' in library/emberaudio/tests/test_wav.py" in _one_error(spec_copy)


def test_missing_test_file_is_pending_for_a_beta_feature_and_an_error_for_a_stable_one(spec_copy):
    spec_copy.edit(F, "library/emberaudio/tests/test_wav.py\n", "library/emberaudio/tests/test_not_written_yet.py\n")
    (spec_copy.root / "library/emberaudio/tests/test_wav.py").unlink()  # its markers name the feature
    # A stable feature's test that does not exist yet would fail its cell after the build: refused now.
    assert "the test file does not exist, and a stable feature's tests must exist now" in _one_error(spec_copy)
    text = (spec_copy.root / F).read_text()
    start = text.index("library/emberaudio/tests/test_not_written_yet.py")
    status = text.rindex("status: stable", 0, start)
    (spec_copy.root / F).write_text(text[:status] + "status: beta" + text[status + len("status: stable"):])
    spec = load_spec(spec_copy.root)
    assert "library/emberaudio/tests/test_not_written_yet.py" in spec.pending_tests


def test_cli_exits_non_zero_with_the_message(spec_copy, capsys):
    spec_copy.edit(R, "kind: python-pure", "kind: python-puer")
    assert main(["--root", str(spec_copy.root), "validate"]) == 2
    err = capsys.readouterr().err
    assert "components.emberaudio.kind: must be one of python-native, python-pure, native" in err
    assert "did you mean 'python-pure'" in err


def test_schema_command_writes_json_schemas(tmp_path):
    import json

    assert main(["schema", "--out", str(tmp_path)]) == 0
    release = json.loads((tmp_path / "release.schema.json").read_text())
    features = json.loads((tmp_path / "feature_status.schema.json").read_text())
    assert {"components", "variants", "platforms", "pythons", "exclusions", "publish"} <= set(release["properties"])
    assert "features" in features["properties"]


def _platform_keys_missing(schema: dict, name: str, given: dict) -> set[str]:
    """The keys release.schema.json requires of platform `name` that `given` lacks (patternProperties
    first, as a JSON schema validator applies them; their regexes are ones Python reads alike)."""
    platforms = schema["properties"]["platforms"]
    applying = [sub for pattern, sub in platforms.get("patternProperties", {}).items() if re.search(pattern, name)]
    required: set[str] = set()
    for sub in applying or [platforms["additionalProperties"]]:
        for part in sub.get("allOf", [sub]):
            if "$ref" in part:
                part = schema["$defs"][part["$ref"].rsplit("/", 1)[-1]]
            required |= set(part.get("required", ()))
    return required - set(given)


def test_the_schema_asks_only_what_a_platform_name_does_not_give(tmp_path):
    import json

    assert main(["schema", "--out", str(tmp_path)]) == 0
    release = json.loads((tmp_path / "release.schema.json").read_text())
    # `linux-x86_64: {}` is a whole platform (PLATFORM_DEFAULTS), and no entry repeats its key as `name`.
    assert _platform_keys_missing(release, "linux-x86_64", {}) == set()
    assert _platform_keys_missing(release, "macos-arm64", {}) == set()
    assert "name" not in release["$defs"]["Component"].get("required", [])
    # A name outside the table gives os and arch at most; the rest must be written.
    assert _platform_keys_missing(release, "linux-riscv64", {}) == {"wheel_platform_tag", "github_runner"}
    assert _platform_keys_missing(release, "solaris-sparc", {"os": "linux"}) == {
        "arch", "wheel_platform_tag", "github_runner"}
    assert "PLATFORM_DEFAULTS" in release["properties"]["platforms"]["description"]


# --- feature markers against feature_status.yaml (the YAML is the authority) ---------------

AUDIO_TESTS = "library/emberaudio/tests"


def _audio_tests(spec_copy, source: str, name: str = "test_wav.py") -> Path:
    folder = spec_copy.root / AUDIO_TESTS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(source)
    return path


def test_tests_without_markers_are_fine(spec_copy):
    # audio.core lists test_wav.py: its tests need no marker at all.
    _audio_tests(spec_copy, "def test_roundtrip():\n    pass\n")
    load_spec(spec_copy.root)


def test_marker_naming_an_unknown_feature(spec_copy):
    path = _audio_tests(spec_copy, "import pytest\n\n\n@pytest.mark.feature('audio.cor')\ndef test_roundtrip():\n"
                                   "    pass\n")
    error = _one_error(spec_copy)
    assert error == (f"{path}:4: test_roundtrip: marker names no feature of feature_status.yaml; use one of its "
                     f"ids or add the feature (got 'audio.cor'); did you mean 'audio.core'?")


def test_module_marker_on_a_file_the_feature_does_not_list(spec_copy):
    # test_io.py is not in audio.core's list, yet its module marker claims it proves audio.core.
    path = _audio_tests(spec_copy, "import pytest\n\npytestmark = pytest.mark.feature('audio.core')\n\n\n"
                                   "def test_a():\n    pass\n\n\ndef test_b():\n    pass\n", "test_io.py")
    error = _one_error(spec_copy)
    assert error == (f"{path}:3: pytestmark: marked as proving this feature, but its tests list in "
                     f"feature_status.yaml does not name test_a, test_b; add them (or {AUDIO_TESTS}/test_io.py) "
                     f"to that list, or change the marker (got 'audio.core')")


def test_marker_naming_a_feature_that_lists_the_test_elsewhere(spec_copy):
    # The YAML says test_wav.py proves audio.core; the marker says vision.transforms.
    spec_copy.edit(F, "library/emberaudio/tests/test_wav.py\n", "library/emberaudio/tests/test_wav.py::TestWav\n")
    _audio_tests(spec_copy, "import pytest\n\n\nclass TestWav:\n    pytestmark = pytest.mark.feature("
                            "'vision.transforms')\n\n    def test_roundtrip(self):\n        pass\n")
    with pytest.raises(SpecError) as info:
        load_spec(spec_copy.root)
    lines = [line.strip() for line in str(info.value).splitlines()[1:]]
    assert len(lines) == 2
    assert lines[0].startswith(f"{spec_copy.root / AUDIO_TESTS}/test_wav.py:5: TestWav: marked as proving this "
                               f"feature, but its tests list in feature_status.yaml does not name "
                               f"TestWav::test_roundtrip (it lists them under audio.core)")
    line = _line_of(spec_copy, F, "test_wav.py::TestWav")
    assert lines[1] == (f"{spec_copy.root / F}:{line}: features.16.tests.0: lists TestWav::test_roundtrip, whose "
                        f"feature markers do not name 'audio.core'; add pytest.mark.feature('audio.core') to them, "
                        f"or move the entry to the feature they are marked with "
                        f"(got 'library/emberaudio/tests/test_wav.py::TestWav')")


def test_test_files_are_read_not_imported(spec_copy):
    # A test module that would crash (or do anything) on import is only parsed.
    _audio_tests(spec_copy, "raise SystemExit('imported')\n\n\ndef test_roundtrip():\n    pass\n")
    load_spec(spec_copy.root)


# --- exclusions -----------------------------------------------------------------------------

def test_identical_exclusions_report_only_the_second(spec_copy):
    spec_copy.edit(R, "publish:\n", "  - component: emberelastic\n    platform: windows-amd64\n"
                   "    reason: said twice\n\npublish:\n")
    error = _one_error(spec_copy)
    # exclusions.7: after ember's seven (the last three keep linux-x86_64-manylinux2014 to CPU wheels of ember)
    assert "exclusions.7: every cell this exclusion removes is already removed by exclusions.2" in error


def test_an_exclusion_covered_by_two_others_together(spec_copy):
    # emberelastic's CUDA 11 cells on macOS go by exclusion 0 (no CUDA on macOS), on Windows by
    # exclusion 2 (no elastic on Windows): an exclusion of both removes nothing more.
    spec_copy.edit(R, "publish:\n", "  - component: emberelastic\n    variant: cuda11\n"
                   "    platform: [macos-arm64, windows-amd64]\n    reason: covered twice\n\npublish:\n")
    error = _one_error(spec_copy)
    assert ("exclusions.7: every cell this exclusion removes is already removed by exclusions.0 (no CUDA on macOS) "
            "and exclusions.2 (the elastic launcher relies on POSIX signals and process groups); remove it, or "
            "narrow the others") in error


@pytest.mark.parametrize("emulator", ['"qemu-arm; echo pwned"', '[qemu-arm, "-L /usr/arm-linux-gnueabihf"]',
                                      '[qemu-arm, "$(id)"]'])
def test_an_emulator_that_a_shell_or_cmake_would_split_is_refused(spec_copy, capsys, emulator):
    # It becomes one CMake list entry per argument (CMAKE_CROSSCOMPILING_EMULATOR): a ';' or a
    # blank inside one would pass ctest other arguments than release.yaml shows.
    spec_copy.edit(R, "    emulator: [qemu-arm, -L, /usr/arm-linux-gnueabihf]\n", f"    emulator: {emulator}\n")
    assert main(["--root", str(spec_copy.root), "validate"]) == 2
    err = capsys.readouterr().err.strip()
    lines = [line for line in err.splitlines()[1:] if line.strip()]
    assert len(lines) == 1, err
    line = _line_of(spec_copy, R, f"    emulator: {emulator}")
    index = 0 if emulator.startswith('"') else 1
    assert re.fullmatch(
        rf"{re.escape(str(spec_copy.root / R))}:{line}: mobile_targets\.linux-armv7\.emulator\.{index}: "
        r"'.' in an argument would split it or run something else in a shell or a CMake list; "
        r"give each argument as its own list entry, e.g. \[qemu-aarch64, -L, /usr/aarch64-linux-gnu\], "
        r"with no shell syntax \(got '.+'\)", lines[0].strip()), lines[0]
