"""A release to publish, as the publish tests set one up: release.yaml in a root of its own with
its targets pointed at the test's servers, a dist/ beside the root, and the credentials a user
would put in the environment. `run` is `shipyard …` as that user runs it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from support.release_copy import point_release_yaml
from support.shipyard_process import run_shipyard, without_shipyard_settings


@dataclass(frozen=True, kw_only=True)
class PublishProject:
    """A test adds what else it needs (its user, its image repository) in a subclass."""

    root: Path
    dist: Path
    env: dict[str, str]  # the credentials: the only SHIPYARD_* variables the child sees (a test may change them)
    targets: tuple[str, ...] = ()  # a --target for every command (none: each command's own or release.yaml's)
    tries: int = 2
    verbose: bool = False  # -v: the debug log too, where no secret may appear either

    @classmethod
    def laid_out(cls, folder: Path, replacements: Mapping[str, str], env: dict[str, str], **fields: Any) -> Self:
        """The repository's release.yaml in folder/root, each `old: new` of `replacements` applied (a
        target's url or path), with feature_status.yaml and the folders they name; dist/ is folder/dist."""
        root = folder / "root"
        point_release_yaml(root, dict(replacements))
        return cls(root=root, dist=folder / "dist", env=env, **fields)

    def run(self, *args: str, tries: int | None = None, env: Mapping[str, str] | None = None) -> tuple[int, str]:
        """`shipyard [-v] --root ROOT ARGS --target … --dist DIST --tries N --first-pause 0.1 --timeout 10`
        in a process of its own whose environment is this one's without any SHIPYARD_* setting, plus
        `env` (default: the project's credentials); its exit status and its output, stdout then stderr."""
        done = run_shipyard(*self._arguments(args, tries), env=without_shipyard_settings(self.env if env is None
                                                                                        else env))
        return done.returncode, done.stdout + done.stderr

    def command(self, *args: str) -> tuple[list[str | Path], dict[str, str]]:
        """What `run` runs: the arguments after `shipyard`, and the whole environment (for
        shipyard_process.ShipyardForks, which starts several at once)."""
        return self._arguments(args, None), without_shipyard_settings(self.env)

    def _arguments(self, args: tuple[str, ...], tries: int | None) -> list[str | Path]:
        targets = [arg for target in self.targets for arg in ("--target", target)]
        return [*(["-v"] if self.verbose else []), "--root", self.root, *args, *targets, "--dist", self.dist,
                "--tries", str(tries or self.tries), "--first-pause", "0.1", "--timeout", "10"]
