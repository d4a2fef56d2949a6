"""The fixture release (tests/fixtures/minirelease) as a git checkout, built once for the suite
run (shared_build) and copied for a test that changes state (own_copy), and build requests for it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from shipyard.cli import main
from shipyard.plumbing.file_lock import exclusive
from shipyard.plumbing.hashing import sha256_of
from shipyard.wheel.build_request import BuildRequest

FIXTURE = Path(__file__).parent.parent / "fixtures" / "minirelease"
# The Pythons of the shared build: the oldest and the newest the release admits, two cells
# whose tests run side by side.
SHARED_PYTHONS = ("3.9", "3.13")
# What a tool may write while a test only reads (bytecode, lock files): left out of the
# shared build's fingerprint, as git's own folder is.
UNWATCHED = (".git", ".shipyard/envs", ".shipyard/uv-cache", ".shipyard/test", ".shipyard/build")
GIT_ENV = {"GIT_AUTHOR_NAME": "fixture", "GIT_AUTHOR_EMAIL": "fixture@example.invalid",
           "GIT_COMMITTER_NAME": "fixture", "GIT_COMMITTER_EMAIL": "fixture@example.invalid",
           "GIT_AUTHOR_DATE": "2020-10-27T12:00:00+00:00", "GIT_COMMITTER_DATE": "2020-10-27T12:00:00+00:00"}


def make_checkout(dest: Path) -> Path:
    """A git checkout of the fixture release; the same commit (sha and time) wherever it is."""
    shutil.copytree(FIXTURE, dest, ignore=shutil.ignore_patterns("dist", ".shipyard", "__pycache__"))
    env = {**os.environ, **GIT_ENV}
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=dest, env=env, check=True)
    # What shipyard writes is never part of the release's sources: a later `git add -A` (a test's
    # new commit) leaves it out, as a real release's .gitignore would.
    (dest / ".git" / "info" / "exclude").write_text("/.shipyard/\n/dist/\n")
    for args in (["add", "-A"], ["commit", "-q", "-m", "fixture"]):
        subprocess.run(["git", *args], cwd=dest, env=env, check=True)
    return dest


def request(root: Path, variant: str = "cpu", **kw) -> BuildRequest:
    return BuildRequest(variant=variant, dist=root / "dist", state=root / ".shipyard", **kw)


def forget_test_results(root: Path) -> None:
    """Drop the cached test verdicts (not the builds) of a checkout, so that its tests run again."""
    for entry in (root / ".shipyard" / "cache").glob("*/*/entry.json"):
        if json.loads(entry.read_text()).get("kind") == "test":
            shutil.rmtree(entry.parent)


def shared_build(folder: Path) -> Path:
    """The fixture release in `folder`/release, signed, its CPU wheels for SHARED_PYTHONS built and
    tested as `nox -s build-cpu` does; made once for every process that asks with the same
    `folder` (pytest-xdist workers wait on the lock and reuse it). Tests only read it."""
    root = folder / "release"
    with exclusive(folder / ".build.lock"):
        done = folder / "built"
        if not done.is_file():
            # A build that stopped half-way (a failed test run, a killed worker) starts again clean.
            shutil.rmtree(root, ignore_errors=True)
            make_checkout(root)
            assert main(["--root", str(root), "keygen"]) == 0
            pythons = [arg for python in SHARED_PYTHONS for arg in ("--python", python)]
            code = main(["--root", str(root), "build", "--variant", "cpu", *pythons, "--test-jobs", "2"])
            assert code == 0, f"the shared build of the fixture release failed ({root}); its output is above"
            done.write_text(json.dumps(fingerprint(root), indent=1))
    return root


def fingerprint(root: Path) -> dict[str, str]:
    """sha256 of every file of a built checkout a test that only reads it must leave alone:
    sources, release.yaml, dist/, the build cache and keys."""
    unwatched = [root / part for part in UNWATCHED]
    return {file.relative_to(root).as_posix(): sha256_of(file) for file in sorted(root.rglob("*"))
            if file.is_file() and not file.name.startswith(".") and not any(file.is_relative_to(u) for u in unwatched)}


def changed_since_built(root: Path) -> list[str]:
    """The files of the shared build at `root` that differ from what shared_build left (changed,
    added or removed), sorted."""
    before = json.loads((root.parent / "built").read_text())
    now = fingerprint(root)
    return sorted(path for path in before.keys() | now.keys() if before.get(path) != now.get(path))


def own_copy(built: Path, dest: Path, *, dist: bool = True) -> Path:
    """A copy of the built checkout `built` at `dest` for a test that changes state: the sources, git,
    the `.shipyard` state (the build cache, whose keys name contents and never the folder: a
    rebuild here finds its cells cached), and `dist/` unless `dist` is False."""
    state = built / ".shipyard"
    # CMake's build folders and the cells' test folders: a build or a test run starts from an empty one.
    left_out = {state / "build", state / "test", *(() if dist else (built / "dist",))}
    # Build venvs and uv's cache are most of the files, and tools only ever add or replace files
    # there (pip, uv, Python's bytecode writes), never rewrite one in place: hard links, not copies.
    linked = (state / "envs", state / "uv-cache")

    def ignore(folder: str, names: list[str]) -> list[str]:
        return [name for name in names if Path(folder) / name in left_out]

    def copy(source: str, target: str) -> None:
        if Path(source).is_relative_to(linked[0]) or Path(source).is_relative_to(linked[1]):
            try:
                os.link(source, target)
                return
            except OSError:  # another file system
                pass
        shutil.copy2(source, target)

    # Venvs hold symlinks to their interpreter: copied as links, not as the interpreter's bytes.
    shutil.copytree(built, dest, symlinks=True, ignore=ignore, copy_function=copy)
    return dest
