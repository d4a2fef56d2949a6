"""`shipyard ci run --targets FILE`: the committed workflow's publish job publishes to stand-ins on
this machine instead of release.yaml's real targets, with the workflow file unchanged.

The targets file is copied into the run folder and mounted read-only, at the same path, into the
runner containers; the env file every step reads (0600) sets TARGETS_VARIABLE to that path, which
the publish step's plain `shipyard publish` reads (release/local_targets.py), and carries the
stand-ins' credentials from this environment: the workflow's publish step passes only the real
targets' secrets, which name other variables. Only a local run sets TARGETS_VARIABLE.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from shipyard.local_ci.act_run import RunFolder
from shipyard.release.local_targets import TARGETS_VARIABLE
from shipyard.release.spec import Release


@dataclass(frozen=True)
class PublishStandIns:
    """What a run hands its jobs for the stand-ins: the file, mounted at its own path, and the
    variables of the env file (TARGETS_VARIABLE, the stand-ins' credentials)."""

    file: Path
    env: dict[str, str] = field(repr=False)
    unset: tuple[str, ...] = ()  # credential variables a stand-in names that this environment lacks

    @property
    def mount(self) -> str:
        return f"-v {self.file}:{self.file}:ro"


def stage_stand_in_targets(source: Path, folder: RunFolder, release: Release,
                           environ: Mapping[str, str]) -> PublishStandIns:
    """Copy the targets file `source` into the run folder; `release` is the release with its
    stand-ins in place (cli/shared.load_release with --targets), whose credential variables are
    taken from `environ`."""
    dest = folder.root / "local-targets.yaml"
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, dest)
    names = list(dict.fromkeys(env for target in release.publish.values() for env in target.credential_envs()))
    env = {TARGETS_VARIABLE: str(dest), **{name: environ[name] for name in names if environ.get(name)}}
    return PublishStandIns(file=dest, env=env, unset=tuple(name for name in names if not environ.get(name)))
