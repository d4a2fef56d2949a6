"""validate fails where a later command would (issue #50, item 5): the pipeline's channels, pytest_args
paths that name nothing where the tests run, a stable feature's missing tests, a conda recipe, and a
pre-release tag that could reach the channel holding releases; and it keeps a build backend's
warnings out of its output, in a log it names. On a copy of the third-party fixture: no builds."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from shipyard.ci.workflow import workflows
from shipyard.cli import main
from shipyard.release.validate import load_spec

FIXTURE = Path(__file__).parent.parent / "fixtures" / "thirdparty"
R, F = "release.yaml", "feature_status.yaml"
TWO_CHANNELS = "channels:\n  nightly: {gate: mark}\n  release: {gate: block}\n"


@pytest.fixture
def release(tmp_path: Path) -> Path:
    root = tmp_path / "release"
    shutil.copytree(FIXTURE, root)
    return root


def _edit(root: Path, name: str, old: str, new: str) -> None:
    text = (root / name).read_text()
    assert old in text, old
    (root / name).write_text(text.replace(old, new, 1))


def _validate(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["--root", str(root), "validate"])
    captured = capsys.readouterr()
    return code, " ".join((captured.out + captured.err).split())


def _line(root: Path, name: str, needle: str) -> int:
    return next(n for n, line in enumerate((root / name).read_text().splitlines(), 1) if needle in line)


def test_channels_the_pipeline_needs_are_checked_before_ci_generate(release, capsys):
    code, out = _validate(release, capsys)
    assert code == 0  # no channels at all: a release need not have a pipeline, but validate says what it lacks
    assert "note: no channels: `shipyard ci generate` needs a nightly channel and one that holds releases; add " \
           "`channels: {nightly: {gate: mark}, test: {gate: block}, release: {gate: block}}`" in out
    (release / R).write_text((release / R).read_text() + "channels:\n  nightly: {gate: mark}\n")
    code, out = _validate(release, capsys)
    assert code == 2, out
    assert (f"{release / R}:{_line(release, R, 'channels:')}: channels: the release pipeline needs a nightly channel "
            f"and one that holds releases (nightly alone): `shipyard ci generate` stops here; add `channels:") in out
    # Committed workflows with no channels at all: the same refusal, naming them.
    (release / R).write_text((release / R).read_text().replace("channels:\n  nightly: {gate: mark}\n", ""))
    (release / ".github" / "workflows").mkdir(parents=True)
    (release / ".github" / "workflows" / "release.yml").write_text("name: release\n")
    code, out = _validate(release, capsys)
    assert code == 2 and "channels: the release pipeline needs" in out and ".github/workflows/release.yml" in out


def test_pytest_args_paths_must_name_something_in_the_tests_folder(release, capsys):
    args = "    tests: tests\nvariants:"
    _edit(release, R, args, "    tests: tests\n    pytest_args: [--ignore=tests/test_newpy.py]\nvariants:")
    code, out = _validate(release, capsys)
    line = _line(release, R, "pytest_args: [--ignore=tests/")
    assert code == 2, out
    assert (f"{release / R}:{line}: components.newpy.pytest_args.0: --ignore names nothing in the tests folder "
            f"(its paths are relative to 'tests', where the tests run); write it relative to the tests folder: "
            f"--ignore=test_newpy.py (got 'tests/test_newpy.py')") in out
    _edit(release, R, "[--ignore=tests/test_newpy.py]", "[--deselect, test_nothere.py::test_x]")
    code, out = _validate(release, capsys)
    assert code == 2 and "components.newpy.pytest_args.1: --deselect names nothing in the tests folder" in out, out
    assert "name a file or folder in library/newpy/tests, relative to it, or remove it" in out
    _edit(release, R, "[--deselect, test_nothere.py::test_x]", "[--ignore=test_newpy.py]")
    assert _validate(release, capsys)[0] == 0


def test_a_stable_features_tests_must_exist_now_a_betas_may_be_pending(release, capsys):
    _edit(release, F, "tests: [tests-of/scmpkg/test_scmpkg.py]", "tests: [tests-of/scmpkg/test_later.py]")
    code, out = _validate(release, capsys)
    assert code == 2, out
    assert (f"{release / F}:{_line(release, F, 'test_later.py')}: features.2.tests.0: the test file does not "
            f"exist, and a stable feature's tests must exist now (a pending test is allowed for beta or "
            f"prototype); write tests-of/scmpkg/test_later.py, fix the id, or give the feature the status beta "
            f"until it exists (got 'tests-of/scmpkg/test_later.py')") in out
    _edit(release, F, "    status: stable\n    tests: [tests-of/scmpkg/test_later.py]",
          "    status: beta\n    tests: [tests-of/scmpkg/test_later.py]")
    code, out = _validate(release, capsys)
    assert code == 0 and "pending: 1 test id points at a test that does not exist yet" in out, out


def test_a_conda_package_type_needs_its_recipe(release, capsys):
    _edit(release, R, "    import_name: newpy\n    package_types: [wheel]",
          "    import_name: newpy\n    package_types: [wheel, conda]")
    (release / R).write_text((release / R).read_text() + "conda:\n  channels: [conda-forge]\n")
    code, out = _validate(release, capsys)
    assert code == 2, out
    assert (f"{release / R}:{_line(release, R, '[wheel, conda]')}: components.newpy.package_types: package type "
            f"'conda' needs recipes/newpy/recipe.yaml, which does not exist (shipyard writes none); write "
            f"recipes/newpy/recipe.yaml (recipes/README.md says how), or drop 'conda' from package_types "
            f"(got 'conda')") in out
    (release / "recipes" / "newpy").mkdir(parents=True)
    (release / "recipes" / "newpy" / "recipe.yaml").write_text("package: {name: newpy, version: 1.0.0}\n")
    assert _validate(release, capsys)[0] == 0


def test_a_pre_release_tag_never_reaches_the_channel_that_holds_releases(release, capsys):
    (release / R).write_text((release / R).read_text() + TWO_CHANNELS)
    code, out = _validate(release, capsys)
    assert code == 0 and "note: a pre-release tag (v1.0.0-rc1) has no channel to go to: release holds releases" in out
    # The workflow's expression names no channel for an -rc tag (it gave 'release' either way) ...
    spec = load_spec(release)
    expression = next(data for path, data in workflows(spec).items() if path.name == "release.yml")["env"]
    assert expression["SHIPYARD_CHANNEL"] == ("${{ inputs.channel || (contains(github.ref_name, '-rc') && "
                                              "'NONE-for-a-pre-release-tag' || 'release') }}")
    # ... and the plan job refuses the run, whatever channel it is given.
    for channel in ("release", "NONE-for-a-pre-release-tag"):
        assert main(["--root", str(release), "ci", "plan", "--channel", channel,
                     "--ref", "refs/tags/v1.0.0-rc1"]) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert ("tag v1.0.0-rc1 is a pre-release, and release.yaml's channels (nightly, release) have no channel "
                "for one: the last, release, holds releases; add a channel between the first and the last") in err
    assert main(["--root", str(release), "ci", "plan", "--channel", "release", "--ref", "refs/tags/v1.0.0"]) == 0
    capsys.readouterr()
    # With a test channel, an -rc tag goes there, and never to release.
    _edit(release, R, "  nightly: {gate: mark}\n", "  nightly: {gate: mark}\n  test: {gate: block}\n")
    expression = next(data for path, data in workflows(load_spec(release)).items()
                      if path.name == "release.yml")["env"]["SHIPYARD_CHANNEL"]
    assert expression == "${{ inputs.channel || (contains(github.ref_name, '-rc') && 'test' || 'release') }}"
    assert main(["--root", str(release), "ci", "plan", "--channel", "release", "--ref", "refs/tags/v1.0.0-rc1"]) == 2
    assert "may not publish to release, the channel that holds releases; publish it to test" in \
           " ".join(capsys.readouterr().err.split())
    # A pre-release version with only nightly and release: every tag of it is one, so validate refuses.
    _edit(release, R, "  test: {gate: block}\n", "")
    _edit(release, R, "  version: 1.0.0\n", "  version: 1.0.0rc1\n")
    _edit(release, F, "since: 1.0.0", "since: 0.9.0")
    code, out = _validate(release, capsys)
    assert code == 2 and ("release.version: is a pre-release, and its tags may not reach release, the channel that "
                          "holds releases") in out, out
