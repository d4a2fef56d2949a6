"""A local targets file (`shipyard --targets FILE`, #51 item 5): the committed release.yaml names
the real targets, the file a stand-in for each under the same name, and `publish` goes to the
stand-ins; a target without a stand-in, or a stand-in of no target, stops the run in one line per
problem, naming the file; the workflow commands refuse it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml
from support.release_copy import LOCAL_TARGETS, REPO, point_release_yaml
from support.synthetic_release import features, make_wheel, record, write_manifest

from shipyard.cli import main

VERSION = "1.7.0.dev20261206"


def _targets_file(root: Path, tree: Path, *, drop: str | None = None, extra: bool = False,
                  name: str = "targets.local.yaml") -> Path:
    """release.yaml's publish targets with the static tree pointed at `tree`: the stand-ins."""
    publish = yaml.safe_load((root / "release.yaml").read_text())["publish"]
    publish["wheels-tree"] = {"kind": "static", "url": "http://127.0.0.1:8999/whl/", "path": str(tree)}
    if drop:
        del publish[drop]
    if extra:
        publish["nightly-mirror"] = {"kind": "static", "url": "http://127.0.0.1:8998/whl/", "path": str(tree)}
    path = root / name
    path.write_text(yaml.safe_dump({"publish": publish}, sort_keys=False))
    return path


def test_publish_goes_to_the_stand_ins_of_a_local_targets_file(tmp_path, capsys):
    root = tmp_path / "root"
    point_release_yaml(root, {})
    dist = tmp_path / "dist"
    wheel = make_wheel(dist / "whl" / "cpu" / "uocore", "uocore", f"{VERSION}+cpu")
    write_manifest(dist, [record(dist, wheel, component="uocore", package_type="wheel", variant="cpu", tag="cpu",
                                 tests=features(), version=VERSION)], VERSION)
    tree = tmp_path / "stand-in-tree"
    targets = _targets_file(root, tree)
    argv = ["--root", str(root), "--targets", str(targets), "publish", "--channel", "nightly", "--target",
            "wheels-tree", "--dist", str(dist), "--state", str(tmp_path / "state")]
    assert main(argv) == 0, capsys.readouterr()
    page = json.loads((tree / "nightly" / "cpu" / "uocore" / "index.json").read_text())
    assert [f["filename"] for f in page["files"]] == [wheel.name]
    assert not (root / "dist" / "site").exists()  # release.yaml's own tree got nothing
    # Every target needs its stand-in, and the file names no other target.
    for broken, says in ((_targets_file(root, tree, drop="images", name="short.yaml"),
                          "release.yaml's target images has no stand-in"),
                         (_targets_file(root, tree, extra=True, name="long.yaml"),
                          "release.yaml names no target nightly-mirror")):
        assert main([*argv[:3], str(broken), *argv[4:]]) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert f"{broken}:" in err and says in err, err
    # The workflows come from release.yaml's own targets.
    assert main(["--root", str(root), "--targets", str(targets), "ci", "generate"]) == 2
    assert "the workflows are generated from release.yaml's own publish targets" in capsys.readouterr().err


def test_the_committed_release_publishes_to_the_committed_stand_ins_when_the_variable_names_them(
        tmp_path, monkeypatch, capsys):
    """ember's release.yaml names the real places; from here, without their credentials, a publish
    to the bucket stops before any request (its role's variable is unset). SHIPYARD_TARGETS, which
    `ci run --targets` sets in the publish job, sends a plain `shipyard publish` to the stand-ins
    of local-targets.yaml instead, as --targets does."""
    root = tmp_path / "root"
    point_release_yaml(root, {})
    shutil.copy(REPO / "release.yaml", root / "release.yaml")  # the real targets, not the test copy's stand-ins
    tree = tmp_path / "stand-in-tree"
    targets = tmp_path / "local-targets.yaml"
    targets.write_text(LOCAL_TARGETS.read_text().replace("path: dist/site/whl", f"path: {tree}"))
    dist = tmp_path / "dist"
    wheel = make_wheel(dist / "whl" / "cpu" / "uocore", "uocore", f"{VERSION}+cpu")
    write_manifest(dist, [record(dist, wheel, component="uocore", package_type="wheel", variant="cpu", tag="cpu",
                                 tests=features(), version=VERSION)], VERSION)
    argv = ["--root", str(root), "publish", "--channel", "nightly", "--target", "wheels-tree", "--dist", str(dist),
            "--state", str(tmp_path / "state")]
    for name in ("SHIPYARD_TARGETS", "SHIPYARD_S3_ROLE_ARN", "AWS_ACCESS_KEY_ID"):
        monkeypatch.delenv(name, raising=False)
    assert main(argv) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "publish.wheels-tree.role_arn_env: the environment variable SHIPYARD_S3_ROLE_ARN is not set" in err, err
    monkeypatch.setenv("SHIPYARD_TARGETS", str(targets))
    assert main(argv) == 0, capsys.readouterr()
    assert f"stand-ins: the targets of {targets} (SHIPYARD_TARGETS)" in " ".join(capsys.readouterr().err.split())
    page = json.loads((tree / "nightly" / "cpu" / "uocore" / "index.json").read_text())
    assert [f["filename"] for f in page["files"]] == [wheel.name]
