"""Conda packages tested as a user installs them (#11 item 7): `shipyard conda build` builds,
serves the channel over loopback HTTP, installs each package into a fresh prefix with
py-rattler's solver and runs its component's tests there; then the variants are proven apart
by real solves from the published channel. The same release proves the build itself: libember
and ember pinned to it, the CUDA runtime dependency, the cache on an unchanged re-run, and a
failed build that leaves everything as it was. It is built once for the whole file."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import zstandard
from rattler.package import IndexJson

from shipyard.cli import main
from shipyard.conda.bootstrap import BootstrapChannel
from shipyard.conda.build import conda_output_dir
from shipyard.conda.solve_install import InstallRequest, InstallResult, solve_and_install
from shipyard.errors import STABLE_FEATURE_FAILED, BuildError
from shipyard.host.toolchains.discover import discover
from shipyard.host.toolchains.resolve import Missing, resolve
from shipyard.record.manifest import read_manifest
from shipyard.release.cuda_archs import ptx_arch, sm_name
from shipyard.release.matrix import Cell
from shipyard.release.validate import load_spec

PYTHON = "3.11"
pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Released:
    dist: Path
    state: Path  # the --state of both builds: their cache and output folders
    bootstrap: str  # file:// URL
    cpu_output: str  # what `shipyard conda build --variant cpu` printed
    cuda_output: str | None  # the same for cuda11, None when no CUDA 11.8 toolkit is here


@pytest.fixture(scope="session")  # session: xdist may interleave other modules on this worker
def released(repo: Path, conda_bootstrap: BootstrapChannel, tmp_path_factory: pytest.TempPathFactory,
             suite_state: Path) -> Released:
    spec = load_spec(repo)
    bootstrap = conda_bootstrap
    # The suite's session state folder: its build cache is shared with the end-to-end publish
    # (test_publish_release.py), so the suite builds the cpu packages once.
    dist, state = tmp_path_factory.mktemp("dist"), suite_state

    def build(variant: str, *components: str) -> str:
        """`shipyard conda build` as a user runs it; its table as printed (a module fixture has no capsys)."""
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            code = main(["--root", str(repo), "conda", "build", "--variant", variant, "--python", PYTHON,
                         *[a for c in components for a in ("--component", c)], "--channel", bootstrap.url(),
                         "--state", str(state), "--dist", str(dist)])
        assert code == 0, buffer.getvalue()
        return buffer.getvalue()

    cpu = build("cpu")
    variant = spec.release.variants["cuda11"]
    core = Cell("ember", variant.name, variant.tag, discover().host_platform, None, "conda", package="libember")
    cuda = None if isinstance(resolve(core, spec.release, discover()), Missing) else build("cuda11", "ember")
    return Released(dist, state, bootstrap.url(), cpu, cuda)


def test_every_cpu_package_passes_its_tests_in_an_environment_solved_from_the_served_channel(released: Released):
    out = " ".join(released.cpu_output.split())
    for component in ("ember", "embervision", "emberaudio", "emberelastic"):
        assert re.search(rf"{component}-1\.7\.0-\S+ │ (built in \d+ s|cached) │ passed \(Python", out), out
    # A noarch package is tested with the run's oldest and newest Python: with one, once.
    for component in ("emberaudio", "emberelastic"):
        assert len(re.findall(rf"(?<![\w-]){component}-1\.7\.0-\S+ │", out)) == 1, out
        assert re.search(rf"(?<![\w-]){component}-1\.7\.0-\S+ │ [^│]+ │ passed \(Python 3\.11[,)]", out), out
    manifest = read_manifest(released.dist / "manifest.json")
    assert manifest is not None
    conda = {a.cell_id: a for a in manifest.artifacts if a.package_type == "conda"}
    for cell in ("ember-cpu-linux-x86_64-cp311-conda", "embervision-cpu-linux-x86_64-cp311-conda",
                 "emberaudio-any-conda", "emberelastic-any-conda", "libember-cpu-linux-x86_64-conda",
                 "ember-variant-cpu-conda"):
        assert cell in conda, sorted(conda)
    ember = conda["ember-cpu-linux-x86_64-cp311-conda"]
    assert ember.name.startswith("ember-1.7.0-py311_cpu_h") and ember.name.endswith("_0.conda")
    assert ember.tests is not None and ember.tests["result"] == "passed"
    assert ember.tests["installer"] == "rattler"
    assert ember.tests["installed"] == "1.7.0 " + ember.name.removeprefix("ember-1.7.0-").removesuffix(".conda")
    assert ember.tests["features"]["ember.fft"]["result"] == "passed"
    assert {f.status for f in ember.features} >= {"stable", "beta"}
    # What the manifest says is what the channel holds and indexes.
    repodata = json.loads((released.dist / "conda" / "linux-64" / "repodata.json").read_text())
    entry = repodata["packages.conda"][ember.name]
    assert entry["sha256"] == ember.sha256 and entry["size"] == ember.size


def _solve(released: Released, tmp_path: Path, *specs: str, cuda_driver: str | None = None) -> InstallResult:
    request = InstallRequest(channels=[(released.dist / "conda").resolve().as_uri(), released.bootstrap],
                             specs=[f"python {PYTHON}.*", *specs], prefix=str(tmp_path / "prefix"),
                             cache_dir=str(tmp_path / "cache"), cuda_driver=cuda_driver)
    return solve_and_install(request)


def _builds(result: InstallResult) -> dict[str, str]:
    return {p.name: p.build for p in result.packages}


@pytest.fixture
def with_cuda(released: Released) -> Released:
    if released.cuda_output is None:
        pytest.skip("no CUDA 11.8 toolkit on this machine: the cu118 packages cannot be built here")
    return released


def test_asking_for_cu118_never_yields_a_cpu_package(with_cuda: Released, tmp_path: Path):
    result = _solve(with_cuda, tmp_path, "ember * *_cu118_*")
    assert result.error is None and result.unsatisfiable is None, result
    builds = _builds(result)
    for name in ("ember", "libember"):
        assert "cu118" in builds[name] and "cpu" not in builds[name], builds
    assert builds["ember-variant"] == "cu118"
    # CUDA 11 is conda-forge's single cudatoolkit package (cuda-cudart starts at CUDA 12)
    assert result.named("cudatoolkit") is not None and result.named("cudatoolkit").version.startswith("11.8")
    assert result.named("cuda-cudart") is None
    assert (tmp_path / "prefix" / "lib" / "libcudart.so.11.0").exists()


def test_asking_for_cpu_never_yields_a_cuda_package(with_cuda: Released, tmp_path: Path):
    builds = _builds(_solve(with_cuda, tmp_path, "ember * *_cpu_*"))
    assert builds["ember-variant"] == "cpu" and "cpu" in builds["libember"], builds
    assert not [name for name, build in builds.items() if "cu1" in build or name.startswith("cuda-")], builds


@pytest.mark.parametrize("other", ["libember * cu118_*", "ember-variant ==1.0 cu118"])
def test_a_cpu_ember_and_a_cuda_ember_cannot_share_an_environment(with_cuda: Released, tmp_path: Path, other: str):
    result = _solve(with_cuda, tmp_path, "ember * *_cpu_*", other)
    assert result.unsatisfiable, result
    assert not (tmp_path / "prefix").exists()


def test_the_cuda_mutex_refuses_a_driver_older_than_its_runtime(with_cuda: Released, tmp_path: Path):
    assert _solve(with_cuda, tmp_path / "new", "ember * *_cu118_*", cuda_driver="12.4").unsatisfiable is None
    old = _solve(with_cuda, tmp_path / "old", "ember * *_cu118_*", cuda_driver="11.2")
    assert old.unsatisfiable and "__cuda" in old.unsatisfiable


def test_conda_features_lists_the_statuses_from_the_channel(repo: Path, released: Released,
                                                            capsys: pytest.CaptureFixture[str]):
    assert main(["conda", "features", "--channel", str(released.dist / "conda"), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    ember = next(p for p in listed if p["name"] == "ember" and "_cpu_" in p["build"])
    # The variant tag the build wrote is the one the listing reads (one extra.shipyard schema).
    assert ember["variant_tag"] == "cpu"
    assert {p["variant_tag"] for p in listed if p["name"] in ("emberaudio", "emberelastic")} == {"any"}
    assert main(["conda", "features", "--channel", str(released.dist / "conda")]) == 0
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in capsys.readouterr().out.splitlines() if "│" in line]
    tags = {(r[2], r[3]) for r in rows if r and r[0] == "ember"}
    assert "cpu" in {tag for _, tag in tags} and all(f"_{tag}_" in build for build, tag in tags), tags
    statuses = {f["id"]: f["status"] for f in ember["features"]}
    expected = {fid: status for fid, _, status in load_spec(repo).features_for("ember", discover().host_platform)}
    assert statuses == expected
    assert {"stable", "beta"} <= set(statuses.values())


# --- the builds themselves ---------------------------------------------------------------------

def _output(repo: Path, released: Released, variant: str) -> Path:
    return conda_output_dir(released.state, load_spec(repo).release.variants[variant])


def _published(released: Released, cell_id: str) -> Path:
    """The package the manifest records for `cell_id`, in the published channel."""
    manifest = read_manifest(released.dist / "manifest.json")
    assert manifest is not None
    record = next((a for a in manifest.artifacts if a.cell_id == cell_id and a.package_type == "conda"), None)
    assert record is not None, sorted(a.cell_id for a in manifest.artifacts)
    found = list((released.dist / "conda").glob(f"*/{record.name}"))
    assert len(found) == 1, (record.name, found)
    return found[0]


def _about(package: Path) -> dict[str, object]:
    with zipfile.ZipFile(package) as archive:
        info = next(n for n in archive.namelist() if n.startswith("info-"))
        data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(archive.read(info))).read()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        member = tar.extractfile("info/about.json")
        assert member is not None
        return json.load(member)


def test_cpu_build_makes_libember_and_ember_pinned_to_it(repo: Path, released: Released):
    spec = load_spec(repo)
    version = spec.release.release.version
    lib = _published(released, "libember-cpu-linux-x86_64-conda")
    ember = _published(released, "ember-cpu-linux-x86_64-cp311-conda")
    mutex = _published(released, "ember-variant-cpu-conda")
    assert re.fullmatch(re.escape(f"libember-{version}-cpu_h") + r"[0-9a-f]{7}_0\.conda", lib.name)
    assert re.fullmatch(re.escape(f"ember-{version}-py311_cpu_h") + r"[0-9a-f]{7}_0\.conda", ember.name)
    assert mutex.name == "ember-variant-1.0-cpu.conda"
    out = " ".join(released.cpu_output.split())
    for package in (lib, ember, mutex):
        assert re.search(re.escape(package.name.removesuffix(".conda")) + r" │ (built in \d+ s|cached) │", out), out
    lib_build = IndexJson.from_package_archive(lib).build
    depends = IndexJson.from_package_archive(ember).depends
    assert f"libember =={version} {lib_build}" in depends
    assert "ember-variant ==1.0 cpu" in depends
    assert IndexJson.from_package_archive(lib).constrains == [f"ember =={version} *_cpu_*"]
    assert not [d for d in IndexJson.from_package_archive(lib).depends if d.startswith("cuda-cudart")]
    # Each package carries its platform's features and their statuses, from feature_status.yaml.
    expected = [{"id": i, "title": t, "status": s} for i, t, s in spec.features_for("ember", "linux-x86_64")]
    for package in (lib, ember):
        assert _about(package)["extra"] == {"shipyard": {"component": "ember", "variant": "cpu", "variant_tag": "cpu",
                                                         "platform": "linux-x86_64", "features": expected}}
    assert _about(mutex)["extra"] == {"shipyard": {"component": None, "variant": "cpu", "variant_tag": "cpu",
                                                   "features": []}}


def _payload(package: Path) -> dict[str, bytes]:
    """The files a .conda installs (its pkg-*.tar.zst), by path."""
    with zipfile.ZipFile(package) as archive:
        pkg = next(n for n in archive.namelist() if n.startswith("pkg-"))
        data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(archive.read(pkg))).read()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


@pytest.mark.parametrize("component", ["ember", "embervision"])
def test_a_per_python_package_holds_the_dist_info_of_its_wheel_and_no_build_path(
        repo: Path, released: Released, component: str):
    """The per-Python packages are built by scikit-build-core's build_wheel hook and installed by
    pypa's installer from the wheel file (recipes/README.md): the dist-info is the wheel's, its RECORD lists every
    installed file, and no direct_url.json records the build's temporary folder."""
    version = load_spec(repo).release.release.version
    files = _payload(_published(released, f"{component}-cpu-linux-x86_64-cp311-conda"))
    dist_info = f"lib/python3.11/site-packages/{component}-{version}.dist-info/"
    assert sorted(n.removeprefix(dist_info) for n in files if n.startswith(dist_info)) == [
        "METADATA", "RECORD", "WHEEL"]  # installer writes no INSTALLER or REQUESTED: both are optional
    assert b"Generator: scikit-build-core" in files[dist_info + "WHEEL"]
    assert b"Tag: cp311-cp311-linux_x86_64" in files[dist_info + "WHEEL"]
    record = {line.split(",")[0] for line in files[dist_info + "RECORD"].decode().splitlines() if line}
    extensions = [n for n in files if n.endswith(".cpython-311-x86_64-linux-gnu.so")]
    assert extensions and {n.removeprefix("lib/python3.11/site-packages/") for n in extensions} <= record
    assert not [n for n in files if b"rattler-build_" in files[n] and n.endswith((".json", "RECORD"))]


