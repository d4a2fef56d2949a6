"""`shipyard repro`: build the selected cells twice from clean clones (different folders, a
different time, time zone and umask) and compare every artifact's bytes; diffoscope explains
each difference.

Compared: everything the builds put in dist/ (wheels, the wheel indexes, conda packages,
mobile tarballs, SBOMs inside them), except manifest.json, which records how long each step took;
with `images`, the variant's runtime image of each clone too (supply/image_repro.py), built under
its own repository name so that the release's tags in a shared engine stay where they were.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from shipyard.errors import BuildError, InputError, ToolError, UsageError
from shipyard.plumbing import command
from shipyard.plumbing.hashing import sha256_of
from shipyard.record.manifest import read_manifest
from shipyard.release.kinds import KINDS, kind_of
from shipyard.supply.image_repro import ImageComparison, compare_images, save_image

# Two clones whose paths differ in length: a path that leaks into a binary changes its size too.
CLONE_PATHS = ("one/src", "second-build-in-a-longer-folder/x/src")
# What differs between the two runs besides the folder: the clock (the second runs later), the
# time zone and the umask.
RUN_ENVIRONMENTS = ({"TZ": "UTC"}, {"TZ": "Asia/Kolkata"})
UMASKS = (0o022, 0o002)
DIFFOSCOPE_LINES = 40
# The repository both clones' images are built under (`image build --repository`).
IMAGE_REPOSITORY = "shipyard-repro"


@dataclass(frozen=True)
class ReproRequest:
    variant: str = "cpu"
    pythons: tuple[str, ...] = ()
    components: tuple[str, ...] = ()
    mobile_targets: tuple[str, ...] = ()  # also build these ember-lite targets
    conda: bool = False  # also build the variant's conda packages (no tests)
    conda_channels: tuple[str, ...] = ()  # their dependency channels (default: release.yaml's conda.channels)
    bootstrap_channel: bool = False  # search the bootstrap channel first (a machine without conda-forge)
    images: bool = False  # also build the variant's runtime image (from the untested wheels)
    work: Path = Path(".shipyard/repro")


@dataclass
class ReproReport:
    identical: list[str] = field(default_factory=list)  # dist-relative paths
    different: dict[str, str] = field(default_factory=dict)  # path -> diffoscope's first lines
    only_in_one: list[str] = field(default_factory=list)
    images: list[ImageComparison] = field(default_factory=list)
    commit: str = ""  # the commit both builds were made from
    # The package type of each file a build's manifest records (dist-relative path -> sdist, mobile …):
    # an sdist and a mobile tarball share the ending .tar.gz, and only the record says which it is.
    recorded: dict[str, str] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return len(self.identical) + len(self.different) + len(self.only_in_one)

    @property
    def ok(self) -> bool:
        return (self.total > 0 and not self.different and not self.only_in_one
                and all(image.reproducible for image in self.images))

    def by_kind(self) -> dict[str, tuple[int, int]]:
        """{artifact kind: (identical, total)}."""
        same = Counter(self.kind_of_file(p) for p in self.identical)
        every = Counter(self.kind_of_file(p) for p in [*self.identical, *self.different, *self.only_in_one])
        kinds = {kind: (same[kind], every[kind]) for kind in sorted(every)}
        if self.images:
            kinds["image"] = (sum(image.reproducible for image in self.images), len(self.images))
        return kinds

    def kind_of_file(self, path: str) -> str:
        """The kind of a dist-relative file: its manifest record's package type, else by its ending."""
        return self.recorded.get(path) or artifact_kind(path)


# What a dist/ file the manifest does not record is, by its ending: an SBOM before the index pages
# and JSON files, an artifact kind's file by the kind's own endings where only one kind has that
# ending (.tar.gz is a mobile tarball's and an sdist's: the record decides, ReproReport.recorded).
_KIND_SUFFIXES = Counter(suffix for kind in KINDS.values() for suffix in kind.file_suffixes)
_SUFFIXES = ((".cdx.json", "sbom"), *((suffix, kind.name) for kind in KINDS.values() for suffix in kind.file_suffixes
                                      if _KIND_SUFFIXES[suffix] == 1),
             (".html", "index"), (".json", "index"), (".json.zst", "index"))


def artifact_kind(path: str) -> str:
    """What an unrecorded dist/ file is by its ending (sbom, index, a kind's name), or "other"."""
    name = path.rsplit("/", 1)[-1]
    for suffix, kind in _SUFFIXES:
        if name.endswith(suffix):
            return kind
    return "other"


def recorded_kinds(dist: Path) -> dict[str, str]:
    """{dist-relative path: package type} of every file dist/manifest.json records; {} without a
    readable manifest (the files are then told apart by their endings)."""
    try:
        manifest = read_manifest(dist / "manifest.json")
    except InputError:
        return {}
    return {a.path: a.package_type for a in (manifest.artifacts if manifest else ()) if a.path}


