"""`shipyard repro`: build the selected cells twice from clean clones (different folders, a
different time, time zone and umask) and compare every artifact's bytes; diffoscope explains
each difference.

Compared: everything the builds put in dist/ (wheels, the wheel indexes, conda packages,
mobile tarballs, SBOMs inside them), except manifest.json, which records how long each step took.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from shipyard import command
from shipyard.errors import ShipyardError, ToolError

# Two clones whose paths differ in length: a path that leaks into a binary changes its size too.
CLONE_PATHS = ("one/src", "second-build-in-a-longer-folder/x/src")
# What differs between the two runs besides the folder: the clock (the second runs later), the
# time zone and the umask.
RUN_ENVIRONMENTS = ({"TZ": "UTC"}, {"TZ": "Asia/Kolkata"})
UMASKS = (0o022, 0o002)
DIFFOSCOPE_LINES = 40


@dataclass(frozen=True)
class ReproRequest:
    variant: str = "cpu"
    pythons: tuple[str, ...] = ()
    components: tuple[str, ...] = ()
    mobile_targets: tuple[str, ...] = ()  # also build these ember-lite targets
    conda: bool = False  # also build the variant's conda packages (no tests)
    work: Path = Path(".shipyard/repro")


@dataclass
class ReproReport:
    identical: list[str] = field(default_factory=list)  # dist-relative paths
    different: dict[str, str] = field(default_factory=dict)  # path -> diffoscope's first lines
    only_in_one: list[str] = field(default_factory=list)
    commit: str = ""  # the commit both builds were made from

    @property
    def total(self) -> int:
        return len(self.identical) + len(self.different) + len(self.only_in_one)

    @property
    def ok(self) -> bool:
        return self.total > 0 and not self.different and not self.only_in_one

    def by_kind(self) -> dict[str, tuple[int, int]]:
        """{artifact kind: (identical, total)}."""
        same = Counter(artifact_kind(p) for p in self.identical)
        every = Counter(artifact_kind(p) for p in [*self.identical, *self.different, *self.only_in_one])
        return {kind: (same[kind], every[kind]) for kind in sorted(every)}


def artifact_kind(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    for suffix, kind in ((".whl", "wheel"), (".conda", "conda"), (".tar.bz2", "conda"), (".tar.gz", "mobile"),
                         (".aar", "mobile"), (".html", "index"), (".json", "index"),
                         (".json.zst", "index")):
        if name.endswith(suffix):
            return kind
    return "other"


def _clone(source: Path, dest: Path, commit: str) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    # A clone is the clean state: the commit's files only, no dist/, no .shipyard/ caches. Both
    # clones check out the one commit resolved at the start, even if HEAD moves meanwhile.
    command.run(["git", "clone", "--quiet", "--no-hardlinks", "--no-checkout", source, dest], timeout=600,
                what=f"clone to {dest}")
    command.run(["git", "-C", dest, "checkout", "--quiet", "--detach", commit], timeout=600,
                what=f"check out {commit[:12]} in {dest}")


def _build(clone: Path, request: ReproRequest, run: int) -> None:
    env = dict(RUN_ENVIRONMENTS[run])
    shipyard = [sys.executable, "-m", "shipyard.cli", "--root", str(clone)]
    selection = [a for p in request.pythons for a in ("--python", p)]
    selection += [a for c in request.components for a in ("--component", c)]
    old = os.umask(UMASKS[run])
    try:
        command.run([*shipyard, "build", "--variant", request.variant, "--no-tests", *selection],
                    extra_env=env, timeout=7200, what=f"repro build {run + 1} ({clone})")
        if request.mobile_targets:
            command.run([*shipyard, "build-mobile", *[a for t in request.mobile_targets for a in ("--target", t)]],
                        extra_env=env, timeout=7200, what=f"repro mobile build {run + 1}")
        if request.conda:
            command.run([*shipyard, "conda", "build", "--variant", request.variant, "--no-tests", *selection],
                        extra_env=env, timeout=7200, what=f"repro conda build {run + 1}")
    finally:
        os.umask(old)


def _files(dist: Path) -> dict[str, str]:
    return {p.relative_to(dist).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(dist.rglob("*")) if p.is_file() and p.name != "manifest.json"
            and not p.name.startswith(".") and p.relative_to(dist).parts[0] != "provenance"}


def diffoscope(first: Path, second: Path) -> str:
    """diffoscope's first lines on where two files differ (or why it could not run)."""
    if shutil.which("diffoscope") is None:
        return "diffoscope is not installed (apt-get install diffoscope-minimal; ci/bootstrap.sh does)"
    try:
        result = command.run(["diffoscope", "--text", "-", "--no-progress", first, second], check=False,
                             timeout=900, what=f"diffoscope {first.name}")
    except ToolError as exc:
        return f"diffoscope failed: {exc}"
    return "\n".join(result.stdout.splitlines()[:DIFFOSCOPE_LINES])


def compare(first: Path, second: Path) -> ReproReport:
    """Compare two dist folders file by file."""
    one, two = _files(first), _files(second)
    report = ReproReport()
    for path in sorted(one.keys() | two.keys()):
        if path not in one or path not in two:
            report.only_in_one.append(path)
        elif one[path] == two[path]:
            report.identical.append(path)
        else:
            report.different[path] = diffoscope(first / path, second / path)
    return report


def reproduce(source: Path, request: ReproRequest, progress=lambda _: None) -> ReproReport:  # noqa: ANN001
    """Build `request`'s cells from two clean clones of `source` (a git checkout) and compare."""
    if not (source / ".git").exists():
        raise ShipyardError(f"{source}: not a git checkout; repro builds from clean clones of one")
    commit = command.run(["git", "-C", source, "rev-parse", "HEAD"], timeout=60).stdout.strip()
    clones = [request.work.resolve() / p for p in CLONE_PATHS]
    for run, clone in enumerate(clones):
        progress(f"repro: clone {commit[:12]} and build {run + 1} of 2 in {clone}")
        _clone(source, clone, commit)
        _build(clone, request, run)
    progress("repro: compare")
    report = compare(clones[0] / "dist", clones[1] / "dist")
    report.commit = commit
    return report


def summary_lines(report: ReproReport) -> Sequence[str]:
    lines = [f"{kind}: {same} of {total} identical" for kind, (same, total) in report.by_kind().items()]
    percent = 100 * len(report.identical) / report.total if report.total else 0
    of = f" (commit {report.commit[:12]})" if report.commit else ""
    lines.append(f"total: {len(report.identical)} of {report.total} files identical ({percent:.0f} %){of}")
    lines += [f"only in one build: {p}" for p in report.only_in_one]
    for path, diff in report.different.items():
        lines += [f"DIFFERENT: {path}", diff]
    return lines