def test_cu118_libember_depends_on_the_matching_cuda_runtime(repo: Path, with_cuda: Released):
    variant = load_spec(repo).release.variants["cuda11"]
    lib = _published(with_cuda, f"libember-{variant.tag}-linux-x86_64-conda")
    assert lib.name.startswith("libember-") and f"-{variant.tag}_h" in lib.name
    depends = IndexJson.from_package_archive(lib).depends
    assert f"cudatoolkit {variant.cuda}.*" in depends and not [d for d in depends if d.startswith("cuda-cudart")]
    mutex = _published(with_cuda, f"ember-variant-{variant.tag}-conda")
    assert IndexJson.from_package_archive(mutex).constrains == [f"__cuda >={variant.cuda}"]


def test_cu118_libember_records_the_archs_its_binaries_carry(repo: Path, with_cuda: Released):
    """The core holds the kernels: its build read their SASS and PTX (the wheels' arch check) and
    wrote them into its about.json and the manifest; the per-Python package, with none, says nothing."""
    variant = load_spec(repo).release.variants["cuda11"]
    sass = sorted((sm_name(a) for a in variant.archs), key=lambda n: int(n[3:]))
    verified = {"sass": sass, "ptx": [sm_name(ptx_arch(variant.archs)).replace("sm_", "compute_")]}
    lib = _published(with_cuda, f"libember-{variant.tag}-linux-x86_64-conda")
    assert _about(lib)["extra"]["shipyard"]["cuda_archs"] == verified  # type: ignore[index]
    manifest = read_manifest(with_cuda.dist / "manifest.json")
    assert manifest is not None
    cells = manifest.by_cell()
    assert cells[f"libember-{variant.tag}-linux-x86_64-conda"].cuda_archs.to_json() == verified  # type: ignore[union-attr]
    assert cells[f"ember-{variant.tag}-linux-x86_64-cp311-conda"].cuda_archs is None
    assert cells["libember-cpu-linux-x86_64-conda"].cuda_archs is None
    assert "cuda_archs" not in _about(_published(with_cuda, "libember-cpu-linux-x86_64-conda"))["extra"]["shipyard"]  # type: ignore[index]


