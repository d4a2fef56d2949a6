"""The images section of release.yaml and what shipyard derives from it, without an engine:
validation messages, tags, labels, the dependency platforms."""

from __future__ import annotations

import pytest
from support.synthetic_release import write_manifest

from shipyard.errors import ChannelVersionError, SpecError, UsageError
from shipyard.image.deps import compatible_platforms
from shipyard.image.hygiene import secret_needles
from shipyard.image.plan import image_labels, image_plans
from shipyard.image.tags import kind_of, moving_tag, published_tag, published_version, staging_tag
from shipyard.release.validate import load_spec


def test_tags_say_version_cuda_and_target(repo) -> None:
    spec = load_spec(repo)
    tags = [p.tags for v in ("cpu", "cuda11") for p in image_plans(spec, v)]
    assert tags == [("ember:1.7.0-cpu-runtime", "ember:nightly-cpu-runtime"),
                    ("ember:1.7.0-cpu-devel", "ember:nightly-cpu-devel"),
                    ("ember:1.7.0-cuda11.8-runtime", "ember:nightly-cuda11.8-runtime"),
                    ("ember:1.7.0-cuda11.8-devel", "ember:nightly-cuda11.8-devel")]
    (release,) = image_plans(spec, "cu118", targets=["runtime"], channel="release")
    assert release.channel_tag == "ember:release-cuda11.8-runtime"


def test_a_publish_reads_a_published_tag_apart_from_the_moving_and_staging_tags_beside_it(repo) -> None:
    """The registry holds every kind of tag of a repository side by side; a publish finds the
    version of a published tag of one kind and channel only (the moving tag follows those)."""
    (plan,) = image_plans(load_spec(repo), "cpu", targets=["runtime"], channel="nightly")
    kind = kind_of(plan.tag, plan.version)
    assert kind == "cpu-runtime" and kind_of("ember:1.7.0-cpu-runtime", "1.7.1") is None
    assert moving_tag("ember", "nightly", kind) == plan.channel_tag
    published = published_tag("ember:1.7.0.dev20261201-cpu-runtime", "nightly")
    assert published == "ember:1.7.0.dev20261201-cpu-runtime-nightly"
    tags = {published.split(":")[1]: "1.7.0.dev20261201", "nightly-cpu-runtime": None,
            staging_tag("ember:1.7.0-cpu-runtime", "nightly", "sha256:" + "ab" * 32).split(":")[1]: None,
            "1.7.0-cpu-runtime-test": None, "1.7.0-cpu-devel-nightly": None, "1.7.0-cuda11.8-runtime-nightly": None}
    assert {tag: published_version(tag, kind, "nightly") for tag in tags} == tags


def test_images_of_nightly_wheels_are_tagged_with_their_development_version(repo, tmp_path) -> None:
    """The version tag is the version of the wheels in dist/ (its manifest's); nightly wheels go
    into nightly images only."""
    spec = load_spec(repo)
    write_manifest(tmp_path, [], version="1.7.0.dev20261201")
    (plan,) = image_plans(spec, "cpu", targets=["runtime"], dist=tmp_path)
    assert plan.tags == ("ember:1.7.0.dev20261201-cpu-runtime", "ember:nightly-cpu-runtime")
    assert plan.version == "1.7.0.dev20261201"
    with pytest.raises(ChannelVersionError, match=r"images of channel release: version 1.7.0.dev20261201 is a "
                                                  r"nightly development version, and channel release takes plain"):
        image_plans(spec, "cpu", targets=["runtime"], channel="release", dist=tmp_path)
    write_manifest(tmp_path, [], version="1.7.0")
    (plain,) = image_plans(spec, "cpu", targets=["runtime"], channel="release", dist=tmp_path)
    assert plain.tag == "ember:1.7.0-cpu-runtime"


def test_labels_carry_oci_fields_and_feature_statuses(repo) -> None:
    spec = load_spec(repo)
    (plan,) = image_plans(spec, "cuda11", targets=["runtime"])
    labels = image_labels(plan, revision="abc", created_epoch=1700000000, source="https://x.example/y",
                          licenses="BSD-3-Clause")
    assert labels["org.opencontainers.image.created"] == "2023-11-14T22:13:20Z"
    assert labels["org.shipyard.image.cuda-version"] == "11.8"
    stable = labels["org.shipyard.image.features.stable"].split(",")
    assert "elastic.launcher" in stable and stable == sorted(stable)
    beta = set(labels["org.shipyard.image.features.beta"].split(","))
    assert not beta & set(stable)


