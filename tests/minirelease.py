"""The fixture release (tests/fixtures/minirelease) as a git checkout, and build requests for it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from shipyard.wheel.build_request import BuildRequest

FIXTURE = Path(__file__).parent / "fixtures" / "minirelease"
GIT_ENV = {"GIT_AUTHOR_NAME": "fixture", "GIT_AUTHOR_EMAIL": "fixture@example.invalid",
           "GIT_COMMITTER_NAME": "fixture", "GIT_COMMITTER_EMAIL": "fixture@example.invalid",
           "GIT_AUTHOR_DATE": "2020-10-27T12:00:00+00:00", "GIT_COMMITTER_DATE": "2020-10-27T12:00:00+00:00"}


def make_checkout(dest: Path) -> Path:
    """A git checkout of the fixture release; the same commit (sha and time) wherever it is."""
    shutil.copytree(FIXTURE, dest, ignore=shutil.ignore_patterns("dist", ".shipyard", "__pycache__"))
    env = {**os.environ, **GIT_ENV}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "fixture"]):
        subprocess.run(["git", *args], cwd=dest, env=env, check=True)
    return dest


def request(root: Path, variant: str = "cpu", **kw) -> BuildRequest:
    return BuildRequest(variant=variant, dist=root / "dist", state=root / ".shipyard", **kw)


def forget_test_results(root: Path) -> None:
    """Drop the cached test verdicts (not the builds) of a checkout, so that its tests run again."""
    for entry in (root / ".shipyard" / "cache").glob("*/*/entry.json"):
        if json.loads(entry.read_text()).get("kind") == "test":
            shutil.rmtree(entry.parent)