def test_an_unchanged_rerun_is_cached_and_rewrites_nothing(repo: Path, released: Released, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]):
    output = _output(repo, released, "cpu")
    before = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in sorted(output.rglob("*"))}
    code = main(["--root", str(repo), "conda", "build", "--variant", "cpu", "--python", PYTHON, "--component",
                 "ember", "--channel", released.bootstrap, "--state", str(released.state),
                 "--dist", str(tmp_path / "dist")])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0
    for name in ("libember", "ember-variant"):
        assert re.search(rf"(?<![\w-]){name}-\d\S* │ cached │ \(no tests of its own\)", out), out
    # The tests passed with the same package, channels, tests and gating: their verdict is reused.
    assert re.search(r"(?<![\w-])ember-\d\S* │ cached │ passed \(Python 3\.11, cached\)", out), out
    assert "built in" not in out
    after = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in sorted(output.rglob("*"))}
    assert after == before


def _clone(repo: Path, where: Path) -> Path:
    """A clone of the checkout, with its history (so each package's sources have the same date)
    and the checkout's own working files of what the conda build reads (uncommitted edits too)."""
    subprocess.run(["git", "clone", "-q", str(repo), str(where)], check=True)
    for name in ("release.yaml", "feature_status.yaml"):
        shutil.copy(repo / name, where / name)
    for folder in ("recipes", "library"):
        shutil.copytree(repo / folder, where / folder, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("build", "dist", "__pycache__", ".pytest_cache"))
    return where


