"""Each component has its own version and tags (issue #50, item 3): `<component>-v<version>` plans
that component's jobs alone, at the version release.yaml gives it; a tag of another version or of no
component is refused in one line; a candidate tag never reaches the channel that holds releases; a
feature's `since` is measured against its component's version. The plan job's command and
validate on shipyard's own release and on a copy of the third-party fixture: no builds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.report_release import host_without_tools
from support.synthetic_release import features, make_wheel, record, write_manifest

from shipyard.ci.workflow import workflows
from shipyard.cli import main
from shipyard.errors import MergeError
from shipyard.release.validate import load_spec
from shipyard.report.document import build_report
from shipyard.report.notes import release_notes

FIXTURE = Path(__file__).parent.parent / "fixtures" / "thirdparty"
CHANNELS = "channels:\n  nightly: {gate: mark}\n  test: {gate: block}\n  release: {gate: block}\n"


@pytest.fixture
def thirdparty(tmp_path: Path) -> Path:
    """The third-party fixture (mesonext at its own version 0.9.1, the release at 1.0.0) with the
    pipeline's channels."""
    root = tmp_path / "release"
    shutil.copytree(FIXTURE, root)
    (root / "release.yaml").write_text((root / "release.yaml").read_text() + CHANNELS)
    return root


def _plan(root: Path, ref: str, capsys: pytest.CaptureFixture[str], channel: str = "release") -> tuple[int, dict, str]:
    code = main(["--root", str(root), "ci", "plan", "--channel", channel, "--ref", ref])
    captured = capsys.readouterr()
    lanes = {name: json.loads(value)["include"] for name, value in
             (line.split("=", 1) for line in captured.out.splitlines())}
    return code, lanes, " ".join(captured.err.split())


def test_a_component_tag_plans_that_component_alone_on_shipyards_own_release(repo, capsys):
    code, lanes, err = _plan(repo, "refs/tags/ember-v1.7.0", capsys)
    assert code == 0, err
    jobs = [job for entries in lanes.values() for job in entries]
    assert jobs and {job["components"] for job in jobs} == {"ember"}
    assert {"wheel_linux", "conda_linux"} <= {name for name, entries in lanes.items() if entries}
    assert lanes["docker"] == [] and lanes["wheel_pure"] == []  # images bundle every component
    # The family tag still plans every component.
    code, lanes, err = _plan(repo, "refs/tags/v1.7.0", capsys)
    planned = " ".join(job["components"] for entries in lanes.values() for job in entries).split()
    assert code == 0 and {"ember", "embervision", "emberaudio", "ember-lite"} <= set(planned), err
    assert lanes["docker"]


