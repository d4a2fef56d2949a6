"""Conda packages tested as a user installs them (#11 item 7): `shipyard conda build` builds,
serves the channel over loopback HTTP, installs each package into a fresh prefix with
py-rattler's solver and runs its component's tests there; then the variants are proven apart
by real solves from the published channel."""

from __future__ import annotations

import contextlib
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from shipyard.cli import main
from shipyard.conda.bootstrap import BootstrapChannel
from shipyard.conda.solve_install import InstallRequest, InstallResult, solve_and_install
from shipyard.manifest import read_manifest
from shipyard.matrix import Cell
from shipyard.toolchains.discover import discover
from shipyard.toolchains.resolve import Missing, resolve
from shipyard.validate import load_spec

PYTHON = "3.11"
pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Released:
    dist: Path
    bootstrap: str  # file:// URL
    cpu_output: str  # what `shipyard conda build --variant cpu` printed
    cuda_output: str | None  # the same for cuda11, None when no CUDA 11.8 toolkit is here


@pytest.fixture(scope="session")  # session: xdist may interleave other modules on this worker
def released(repo: Path, conda_bootstrap: BootstrapChannel, tmp_path_factory: pytest.TempPathFactory) -> Released:
    spec = load_spec(repo)
    bootstrap = conda_bootstrap
    # The repository's own state folder: its build cache is shared with the end-to-end publish
    # (test_publish_release.py), so CI builds the cpu packages once.
    dist, state = tmp_path_factory.mktemp("dist"), repo / ".shipyard"

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
    return Released(dist, bootstrap.url(), cpu, cuda)


def test_every_cpu_package_passes_its_tests_in_an_environment_solved_from_the_served_channel(released: Released):
    out = " ".join(released.cpu_output.split())
    for component in ("ember", "embervision", "emberaudio", "emberelastic"):
        assert re.search(rf"{component}-1\.7\.0-\S+ │ (built in \d+ s|cached) │ passed \(Python", out), out
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
    assert result.named("cuda-cudart") is not None and result.named("cuda-cudart").version.startswith("11.8")
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
    statuses = {f["id"]: f["status"] for f in ember["features"]}
    expected = {fid: status for fid, _, status in load_spec(repo).features_for("ember", discover().host_platform)}
    assert statuses == expected
    assert {"stable", "beta"} <= set(statuses.values())