def _clone(source: Path, dest: Path, commit: str) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    # A clone is the clean state: the commit's files only, no dist/, no .shipyard/ caches. Both
    # clones check out the one commit resolved at the start, even if HEAD moves meanwhile.
    # --end-of-options: a path that starts with '-' stays a path, never an option. `git checkout`
    # refuses it after --detach (git 2.39), so the commit is checked to be what it must be: the
    # full hex name git resolved at the start, which no option starts like.
    command.run(["git", "clone", "--quiet", "--no-hardlinks", "--no-checkout", "--end-of-options", source, dest],
                timeout=600, what=f"clone to {dest}")
    if not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", commit):
        raise ToolError(f"repro: {commit!r} is not a commit git resolved; run repro from a git checkout")
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
            channels = [a for c in request.conda_channels for a in ("--channel", c)]
            channels += ["--bootstrap-channel"] if request.bootstrap_channel else []
            command.run([*shipyard, "conda", "build", "--variant", request.variant, "--no-tests", *selection,
                         *channels],
                        extra_env=env, timeout=7200, what=f"repro conda build {run + 1}")
        if request.images:
            command.run([*shipyard, "image", "build", "--variant", request.variant, "--target", "runtime",
                         "--allow-untested", "--no-cache", "--repository", IMAGE_REPOSITORY],
                        extra_env=env, timeout=7200, what=f"repro image build {run + 1}")
    finally:
        os.umask(old)


def _files(dist: Path) -> dict[str, str]:
    return {p.relative_to(dist).as_posix(): sha256_of(p)
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
    report = ReproReport(recorded=recorded_kinds(second) | recorded_kinds(first))
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
        raise UsageError(f"{source}: not a git checkout; repro builds from clean clones of one")
    commit = command.run(["git", "-C", source, "rev-parse", "HEAD"], timeout=60).stdout.strip()
    clones = [request.work.resolve() / p for p in CLONE_PATHS]
    for run, clone in enumerate(clones):
        progress(f"clone {commit[:12]} and build {run + 1} of 2 in {clone}")
        _clone(source, clone, commit)
        _build(clone, request, run)
    progress("compare")
    report = compare(clones[0] / "dist", clones[1] / "dist")
    report.commit = commit
    if request.images:
        progress("compare the images (docker save)")
        report.images = compare_built_images(clones, request.work.resolve() / "images")
    return report


def _image_ids(dist: Path) -> dict[str, str]:
    manifest = read_manifest(dist / "manifest.json")
    return {a.name: f"sha256:{a.sha256}" for a in (manifest.artifacts if manifest else ())
            if kind_of(a.package_type).is_image}


def compare_built_images(clones: Sequence[Path], work: Path) -> list[ImageComparison]:
    """Each image the two clones' manifests record, compared layer by layer; then the images and
    their saved copies are removed (repro made them; a shared engine keeps only what it needs)."""
    import docker

    from shipyard.host.docker_base import docker_client

    ids = [_image_ids(clone / "dist") for clone in clones]
    if not ids[0] or ids[0].keys() != ids[1].keys():
        raise BuildError(f"repro: the two builds recorded different images ({sorted(ids[0])} and "
                            f"{sorted(ids[1])}) in dist/manifest.json; see the image build's output above")
    client = docker_client()
    comparisons = []
    try:
        for name in sorted(ids[0]):
            pair = (ids[0][name], ids[1][name])
            if pair[0] == pair[1]:
                saved = [save_image(client, pair[0], work / "image.tar")] * 2
            else:
                saved = [save_image(client, image, work / f"image-{run + 1}.tar") for run, image in enumerate(pair)]
            comparisons.append(compare_images(name, pair, *saved))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        for image in {i for found in ids for i in found.values()}:
            try:
                client.images.remove(image, force=True)
            except docker.errors.NotFound:  # both builds gave one id: it is gone already
                pass
    return comparisons


def summary_lines(report: ReproReport) -> Sequence[str]:
    normalised = sum(image.reproducible and not image.identical for image in report.images)
    note = {"image": f" ({normalised} of them normalised: the mtimes of the directories a COPY writes into)"
            if normalised else ""}
    lines = [f"{kind}: {same} of {total} identical{note.get(kind, '')}"
             for kind, (same, total) in report.by_kind().items()]
    percent = 100 * len(report.identical) / report.total if report.total else 0
    of = f" (commit {report.commit[:12]})" if report.commit else ""
    lines.append(f"total: {len(report.identical)} of {report.total} files identical ({percent:.0f} %){of}")
    lines += [f"only in one build: {p}" for p in report.only_in_one]
    for image in report.images:
        lines += image.lines()
    for path, diff in report.different.items():
        lines += [f"DIFFERENT: {path}", diff]
    return lines