def test_a_pure_components_tag_builds_the_native_package_it_is_tested_against_and_releases_itself_alone(
        repo, tmp_path, capsys):
    """emberaudio-v1.7.0: emberaudio's tests install ember, which the pure lane takes from the same
    run's native jobs of its kind, variant and builder. The plan builds those (and no other native
    job: not Windows, macOS or CUDA); the manifest job keeps emberaudio alone, and its check of the
    plan's cells asks for emberaudio's only."""
    code, lanes, err = _plan(repo, "refs/tags/emberaudio-v1.7.0", capsys)
    assert code == 0, err
    assert ("tag emberaudio-v1.7.0: also builds ember (emberaudio depends on it; built and tested, not released)"
            in err)
    planned = {job["id"]: job["components"] for entries in lanes.values() for job in entries}
    assert planned == {"wheel-ember-cpu-linux-x86_64": "ember", "wheel-pure-cpu-linux-x86_64-any": "emberaudio",
                       "conda-ember-cpu-linux-x86_64": "ember", "conda-pure-cpu-linux-x86_64-any": "emberaudio"}
    # The fragments such a run uploads: ember's job, and the pure job's (which merged ember's in).
    ember = _fragment(tmp_path / "fragments", "fragment-wheel-ember-cpu-linux-x86_64", ["ember"])
    pure = _fragment(tmp_path / "fragments", "fragment-wheel-pure-cpu-linux-x86_64-any", ["ember", "emberaudio"])
    for job in ("conda-ember-cpu-linux-x86_64", "conda-pure-cpu-linux-x86_64-any"):
        (tmp_path / "fragments" / f"fragment-{job}").mkdir()  # conda withholds failed cells: not counted
        (tmp_path / "fragments" / f"fragment-{job}" / "manifest.json").write_text("{}")
    dist = tmp_path / "dist"
    ref = "refs/tags/emberaudio-v1.7.0"
    merge = ["--root", str(repo), "manifest", "merge", "--dist", str(dist), "--ref", ref, str(ember), str(pure)]
    assert main(merge) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"{ref} releases emberaudio alone: left out ember (built for its tests)" in out, out
    manifest = json.loads((dist / "manifest.json").read_text())
    assert [a["component"] for a in manifest["artifacts"]] == ["emberaudio"]
    assert sorted(p.name for p in dist.rglob("*.whl")) == ["emberaudio-1.7.0-py3-none-any.whl"]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({name: json.dumps({"include": entries}) for name, entries in lanes.items()}))
    argv = ["--root", str(repo), "ci", "fragments", "--plan", str(plan), "--dist", str(dist),
            str(tmp_path / "fragments")]
    assert main([*argv, "--ref", ref]) == 0
    assert "every cell of the plan is in the merged manifest (1)" in capsys.readouterr().out
    # Without the tag, ember's five cells are missing from that manifest: the check names them.
    assert main(argv) == MergeError.exit_code
    assert "5 of 6 cells of the plan have no record" in " ".join(capsys.readouterr().err.split())


def _fragment(folder: Path, name: str, components: list[str]) -> Path:
    dist = folder / name
    # The cells' ids as release.yaml's matrix names them (one Python of ember's is enough here).
    cells = {"ember": "ember-cpu-linux-x86_64-cp311-wheel", "emberaudio": "emberaudio-any-wheel"}
    records = [record(dist, make_wheel(dist / "whl" / "cpu" / component, component, "1.7.0"), component=component,
                      package_type="wheel", variant="cpu", tag="cpu", tests=features(), version="1.7.0")
               .model_copy(update={"cell_id": cells[component]}) for component in components]
    write_manifest(dist, records, "1.7.0")
    return dist


def test_a_component_tag_of_another_version_is_refused_naming_the_components_version(thirdparty, capsys):
    code, lanes, err = _plan(thirdparty, "refs/tags/mesonext-v1.0.0", capsys)
    assert code == 2 and lanes == {}
    assert ("tag mesonext-v1.0.0: release.yaml's version of mesonext is 0.9.1 (components.mesonext.version); tag "
            "mesonext-v0.9.1 (or mesonext-v0.9.1-rcN), or change its version first") in err
    assert len([line for line in err.split("error:") if line.strip()]) == 1
    # A component without a version of its own is tagged at the release's.
    code, _, err = _plan(thirdparty, "refs/tags/newpy-v3.0.1", capsys)
    assert code == 2 and ("release.yaml's version of newpy is 1.0.0 (release.version, as it sets no version of its "
                          "own); tag newpy-v1.0.0") in err


def test_a_tag_of_no_component_names_the_nearest(thirdparty, capsys):
    code, _, err = _plan(thirdparty, "refs/tags/mesonxt-v0.9.1", capsys)
    assert code == 2
    assert "tag mesonxt-v0.9.1: mesonxt is no component of release.yaml; did you mean mesonext-v0.9.1?" in err


def test_the_components_own_tag_plans_only_its_jobs(thirdparty, capsys):
    code, lanes, err = _plan(thirdparty, "refs/tags/mesonext-v0.9.1", capsys)
    assert code == 0, err
    jobs = [job for entries in lanes.values() for job in entries]
    assert [job["id"] for job in jobs] == ["wheel-mesonext-cpu-linux-x86_64"]
    assert "wheel_linux: 1 jobs" in err


