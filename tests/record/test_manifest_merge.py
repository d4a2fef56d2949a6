"""`shipyard manifest merge|gate`: separate jobs' dist/ folders become one release record."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from support.synthetic_release import features, make_wheel, record, write_manifest

from shipyard.cli import main
from shipyard.errors import MergeError
from shipyard.plumbing.hashing import sha256_of
from shipyard.record.manifest import read_manifest


def _fragment(root: Path, name: str, project: str, tag: str, *, payload: str = "", stable: str = "passed",
              version: str = "1.7.0") -> Path:
    dist = root / name
    wheel = make_wheel(dist / "whl" / tag / project, project, version, payload=payload)
    write_manifest(dist, [record(dist, wheel, component=project, package_type="wheel", variant=tag, tag=tag,
                                 tests=features(stable=stable), version=version)], version)
    return dist


def _merge(repo: Path, dist: Path, *fragments: Path) -> int:
    return main(["--root", str(repo), "manifest", "merge", "--dist", str(dist), *map(str, fragments)])


def test_merge_makes_one_manifest_and_index_and_is_idempotent(repo, tmp_path, capsys):
    a = _fragment(tmp_path, "fragment-a", "ember", "cpu")
    b = _fragment(tmp_path, "fragment-b", "emberaudio", "cpu")
    dist = tmp_path / "dist"
    assert _merge(repo, dist, a, b) == 0
    assert "merged 2 fragments (2 records: 2 wheel files" in capsys.readouterr().out
    manifest = json.loads((dist / "manifest.json").read_text())
    assert sorted(x["component"] for x in manifest["artifacts"]) == ["ember", "emberaudio"]
    index = json.loads((dist / "whl" / "cpu" / "index.json").read_text())
    assert [p["name"] for p in index["projects"]] == ["ember", "emberaudio"]
    before = (dist / "manifest.json").read_bytes()
    assert _merge(repo, dist, b, a) == 0
    assert (dist / "manifest.json").read_bytes() == before


def test_the_fragments_of_one_nightly_merge_under_its_version_and_two_nightlies_do_not(repo, tmp_path, capsys):
    a = _fragment(tmp_path, "fragment-a", "ember", "cpu", version="1.7.0.dev20261201")
    b = _fragment(tmp_path, "fragment-b", "emberaudio", "cpu", version="1.7.0.dev20261201")
    dist = tmp_path / "dist"
    assert _merge(repo, dist, a, b) == 0
    assert json.loads((dist / "manifest.json").read_text())["version"] == "1.7.0.dev20261201"
    other = _fragment(tmp_path, "fragment-c", "emberelastic", "cpu", version="1.7.0.dev20261202")
    assert _merge(repo, tmp_path / "dist2", a, other) == MergeError.exit_code
    err = " ".join(capsys.readouterr().err.split())
    assert "version 1.7.0.dev20261202, but another fragment is 1.7.0.dev20261201" in err, err
    # Another release's nightly is not this release's.
    foreign = _fragment(tmp_path, "fragment-d", "ember", "cpu", version="1.8.0.dev20261201")
    assert _merge(repo, tmp_path / "dist3", foreign) == MergeError.exit_code
    assert "release ember 1.8.0.dev20261201, but release.yaml is ember 1.7.0" in capsys.readouterr().err


def test_two_fragments_disagreeing_about_a_cell_are_refused(repo, tmp_path, capsys):
    a = _fragment(tmp_path / "one", "fragment-a", "ember", "cpu", payload="one")
    b = _fragment(tmp_path / "two", "fragment-b", "ember", "cpu", payload="two")
    dist = tmp_path / "dist"
    assert _merge(repo, dist, a, b) == MergeError.exit_code
    err = capsys.readouterr().err
    assert "cell ember-cpu-ember-1.7.0-py3-none-any.whl:" in err and "one cell must be built by one job only" in err
    assert not (dist / "manifest.json").exists()


def test_a_damaged_fragment_is_refused_before_anything_is_written(repo, tmp_path, capsys):
    a = _fragment(tmp_path, "fragment-a", "ember", "cpu")
    wheel = next((a / "whl").rglob("*.whl"))
    wheel.write_bytes(wheel.read_bytes() + b"x")
    dist = tmp_path / "dist"
    assert _merge(repo, dist, a) == MergeError.exit_code
    assert "the fragment is damaged: rerun its job" in capsys.readouterr().err
    assert not dist.exists()


def test_gate_blocks_a_failing_stable_feature_on_a_block_channel_only(repo, tmp_path, capsys):
    dist = tmp_path / "dist"
    assert _merge(repo, dist, _fragment(tmp_path, "fragment-a", "ember", "cpu", stable="failed")) == 0
    capsys.readouterr()
    assert main(["--root", str(repo), "manifest", "gate", "--dist", str(dist), "--channel", "nightly"]) == 0
    assert "marked" in capsys.readouterr().out
    code = main(["--root", str(repo), "manifest", "gate", "--dist", str(dist), "--channel", "release"])
    assert code != 0
    err = capsys.readouterr().err
    assert "channel release (gate: block) refuses artifacts with a stable feature not proven by its tests" in err


def test_verified_cuda_archs_travel_through_a_merge_and_old_manifests_still_load(repo, tmp_path):
    from shipyard.record.manifest import CudaArchs
    from shipyard.release.cuda_archs import DeviceCode

    # Two kernel-bearing binaries that disagree: only what both carry is a "runs on" fact.
    archs = CudaArchs.common_to([DeviceCode(frozenset({"sm_70", "sm_100", "sm_90"}), frozenset({"sm_100"})),
                                 DeviceCode(frozenset({"sm_70", "sm_100"}), frozenset({"sm_100", "sm_90"})),
                                 DeviceCode()])  # a binary without device code says nothing
    assert archs == CudaArchs(sass=("sm_70", "sm_100"), ptx=("compute_100",))
    assert CudaArchs.common_to([DeviceCode(), DeviceCode()]) is None
    fragment = _fragment(tmp_path, "fragment", "ember", "cu118")
    manifest = json.loads((fragment / "manifest.json").read_text())
    manifest["artifacts"][0]["cuda_archs"] = {"sass": ["sm_100", "sm_70"], "ptx": ["compute_100"]}
    (fragment / "manifest.json").write_text(json.dumps(manifest))
    dist = tmp_path / "dist"
    assert _merge(repo, dist, fragment) == 0
    merged = json.loads((dist / "manifest.json").read_text())["artifacts"][0]
    assert merged["cuda_archs"] == {"sass": ["sm_70", "sm_100"], "ptx": ["compute_100"]}  # numeric order
    # A manifest from before the field (no "cuda_archs" key) loads, and says nothing about archs.
    del manifest["artifacts"][0]["cuda_archs"]
    (fragment / "manifest.json").write_text(json.dumps(manifest))
    loaded = read_manifest(fragment / "manifest.json")
    assert loaded is not None and loaded.artifacts[0].cuda_archs is None


def test_a_package_two_jobs_built_stays_proven_by_the_cells_of_either(repo, tmp_path, capsys):
    """The conda mutex (ember-variant-1.0-cpu) is built, the same bytes, by every conda job of its
    variant, and proven by the packages that depend on it in each job; the pure packages' job has
    none. Seen in `nox -s pipeline-linux`: the merge kept that job's record alone, and the test
    channel's gate refused the release ("its tests did not run"). Both merges, of fragments and
    into a dist/ that holds one already, keep the cells of either."""
    tested = _fragment(tmp_path, "fragment-conda-ember", "ember", "cpu")
    shared = make_wheel(tmp_path / "shared", "embershared", "1.7.0")
    [ember] = read_manifest(tested / "manifest.json").artifacts
    fragments = []
    for name, proven_by, extra in (("fragment-conda-ember", (ember.cell_id,), [ember]),
                                   ("fragment-conda-pure", (), [])):
        dist = tmp_path / name
        copy = dist / "whl" / "cpu" / "embershared" / shared.name
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shared, copy)
        untested = record(dist, copy, component="embershared", package_type="wheel", variant="cpu", tag="cpu",
                          tests=None).model_copy(update={"proven_by": proven_by})
        write_manifest(dist, [*extra, untested], "1.7.0")
        fragments.append(dist)
    for merged, steps in (("dist-at-once", [fragments]), ("dist-one-by-one", [[f] for f in fragments])):
        dist = tmp_path / merged
        for step in steps:
            assert _merge(repo, dist, *step) == 0
        records = {r.component: r for r in read_manifest(dist / "manifest.json").artifacts}
        assert records["embershared"].proven_by == (ember.cell_id,), (merged, records["embershared"])
        capsys.readouterr()
        assert main(["--root", str(repo), "manifest", "gate", "--dist", str(dist), "--channel", "test"]) == 0, \
            capsys.readouterr().err


def test_the_merge_carries_every_recorded_file_a_kind_places_nowhere_else(repo, tmp_path, capsys):
    """A mobile job's archives (and an sdist) are recorded with their path in the fragment; the merged
    dist/ holds each at that path, with the recorded bytes. Seen in `nox -s pipeline-linux`: the
    merge copied only unrecorded files beside the wheels and conda packages, so the release's
    manifest named mobile archives its dist/ did not hold."""
    fragments = []
    for name, folder, file_name, kind in (("fragment-mobile", "mobile", "ember-lite-1.7.0-host.tar.gz", "mobile"),
                                          ("fragment-sdist", "sdist", "emberaudio-1.7.0.tar.gz", "sdist")):
        dist = tmp_path / name
        made = dist / folder / file_name
        made.parent.mkdir(parents=True)
        made.write_bytes(name.encode() * 100)
        write_manifest(dist, [record(dist, made, component="ember-lite", package_type=kind, variant="cpu",
                                     tag="cpu", tests=features())], "1.7.0")
        fragments.append(dist)
    dist = tmp_path / "dist"
    assert _merge(repo, dist, *fragments) == 0, capsys.readouterr().err
    records = read_manifest(dist / "manifest.json").artifacts
    assert sorted(r.path for r in records) == ["mobile/ember-lite-1.7.0-host.tar.gz", "sdist/emberaudio-1.7.0.tar.gz"]
    for made in records:
        assert sha256_of(dist / made.path) == made.sha256, made.path
