"""The trees shipyard writes itself (#29 item 6): the static wheel tree and the served conda
channel keep the live generation and the one live before it (a download in flight may still read
from it), remove a generation a killed publish staged and never switched to, and check a conda
package against the manifest before the switch."""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

import pytest
from support.synthetic_release import build_conda_packages, make_wheel

from shipyard.errors import ChannelError
from shipyard.plumbing.hashing import sha256_of
from shipyard.plumbing.retry import RetryPolicy
from shipyard.publish.conda_channel import CondaChannelBackend
from shipyard.publish.credentials import Credentials
from shipyard.publish.journal import Journal
from shipyard.publish.plan import PublishFile
from shipyard.publish.static_tree import StaticTreeBackend
from shipyard.publish.target import Backend, TargetContext
from shipyard.release.destinations import PublishTarget


def _backend(cls: type[Backend], kind: str, root: Path) -> Backend:
    # Port 9 (discard): nothing answers there, so a read-back over HTTP fails at once.
    target = PublishTarget(name="site", kind=kind, url="http://127.0.0.1:9/", path="site",  # type: ignore[arg-type]
                           token_env="SHIPYARD_CONDA_TOKEN" if kind == "conda" else None)
    ctx = TargetContext(target, root, Credentials(token="t0ken"), RetryPolicy(tries=1, first_pause=0, timeout=2),
                        Journal(root / "journal.jsonl"), scrub=lambda text: text, progress=lambda _: None)
    return cls(ctx)


def _wheel(tmp_path: Path, version: str) -> PublishFile:
    path = make_wheel(tmp_path / "wheels" / version, "ember", version)
    return PublishFile("cpu", path.name, path, sha256_of(path), "ember", version, path.name)


def _published(generation: Path) -> list[str]:
    return sorted(p.name for p in generation.glob("cpu/ember/*.whl"))


def test_a_generation_orphaned_by_a_kill_goes_and_the_live_and_previous_ones_stay(tmp_path: Path) -> None:
    backend = _backend(StaticTreeBackend, "static", tmp_path)
    link = tmp_path / "site" / "stable"
    backend.release("stable", [_wheel(tmp_path, "1.0")])
    backend.release("stable", [_wheel(tmp_path, "1.1")])
    assert os.readlink(link) == ".stable-gen-2"
    # What a kill -9 mid-stage leaves: the next generation half-staged (hard links of the live
    # files, no index), never switched to; the kernel released the lock with the process.
    orphan = link.parent / ".stable-gen-3"
    (orphan / "cpu" / "ember").mkdir(parents=True)
    for wheel in (link / "cpu" / "ember").glob("*.whl"):
        os.link(wheel, orphan / "cpu" / "ember" / wheel.name)
    # A reader resolved the link a moment before the next publish swaps it, and is downloading.
    reading = link.resolve()
    backend.release("stable", [_wheel(tmp_path, "1.2")])

    assert os.readlink(link) == ".stable-gen-4"
    assert _published(link) == ["ember-1.0-py3-none-any.whl", "ember-1.1-py3-none-any.whl",
                                "ember-1.2-py3-none-any.whl"]
    # The previous generation is whole: the reader's download completes.
    assert reading == link.parent / ".stable-gen-2"
    assert _published(reading) == ["ember-1.0-py3-none-any.whl", "ember-1.1-py3-none-any.whl"]
    assert (reading / "cpu" / "ember" / "index.json").is_file()
    gens = sorted(p.name for p in link.parent.iterdir() if p.name.startswith(".stable-gen-"))
    assert gens == [".stable-gen-2", ".stable-gen-4"]  # the orphan (3) and the older one (1) went


def test_a_static_publish_keeps_the_previous_generation_for_downloads_in_flight(tmp_path: Path) -> None:
    backend = _backend(StaticTreeBackend, "static", tmp_path)
    link = tmp_path / "site" / "stable"
    for version in ("1.0", "1.1", "1.2"):
        backend.release("stable", [_wheel(tmp_path, version)])
    gens = sorted(p.name for p in link.parent.iterdir() if p.name.startswith(".stable-gen-"))
    assert gens == [".stable-gen-2", ".stable-gen-3"] and os.readlink(link) == ".stable-gen-3"


@pytest.fixture(scope="module")
def conda_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    [package] = build_conda_packages(tmp_path_factory.mktemp("conda") / "built", ["cpu"])
    return package


@pytest.mark.slow
def test_a_conda_package_that_differs_from_the_manifest_is_refused_before_the_switch(
        conda_package: Path, tmp_path: Path) -> None:
    backend = _backend(CondaChannelBackend, "conda", tmp_path)
    link = tmp_path / "site" / "stable"
    live = link.parent / ".stable-gen-1" / "noarch"
    live.mkdir(parents=True)
    (live / "repodata.json").write_text('{"info": {"subdir": "noarch"}, "packages": {}, "packages.conda": {}}\n')
    link.symlink_to(".stable-gen-1")
    # The manifest's file, then other bytes under its name (still a valid package: a zip comment
    # changes the bytes, not the contents) after run.py checked it and before the stage copied it.
    package = shutil.copy(conda_package, tmp_path / conda_package.name)
    tested = sha256_of(Path(package))
    with zipfile.ZipFile(package, "a") as archive:
        archive.comment = b"changed after it was tested"
    changed = sha256_of(Path(package))

    with pytest.raises(ChannelError) as refused:
        backend.release("stable", [PublishFile("conda", conda_package.name, Path(package), tested,
                                               "shipyard-featured", "1.7.0", conda_package.name)])
    assert f"sha256 {changed}" in str(refused.value) and f"records {tested}" in str(refused.value)
    assert os.readlink(link) == ".stable-gen-1"
    assert backend.listing("stable") == []
    assert sorted(p.name for p in link.parent.iterdir() if p.name.startswith(".stable-gen-")) == [".stable-gen-1"]