def test_unknown_variant_and_channel_are_usage_errors(repo) -> None:
    spec = load_spec(repo)
    with pytest.raises(UsageError,
                       match=r"images.variants has no such variant \(it has cpu, cuda11\); did you mean 'cuda11'"):
        image_plans(spec, "cuda1")
    with pytest.raises(UsageError, match="the channels are nightly, test, release"):
        image_plans(spec, "cpu", channel="beta")


def test_images_section_is_checked_against_the_release(spec_copy) -> None:
    spec_copy.edit("release.yaml", "  components: [ember, embervision, emberaudio, emberelastic]",
                   "  components: [ember, embervison, ember-lite]")
    spec_copy.edit("release.yaml", "    cuda11:                      # measured",
                   "    cuda12.8:                    # measured")
    spec_copy.edit("release.yaml", "      devel_budget_mb: 700", "      devel_budget_mb: 100")
    with pytest.raises(SpecError) as caught:
        load_spec(spec_copy.root)
    text = str(caught.value)
    assert "images.components.1: names no component; use one of" in text and "did you mean 'embervision'" in text
    assert "images.components.2: images install wheels by name; this component builds no wheel" in text
    assert "images.variants.cuda12.8: names no variant of the release" in text
    assert "images.variants.cpu.devel_budget_mb: the devel image holds the runtime image and more" in text


def test_dependency_platforms_include_older_manylinux_tags() -> None:
    tags = compatible_platforms("manylinux_2_35_x86_64")
    assert tags[0] == "manylinux_2_35_x86_64" and "manylinux_2_17_x86_64" in tags and "manylinux2014_x86_64" in tags
    assert compatible_platforms("win_amd64") == ["win_amd64"]


def test_secret_needles_take_whole_secrets_and_config_values() -> None:
    assert secret_needles(["[global]\nindex-url = https://u:tok123456@x/\n", "short"]) == [
        b"[global]\nindex-url = https://u:tok123456@x/", b"https://u:tok123456@x/"]


def test_staged_example_scripts_do_not_depend_on_the_umask(tmp_path) -> None:
    """`shipyard repro --images` found the scripts' layer differing by the mode a umask of 002
    gave train_sgd.py; their modes and times are now fixed."""
    import os
    import zipfile
    from types import SimpleNamespace

    from shipyard.image.build import _stage_examples

    wheel = tmp_path / "emberelastic-1.7.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("emberelastic/examples/train_sgd.py", "print('train')\n")
        zf.writestr("emberelastic/examples/__init__.py", "")
    modes = []
    for umask in (0o022, 0o002):
        old = os.umask(umask)
        try:
            _stage_examples([SimpleNamespace(path=wheel)], tmp_path / f"examples-{umask:o}", 1700000000)  # type: ignore[list-item]
        finally:
            os.umask(old)
        script = tmp_path / f"examples-{umask:o}" / "train_sgd.py"
        modes.append((os.stat(script.parent).st_mode & 0o777, script.stat().st_mode & 0o777, script.stat().st_mtime))
    assert modes == [(0o755, 0o644, 1700000000)] * 2
    assert sorted(p.name for p in (tmp_path / "examples-22").iterdir()) == ["train_sgd.py"]


def test_image_push_is_removed_and_names_shipyard_publish(capsys, tmp_path) -> None:
    """One way to publish an image (#29): `image push` wrote channel tags outside gating,
    immutability and the journal; its old command line now says what to run instead."""
    from shipyard.cli import main

    code = main(["--root", str(tmp_path), "image", "push", "--variant", "cpu", "--to", "images", "--channel", "test"])
    out, err = capsys.readouterr()
    assert code == 2
    assert "shipyard image push: removed; publish images with `shipyard publish --channel CHANNEL --target " in err
    assert "Traceback" not in out + err and len(err.strip().splitlines()) == 1, err
