"""`nox -s conda-<variant>`: build a variant's conda packages, test each as a user installs it,
then publish the ones that passed into dist/conda and record them in dist/manifest.json.

1. dependencies: the channels the run is given, else release.yaml's `conda.channels` (conda-forge
   on CI). The bootstrap channel (conda/bootstrap.py: repacked pyenv Pythons, linux-64 only) is
   made only on request (`--bootstrap-channel`); on a machine that reaches no conda channel (this
   one) it stands in for them, first in priority;
2. build: conda/build.py (one variant per call, cached, byte-identical by the normalising repack);
   a narrowed run (--component) also builds what its selection's tests install, unless a channel
   they are served holds it (conda/dependency_packages.py), and does not test it;
3. test: the output folder and the dependency channels are served over loopback HTTP with a
   token (conda/serve.py); each cell's package is installed by py-rattler into a fresh prefix,
   asking for its exact build, and its component's tests run with that prefix's Python
   (conda/package_tests.py), gated per feature like wheels. A noarch package serves every Python
   from the oldest to the newest, so it is tested with both ends of the run's Pythons (one run
   when they are the same);
4. publish: only packages whose cell passed (every Python it was tested with), with what they
   need from this run (the core and the mutex), go into dist/conda, atomically
   (conda/channel.py); a failed run leaves it as it was. A core package (libember) has no tests of
   its own: it is proven by the packages built on it, and published only when at least one of
   them passed. Each record carries its package's own version (the component's, never the
   release's).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rattler.package import IndexJson

from shipyard.conda.bootstrap import ensure_bootstrap_channel, release_requirements
from shipyard.conda.build import (
    CondaBuildRequest,
    PackageOutcome,
    build_conda_packages,
    conda_output_dir,
    conda_subdir,
)
from shipyard.conda.build_plan import conda_components, not_applicable_cells, run_pythons
from shipyard.conda.channel import conda_artifact_record, publish_packages
from shipyard.conda.dependency_packages import dependency_components
from shipyard.conda.package_tests import BuiltPackage, run_conda_package_tests
from shipyard.conda.preflight import spec_name
from shipyard.conda.serve import serve_channel
from shipyard.errors import UsageError
from shipyard.host.source_tree import git_info, hash_tree
from shipyard.plumbing.build_cache import BuildCache, cache_key
from shipyard.plumbing.hashing import sha256_of
from shipyard.plumbing.port_ranges import claimed_port_range
from shipyard.plumbing.progress import Progress, running
from shipyard.record.manifest import FeatureRecord, NotApplicableRecord, merge_artifacts
from shipyard.release.channel_version import build_version
from shipyard.release.matrix import NotApplicable
from shipyard.release.pytest_selection import selection_of
from shipyard.release.spec import Spec
from shipyard.testing.verdict import TestRun, feature_gate, judge_identity
from shipyard.wheel.build_request import default_test_jobs, dependency_detail


@dataclass(frozen=True)
class CondaRunRequest:
    variant: str
    pythons: tuple[str, ...] = ()
    components: tuple[str, ...] = ()
    channels: tuple[str, ...] = ()  # dependency channels; empty: release.yaml's conda.channels
    bootstrap: bool = False  # make the bootstrap channel and search it first (stands in for conda-forge)
    state: Path = Path(".shipyard")
    dist: Path = Path("dist")
    jobs: int = 2
    test_jobs: int = field(default_factory=default_test_jobs)
    tests: bool = True
    nightly: bool = False  # development versions dated by the commit (release/channel_version.py)


@dataclass
class CondaCell:
    """One package of the run with one Python's test verdict (None: not tested, e.g. libember,
    the mutex); a noarch package tested with two Pythons is two cells."""

    package: PackageOutcome
    python: str | None = None
    test: TestRun | None = None
    test_cached: bool = False  # the verdict of an earlier run with the same inputs
    withheld: str | None = None  # why it passed but is not published (a core none of whose dependents passed)
    # A package without tests of its own (the core, the mutex): the cells of the packages that depend
    # on it and passed, whose tests prove it (the manifest's `proven_by`, record/gate.py).
    proven_by: tuple[str, ...] = ()
    # Why a package with tests of its own was not tested: built only because a selected component
    # depends on it (--component; build_request.dependency_detail). Nothing proves it then.
    untested: str | None = None

    @property
    def passed(self) -> bool:
        return self.test is None or self.test.passed


@dataclass(frozen=True)
class CondaRun:
    cells: list[CondaCell]
    channels: tuple[str, ...]
    published: tuple[str, ...]
    # The run's cells that their components' requires-python rules out: not built, recorded in
    # the manifest as not applicable, and no part of `passed`.
    not_applicable: tuple[NotApplicable, ...] = ()

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.cells)


def run_conda_variant(spec: Spec, request: CondaRunRequest, progress: Progress = lambda _: None) -> CondaRun:
    release = spec.release
    variant = release.find_variant(request.variant)
    if variant is None:
        raise UsageError(f"--variant {request.variant}: no such variant in release.yaml "
                         f"(variants: {', '.join(release.variants)})")
    pythons = tuple(run_pythons(release, request.pythons))
    components = conda_components(release, request.components)
    # The release's own channel in dist/conda: what other runs published there, e.g. the native
    # packages a CI lane merged from other lanes' fragments before building its pure ones. Searched
    # after this run's own output, so a package this run builds is never taken from an older one.
    release_channel = request.dist / "conda"
    output = conda_output_dir(request.state, variant)
    # A narrowed run also builds what its selection's tests install, unless a channel they are
    # served holds it already: the build plan gets the whole list, the added ones are not tested.
    dependencies = dependency_components(
        spec, request.components, variant, pythons, [output, release_channel],
        conda_subdir(release, _host_platform(spec)), progress) if request.components else {}
    if dependencies:
        components = conda_components(release, (*request.components, *dependencies))
    ruled_out = tuple(not_applicable_cells(release, variant, _host_platform(spec), components, list(pythons)))
    for skipped in ruled_out:
        progress(f"{skipped.cell.id}: not applicable ({skipped.reason}), not built")
    if components and not any(c.kind == "python-pure" or any(c.admits_python(p) for p in pythons) for c in components):
        # Every package the run asked for is ruled out: nothing to build, nothing to fail.
        publish_run(spec, [], ruled_out, request, progress)
        return CondaRun([], request.channels, (), ruled_out)
    channels = dependency_channels(spec, request, pythons, variant.cuda, progress)
    after = (release_channel.resolve().as_uri(),) if (release_channel / "noarch" / "repodata.json").is_file() else ()
    build_request = CondaBuildRequest(variant=variant.name, channels=channels, pythons=pythons,
                                      components=tuple(c.name for c in components) if request.components
                                      else (), state=request.state, jobs=request.jobs,
                                      recipe_tests=not request.tests, nightly=request.nightly,
                                      after_output=after)
    packages = build_conda_packages(spec, build_request, progress)
    # Without tests, one row per package (its newest Python says "not run").
    first = 0 if request.tests else -1
    cells: list[CondaCell] = []
    for package in packages:
        if package.cell is not None and (dependent := dependencies.get(package.cell.component)) is not None:
            cells.append(CondaCell(package, untested=dependency_detail(package.cell.component, dependent)))
            continue
        cells += [CondaCell(package, python) for python in pythons_to_test(spec, package, pythons)[first:]] or [
            CondaCell(package)]
    if request.tests:
        _test_all(spec, cells, (*channels, *after), output, request, progress)
    published = publish_run(spec, cells, ruled_out, request, progress)
    return CondaRun(cells, channels, published, ruled_out)


def dependency_channels(spec: Spec, request: CondaRunRequest, pythons: Sequence[str], cuda: str | None,
                        progress: Progress) -> tuple[str, ...]:
    """The channels a run takes dependencies from, in priority order: the bootstrap channel when
    asked for, then the given channels, else release.yaml's `conda.channels` (names such as
    conda-forge, or URLs). The bootstrap channel is never made implicitly: it needs this host's
    pyenv Pythons, which a CI container or a Windows or macOS runner does not have."""
    configured = spec.release.conda.channels if spec.release.conda else ()
    given = request.channels or (() if request.bootstrap else configured)
    if not request.bootstrap:
        if not given:
            raise UsageError("no channel to take dependencies from; add release.yaml's section "
                             "`conda: {channels: [conda-forge]}`, pass --channel URL, or --bootstrap-channel")
        progress(f"dependencies: {', '.join(given)}")
        return tuple(given)
    bootstrap = ensure_bootstrap_channel(pythons=pythons, cuda_versions=[cuda] if cuda else [],
                                         requirements=release_requirements(spec), progress=progress)
    stands_in = ", ".join(configured) or "conda-forge"
    progress(f"dependencies: the bootstrap channel {bootstrap.path} stands in for {stands_in}"
             + (f", then {', '.join(given)}" if given else ""))
    return (bootstrap.url(), *given)


def pythons_to_test(spec: Spec, package: PackageOutcome, pythons: Sequence[str]) -> list[str]:
    """The Pythons a package's tests run with: its own; for a noarch package, which installs
    into any of them, the oldest and the newest of the run that its component admits (one when
    they are the same); none when it has no tests of its own (a core library, the mutex)."""
    cell = package.cell
    if cell is None or cell.package:  # the mutex; a core package (libember), proven by its dependents
        return []
    component = spec.release.components[cell.component]
    if not component.tests:
        return []
    if cell.python:
        return [cell.python]
    admitted = sorted((p for p in pythons if component.admits_python(p)) or pythons,
                      key=lambda v: tuple(int(x) for x in v.split(".")))
    return list(dict.fromkeys([admitted[0], admitted[-1]]))


def _test_all(spec: Spec, cells: list[CondaCell], channels: Sequence[str], output: Path,
              request: CondaRunRequest, progress: Progress) -> None:
    token = secrets.token_urlsafe(24)
    folders = {"built": output, **{f"dep{i}": Path(_path_of(url)) for i, url in enumerate(channels)
                                   if url.startswith("file://")}}
    remote = [url for url in channels if not url.startswith("file://")]
    tested = [c for c in cells if c.python is not None]
    cache = BuildCache(request.state / "cache")
    keys = {}
    if not remote:  # a remote channel can change under the same URL: its packages' tests always run
        channel_state = {name: _repodata_digest(folder) for name, folder in folders.items()}
        for cell in tested:
            keys[_run_id(cell)] = key = _test_key(spec, cell, channel_state)
            entry = cache.get(key)
            if entry is not None:
                cell.test, cell.test_cached = TestRun.from_json(entry.metadata()["tests"]), True
                progress(f"test {cell.package.label} (Python {cell.python}): passed before with these inputs (cached)")
    tested = [c for c in tested if not c.test_cached]
    if not tested:
        return
    with serve_channel(folders, token=token) as base:
        served = [f"{base}built/", *[f"{base}{name}/" for name in folders if name != "built"], *remote]

        def one(cell: CondaCell) -> None:
            package, python = cell.package, cell.python
            assert python is not None and package.cell is not None
            component = spec.release.components[package.cell.component]
            assert component.tests
            tests_dir = component.tests_folder(spec.root)
            platform = _host_platform(spec) if package.cell.platform == "any" else package.cell.platform
            with claimed_port_range() as ports, running(progress, f"test {package.label} (Python {python})"):
                cell.test = run_conda_package_tests(
                    BuiltPackage(package.name, package.version, package.build, sha256_of(package.path)),
                    python=python, channels=served, tests_dir=tests_dir,
                    gate=feature_gate(spec, component.name, platform, tests_dir, component.test_id_root(spec.root)),
                    other_features=sorted(f.id for f in spec.features.features if f.component != component.name),
                    source_dir=component.source_dir(spec.root), state=request.state,
                    work=request.state / "conda-test" / _run_id(cell), ports=ports,
                    selection=selection_of(component.pytest_args))
            verdict = "passed" if cell.test.passed else "FAILED: " + "; ".join(cell.test.problems)[:300]
            progress(f"test {package.label} (Python {python}): {verdict}")
            if cell.test.passed and _run_id(cell) in keys:
                cache.put(keys[_run_id(cell)], [], {"kind": "conda-test", "tests": cell.test.to_json()})

        with ThreadPoolExecutor(max_workers=max(1, request.test_jobs)) as pool:
            list(pool.map(one, tested))


def _run_id(cell: CondaCell) -> str:
    """One test run: the package and the Python (a noarch package runs with two)."""
    return f"{cell.package.label}-py{cell.python}"


def _repodata_digest(channel: Path) -> str:
    """What a channel folder offers a solver: the sha256 of each subdir's repodata.json, which
    lists every package with its sha256."""
    digest = hashlib.sha256()
    for repodata in sorted(channel.resolve().glob("*/repodata.json")):
        digest.update(f"{repodata.parent.name}\0".encode())
        digest.update(hashlib.sha256(repodata.read_bytes()).digest())
    return digest.hexdigest()


def _test_key(spec: Spec, cell: CondaCell, channel_state: dict[str, str]) -> str:
    """A package's tests' inputs: its bytes, everything its environment could be solved from,
    its component's tests and how they are gated, and the Python. A verdict that passed with
    the same inputs is reused."""
    package, matrix_cell = cell.package, cell.package.cell
    assert matrix_cell is not None
    component = spec.release.components[matrix_cell.component]
    assert component.tests
    tests_dir = component.tests_folder(spec.root)
    platform = _host_platform(spec) if matrix_cell.platform == "any" else matrix_cell.platform
    gate = feature_gate(spec, component.name, platform, tests_dir, component.test_id_root(spec.root))
    inputs = {"package": sha256_of(package.path), "channels": channel_state,
              "gating": dict(gate.statuses), "blocking": sorted(gate.vocabulary.blocking),
              "present": sorted(gate.present),
              "listed": {k: list(v) for k, v in gate.listed.items()},
              "others": sorted(f.id for f in spec.features.features if f.component != component.name),
              "judge": judge_identity(), "pytest_args": list(component.pytest_args)}
    return cache_key(kind="conda-test", sources=hash_tree(tests_dir), spec_section=inputs, toolchain="rattler",
                     python=cell.python)


def _path_of(file_url: str) -> str:
    from urllib.parse import unquote, urlparse

    return unquote(urlparse(file_url).path)


def _host_platform(spec: Spec) -> str:
    from shipyard.host.toolchains.discover import discover

    return discover().host_platform


def publish_run(spec: Spec, cells: list[CondaCell], ruled_out: Sequence[NotApplicable], request: CondaRunRequest,
             progress: Progress) -> tuple[str, ...]:
    """Publish what passed (and what it needs from this run); record every published package, and
    the cells that are not applicable."""
    release = spec.release
    # The manifest's version, and the mutex's record's (the mutex keeps its own package version).
    release_version = build_version(release.release.version, nightly=request.nightly,
                                    commit_time=git_info(spec.root).commit_time)
    skipped = [NotApplicableRecord(**NotApplicableRecord.identity(n.cell), reason=n.reason) for n in ruled_out]
    failed = {c.package.name for c in cells if not c.passed}
    kept = publishable(cells)
    for cell in cells:
        if cell.withheld:
            progress(f"{cell.package.label}: not published: {cell.withheld}")
    if not kept:
        if skipped:
            merge_artifacts(request.dist / "manifest.json", release=release.release.name,
                            version=release_version, records=[], not_applicable=skipped)
        return ()
    channel = request.dist / "conda"
    update = publish_packages(channel, list(dict.fromkeys(c.package.path for c in kept)))
    progress(f"dist/conda: {len(update.added)} added, {len(update.replaced)} replaced, "
             f"{len(update.unchanged)} unchanged" + (f"; not published (tests failed): {', '.join(sorted(failed))}"
                                                      if failed else ""))
    records = []
    variant = release.find_variant(request.variant)
    for cell in _one_per_package(kept):
        matrix_cell = cell.package.cell
        if matrix_cell is None:
            # The mutex belongs to no component, but no variant package installs without it: it is
            # recorded too, so that `shipyard publish` (whose only input is the manifest) sends it.
            assert variant is not None
            records.append(conda_artifact_record(
                cell.package.path, channel=channel, cell_id=f"{cell.package.name}-{variant.tag}-conda",
                component=cell.package.name, variant=variant.name, variant_tag=variant.tag, platform="any",
                python=None, version=release_version, features=(), tests=None,
                build={"key": cell.package.key, "result": cell.package.result,
                       "seconds": round(cell.package.seconds, 2), "package": cell.package.label},
                proven_by=cell.proven_by))
            continue
        platform = _host_platform(spec) if matrix_cell.platform == "any" else matrix_cell.platform
        records.append(conda_artifact_record(
            cell.package.path, channel=channel, cell_id=matrix_cell.id, component=matrix_cell.component,
            variant=matrix_cell.variant, variant_tag=matrix_cell.variant_tag, platform=matrix_cell.platform,
            python=matrix_cell.python, version=cell.package.version,  # the component's own version
            features=tuple(FeatureRecord(id=i, title=t, status=s)
                           for i, t, s in spec.features_for(matrix_cell.component, platform)),
            tests=_tests_record(cell, kept),
            build=_build_record(cell), proven_by=cell.proven_by))
    merge_artifacts(request.dist / "manifest.json", release=release.release.name, version=release_version,
                    records=records, not_applicable=skipped)
    return update.packages


def publishable(cells: Sequence[CondaCell]) -> list[CondaCell]:
    """The cells whose package may be published: a package passed with every Python it was
    tested with; a core package (libember) when at least one package of the run that depends on
    it passed (it has no tests of its own: they prove it). Sets `withheld` on a core kept back."""
    failed = {c.package.label for c in cells if not c.passed}
    passed = {c.package.label: c.package for c in cells if c.package.label not in failed}
    depends = {c.package.label: {spec_name(d) for d in IndexJson.from_package_archive(c.package.path).depends}
               for c in cells}
    kept = []
    for cell in cells:
        if cell.package.label in failed:
            continue
        if cell.test is None and cell.untested is None:
            cell.proven_by = tuple(sorted({c.package.cell.id for c in cells if c.package.cell is not None
                                           and c.test is not None and c.package.label in passed
                                           and cell.package.name in depends[c.package.label]}))
        if cell.package.cell is not None and cell.package.cell.package:
            dependents = [c.package for c in cells if c.package is not cell.package and cell.package.name in
                          depends[c.package.label]]
            if not any(d.label in passed for d in dependents):
                names = sorted({d.label for d in dependents})
                cell.withheld = ("no package that depends on it passed its tests"
                                 + (f" ({', '.join(names)} failed)" if names else " (none was built in this run)"))
                continue
        kept.append(cell)
    return kept


def _build_record(cell: CondaCell) -> dict[str, Any]:
    """The manifest's `build` of a package; one built only for the selection's tests is recorded
    as the wheels' are (`not tested`, with why), its cache hit kept as `cached`."""
    package = cell.package
    record: dict[str, Any] = {"key": package.key, "result": package.result,
                                 "seconds": round(package.seconds, 2), "package": package.label}
    if cell.untested:
        record |= {"result": "not tested", "detail": cell.untested, "cached": package.result == "cached"}
    return record


def _one_per_package(cells: Sequence[CondaCell]) -> list[CondaCell]:
    """One cell per package, the last (a noarch package's newest Python)."""
    return list({c.package.label: c for c in cells}.values())


def _tests_record(cell: CondaCell, kept: Sequence[CondaCell]) -> dict[str, object] | None:
    """The manifest's `tests` of a package: its run's verdict; for a noarch package tested with
    several Pythons, the newest's, with every Python it passed with under `pythons`."""
    if cell.test is None:
        return None
    runs = [c for c in kept if c.package.label == cell.package.label and c.test is not None]
    record = cell.test.to_json()
    if len(runs) > 1:
        record["pythons"] = [c.python for c in runs]
    return record