def test_a_components_candidate_tag_goes_to_the_prerelease_channel_never_the_last(thirdparty, capsys):
    code, lanes, err = _plan(thirdparty, "refs/tags/mesonext-v0.9.1-rc1", capsys, channel="test")
    assert code == 0, err
    assert [job["id"] for entries in lanes.values() for job in entries] == ["wheel-mesonext-cpu-linux-x86_64"]
    code, _, err = _plan(thirdparty, "refs/tags/mesonext-v0.9.1-rc1", capsys, channel="release")
    assert code == 2 and ("tag mesonext-v0.9.1-rc1 is a pre-release and may not publish to release, the channel that "
                          "holds releases; publish it to test") in err
    # release.yml is triggered by component tags, and a component's pre-release version picks the
    # candidates' channel by its tag, as an -rc suffix does.
    text = (thirdparty / "release.yaml").read_text().replace("version: 0.9.1", "version: 0.9.2rc1")
    (thirdparty / "release.yaml").write_text(text)
    features = thirdparty / "feature_status.yaml"
    features.write_text(features.read_text().replace("since: 0.9.1", "since: 0.9.0"))
    release = next(data for path, data in workflows(load_spec(thirdparty)).items() if path.name == "release.yml")
    assert release["on"]["push"]["tags"] == ["v*", "*-v*"]
    assert release["env"]["SHIPYARD_CHANNEL"] == (
        "${{ inputs.channel || ((contains(github.ref_name, '-rc') || startsWith(github.ref_name, 'mesonext-v0.9.2rc1'))"
        " && 'test' || 'release') }}")
    code, _, err = _plan(thirdparty, "refs/tags/mesonext-v0.9.2rc1", capsys, channel="release")
    assert code == 2 and "is a pre-release and may not publish to release" in err
    # With no channel between nightly and release, validate refuses the component's pre-release version.
    text = (thirdparty / "release.yaml").read_text().replace("  test: {gate: block}\n", "")
    (thirdparty / "release.yaml").write_text(text)
    code, out = _validate(thirdparty, capsys)
    assert code == 2 and ("components.mesonext.version: is a pre-release, and its tags may not reach release, the "
                          "channel that holds releases (channels: nightly, release)") in out, out


def _validate(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["--root", str(root), "validate"])
    captured = capsys.readouterr()
    return code, " ".join((captured.out + captured.err).split())


def test_since_is_measured_against_the_components_version(thirdparty, capsys):
    features = thirdparty / "feature_status.yaml"
    text = features.read_text()
    assert _validate(thirdparty, capsys)[0] == 0
    features.write_text(text.replace("since: 0.9.1", "since: 1.0.0"))  # the release's, not mesonext's
    code, out = _validate(thirdparty, capsys)
    rows = features.read_text().splitlines()
    start = next(n for n, row in enumerate(rows) if "id: mesonext.mean" in row)
    line = next(n for n, row in enumerate(rows, 1) if n > start and "since:" in row)
    assert code == 2
    assert (f"{features}:{line}: features.3.since: is later than the release of mesonext (0.9.1) that ships it; "
            f"set since: 0.9.1 or earlier") in out, out


def test_the_notes_say_new_in_the_components_version(thirdparty, tmp_path):
    spec = load_spec(thirdparty)
    notes = release_notes(build_report(spec, tmp_path / "no-manifest.json", host_without_tools()), spec.features)
    highlights = notes[notes.index("## Highlights"):notes.index("## Stable features")]
    assert "- New in mesonext 0.9.1: mean in C, built by meson (`mesonext.mean`)." in highlights
    assert "- New in 1.0.0: integer addition in C (`oldsetup.add`), overflow raises (`oldsetup.overflow`)" in highlights
    assert "mesonext.mean" not in highlights.split("- New in 1.0.0:")[1].split("\n")[0]