def test_a_commit_that_leaves_the_sources_alone_rebuilds_and_retests_nothing(
        repo: Path, released: Released, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """A README-only commit in a clone: every package's key is the same (its date is its
    sources', not HEAD's), so nothing is built and no test runs again."""
    clone = _clone(repo, tmp_path / "clone")
    (clone / "README.md").write_text((clone / "README.md").read_text() + "\nA line about nothing built.\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "GIT_AUTHOR_DATE": "2031-01-01T00:00:00+00:00",
           "GIT_COMMITTER_DATE": "2031-01-01T00:00:00+00:00"}
    subprocess.run(["git", "-C", str(clone), "commit", "-q", "-m", "README only", "--", "README.md"], env=env,
                   check=True)
    code = main(["--root", str(clone), "conda", "build", "--variant", "cpu", "--python", PYTHON,
                 "--component", "ember", "--component", "emberaudio", "--channel", released.bootstrap,
                 "--state", str(released.state), "--dist", str(tmp_path / "dist")])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0, out
    rows = re.findall(r"(?<![\w-])((?:lib)?ember(?:audio|-variant)?-\d\S*) │ ([^│]+) │ ([^│]+) │", out)
    assert {name.split("-1")[0] for name, _, _ in rows} == {"ember-variant", "libember", "ember", "emberaudio"}, out
    assert {build.strip() for _, build, _ in rows} == {"cached"}, out
    tested = [verdict.strip() for name, _, verdict in rows if name.startswith(("ember-1", "emberaudio-"))]
    assert tested == ["passed (Python 3.11, cached)"] * 2, out
    assert "built in" not in out


def test_libember_is_not_published_when_every_ember_on_it_failed_its_tests(
        repo: Path, released: Released, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """ember's tests, moved beside the project with one more that fails: every package is taken
    from the cache (none of their sources changed), ember's tests run and fail, and libember,
    which only ember's tests prove, stays out of the channel, with the reason in the table."""
    clone = _clone(repo, tmp_path / "clone")
    shutil.copytree(repo / "library" / "ember" / "tests", clone / "ember-tests",
                    ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    (clone / "ember-tests" / "test_zz_broken.py").write_text("def test_broken():\n    assert False\n")
    release = clone / "release.yaml"
    text = release.read_text()
    old = "    cuda_kernels: true\n    tests: tests\n  embervision:"
    assert old in text
    release.write_text(text.replace(old, "    cuda_kernels: true\n    tests: ../../ember-tests\n  embervision:", 1))
    statuses = clone / "feature_status.yaml"  # the features' tests, where they now are
    statuses.write_text(statuses.read_text().replace("library/ember/tests/", "ember-tests/"))
    dist = tmp_path / "dist"
    code = main(["--root", str(clone), "conda", "build", "--variant", "cpu", "--python", PYTHON,
                 "--component", "ember", "--channel", released.bootstrap, "--state", str(released.state),
                 "--dist", str(dist)])
    captured = capsys.readouterr()
    out, err = " ".join(captured.out.split()), " ".join(captured.err.split())
    assert code == STABLE_FEATURE_FAILED, out
    assert "built in" not in out
    assert re.search(r"(?<![\w-])ember-1\.7\.0-py311\S* │ cached │ failed: tests of no feature failed", out), out
    assert re.search(r"(?<![\w-])libember-1\.7\.0-\S+ │ cached │ \(no tests of its own\); not published: no package "
                     r"that depends on it passed its tests", out), out
    assert re.search(r"libember-1\.7\.0-\S+: not published: no package that depends on it passed its tests "
                     r"\(ember-1\.7\.0-py311_cpu_h[0-9a-f]{7}_0 failed\)", err), err
    published = sorted(p.name for p in (dist / "conda").glob("*/*.conda"))
    assert published == ["ember-variant-1.0-cpu.conda"], published
    manifest = read_manifest(dist / "manifest.json")
    assert manifest is not None and [a.cell_id for a in manifest.artifacts] == ["ember-variant-cpu-conda"]


def test_a_failed_build_leaves_the_output_as_it_was(repo: Path, released: Released, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]):
    copy = tmp_path / "repo"
    copy.mkdir()
    for name in ("release.yaml", "feature_status.yaml"):
        shutil.copy(repo / name, copy / name)
    shutil.copytree(repo / "recipes", copy / "recipes")
    shutil.copytree(repo / "library", copy / "library", ignore=shutil.ignore_patterns("build", "__pycache__"))
    recipe = copy / "recipes" / "emberaudio" / "recipe.yaml"
    failing = "    content:\n      - echo emberaudio-fails-on-purpose && exit 3\n"
    recipe.write_text(recipe.read_text().replace("    content:\n", failing, 1))
    output = _output(repo, released, "cpu")
    before = {p: p.read_bytes() for p in sorted(output.rglob("*")) if p.is_file()}
    code = main(["--root", str(copy), "conda", "build", "--variant", "cpu", "--python", PYTHON, "--component",
                 "emberaudio", "--channel", released.bootstrap, "--state", str(released.state),
                 "--dist", str(tmp_path / "dist")])
    err = capsys.readouterr().err
    assert code == BuildError.exit_code, err
    assert not (tmp_path / "dist" / "conda").exists()  # nothing published
    assert re.search(r"conda build of emberaudio-\S+ \(\S+recipe\.yaml\) failed", err)
    assert "emberaudio-fails-on-purpose" in err  # the tail of rattler-build's log, quoted
    assert {p: p.read_bytes() for p in sorted(output.rglob("*")) if p.is_file()} == before
