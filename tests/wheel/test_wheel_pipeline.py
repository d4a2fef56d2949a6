"""The wheel pipeline end to end on the fixture release: real builds, auditwheel, pip, pytest.

Most tests read the suite's one build of the fixture release (conftest's minirelease_build); a
test that changes state works in a copy of it (minirelease.own_copy), where the build cache
makes a rebuild cheap. Byte identity across folders is proven by test_supply_chain's repro, the
cu118 wheels by test_supply_chain's CUDA repro and test_release_cuda."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from support.minirelease import GIT_ENV, SHARED_PYTHONS, forget_test_results, make_checkout, own_copy, request
from support.user_installs import plain_pip_env

from shipyard.cli import main
from shipyard.errors import ToolchainMissing
from shipyard.release.validate import load_spec
from shipyard.wheel.variant_wheels import build_variant

pytestmark = pytest.mark.slow

PYTHONS = SHARED_PYTHONS  # ("3.9", "3.13")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _manifest(root: Path) -> dict:
    return json.loads((root / "dist" / "manifest.json").read_text())


def test_every_cell_builds_and_passes(minirelease_build):
    manifest = _manifest(minirelease_build)
    assert {a["cell_id"]: a["build"]["result"] for a in manifest["artifacts"]} == {
        **{f"fixcext-cpu-linux-x86_64-cp{p.replace('.', '')}-wheel": "passed" for p in PYTHONS},
        "fixpure-any-wheel": "passed"}
    assert manifest["not_applicable"] == []


def test_cells_are_tested_side_by_side_each_in_its_own_folder_and_ports(minirelease_build):
    """Three cells, two at a time: their runs overlap, and each had its own TMPDIR and port range."""
    root = minirelease_build
    cells = ("fixcext-cpu-linux-x86_64-cp39-wheel", "fixcext-cpu-linux-x86_64-cp313-wheel")
    spans = {a["cell_id"]: a["tests"]["span"] for a in json.loads((root / "dist" / "manifest.json").read_text())[
        "artifacts"] if a["cell_id"] in cells}
    (start1, end1), (start2, end2) = spans.values()
    assert start1 < end2 and start2 < end1, spans  # the two cells were under test at the same time
    seen = {cell: json.loads((root / ".shipyard" / "test" / cell / "tmp" / "cell-environment.json").read_text())
            for cell in cells}
    for cell, record in seen.items():
        assert record["tmpdir"] == str(root / ".shipyard" / "test" / cell / "tmp"), record
        low, high = (int(p) for p in record["port_range"].split("-"))
        assert 0 < high - low < 1000 and high < 32768, record  # below the kernel's ephemeral ports
    first, second = seen.values()
    assert first["port_range"] != second["port_range"], seen


def test_uv_makes_the_environments_and_pip_resolves_once_per_python(minirelease_build):
    """pip resolves by name from the variant index for one cell per Python: the one that pulls
    in most of the release's packages (fixpure brings fixcext); uv makes the others."""
    root = minirelease_build
    cells = {a["cell_id"]: a["tests"] for a in json.loads((root / "dist" / "manifest.json").read_text())["artifacts"]}
    assert {c: t["installer"] for c, t in cells.items()} == {
        "fixcext-cpu-linux-x86_64-cp39-wheel": "uv", "fixpure-any-wheel": "pip",
        "fixcext-cpu-linux-x86_64-cp313-wheel": "pip"}
    assert {c: t["installed"] for c, t in cells.items()} == {
        "fixcext-cpu-linux-x86_64-cp39-wheel": "0.3.0+cpu", "fixpure-any-wheel": "0.3.0",
        "fixcext-cpu-linux-x86_64-cp313-wheel": "0.3.0+cpu"}
    # The uv cell's venv has no pip at all: nothing else could have installed into it.
    assert not list((root / ".shipyard" / "test" / "fixcext-cpu-linux-x86_64-cp39-wheel" / "venv").glob(
        "lib/python*/site-packages/pip"))


def test_wheels_are_labelled_repaired_and_carry_build_info(minirelease_build):
    root = minirelease_build
    folder = root / "dist" / "whl" / "cpu"
    names = sorted(p.name for p in folder.glob("*/*.whl"))
    assert names == ["fixcext-0.3.0+cpu-cp313-cp313-manylinux_2_31_x86_64.whl",
                     "fixcext-0.3.0+cpu-cp39-cp39-manylinux_2_31_x86_64.whl",
                     "fixpure-0.3.0-py3-none-any.whl"]
    wheel = folder / "fixcext" / "fixcext-0.3.0+cpu-cp39-cp39-manylinux_2_31_x86_64.whl"
    with zipfile.ZipFile(wheel) as zf:
        members = zf.namelist()
        info = json.loads(zf.read("fixcext/_build_info.json"))
        features = json.loads(zf.read("fixcext/_features.json"))
        metadata = zf.read("fixcext-0.3.0+cpu.dist-info/METADATA").decode()
    # auditwheel vendored libpng, and the core built once is inside.
    assert any(m.startswith("fixcext.libs/libpng16") for m in members)
    assert "fixcext/lib/libfixcore.so" in members
    assert "Version: 0.3.0+cpu" in metadata
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    assert info == {"component": "fixcext", "version": "0.3.0", "variant": "cpu", "variant_tag": "cpu",
                    "cuda_version": None, "cuda_archs": [], "git_sha": head, "python": "3.9",
                    "platform": "linux-x86_64", "verified_cuda_archs": None}  # a CPU wheel has no device code
    assert {f["id"]: f["status"] for f in features["features"]} == {
        "fix.sumsq": "stable", "fix.png": "stable", "fix.flaky-beta": "beta"}


def test_a_nightly_build_names_its_wheels_with_the_commits_development_version(minirelease_build, tmp_path):
    """`--publish-channel nightly`: the same builds (from the cache), relabelled under
    0.3.0.dev<commit's UTC day>, in name, METADATA, build info and manifest; tested from their own
    index, where only development versions are (pip takes them for the unpinned fixcext)."""
    root = own_copy(minirelease_build, tmp_path / "release")
    spec = load_spec(root)
    when = int(subprocess.run(["git", "log", "-1", "--format=%ct"], cwd=root, capture_output=True, text=True,
                              check=True).stdout)
    day = time.strftime("%Y%m%d", time.gmtime(when))
    version = f"0.3.0.dev{day}"
    dist = tmp_path / "nightly"
    # Its own dist beside the copy's plain one, the copy's cache.
    outcomes = build_variant(spec, replace(request(root, pythons=("3.9",), test_jobs=1, nightly=True), dist=dist))
    assert {o.result for o in outcomes} == {"passed"}, [(o.cell.id, o.result, o.detail) for o in outcomes]
    names = sorted(p.name for p in (dist / "whl" / "cpu").glob("*/*.whl"))
    assert names == [f"fixcext-{version}+cpu-cp39-cp39-manylinux_2_31_x86_64.whl",
                     f"fixpure-{version}-py3-none-any.whl"]
    with zipfile.ZipFile(dist / "whl" / "cpu" / "fixcext" / names[0]) as zf:
        metadata = zf.read(f"fixcext-{version}+cpu.dist-info/METADATA").decode()
        info = json.loads(zf.read("fixcext/_build_info.json"))
    assert f"\nVersion: {version}+cpu\n" in metadata
    assert info["version"] == version
    manifest = json.loads((dist / "manifest.json").read_text())
    assert manifest["version"] == version
    assert {a["version"] for a in manifest["artifacts"]} == {version}
    # The plain build's index is untouched: release builds keep 0.3.0.
    assert all("dev" not in p.name for p in (root / "dist").rglob("*.whl"))


def _user_venv(path: Path) -> tuple[Path, dict[str, str]]:
    """A fresh venv of Python 3.11 and an environment that ignores every pip setting."""
    from shipyard.host.toolchains.discover import discover

    subprocess.run([discover().interpreter("3.11").path, "-m", "venv", path], check=True)
    return path / "bin" / "python", plain_pip_env()


def _installed(python: Path, *names: str) -> list[str]:
    probe = "import importlib.metadata as m, sys; print(*(m.version(n) for n in sys.argv[1:]))"
    return subprocess.run([python, "-c", probe, *names], capture_output=True, text=True, check=True).stdout.split()


def test_a_pure_wheel_is_one_artifact_with_the_same_bytes_in_every_variant_index(minirelease_build, tmp_path):
    root = minirelease_build
    manifest = json.loads((root / "dist" / "manifest.json").read_text())
    [record] = [a for a in manifest["artifacts"] if a["component"] == "fixpure"]
    assert (record["cell_id"], record["name"], record["python"]) == (
        "fixpure-any-wheel", "fixpure-0.3.0-py3-none-any.whl", None)
    assert record["tests"]["installed"] == "0.3.0"
    # A CPU build puts the pure wheel, byte for byte, into every variant's index.
    copies = {tag: root / "dist" / "whl" / tag / "fixpure" / record["name"] for tag in ("cpu", "cu102", "cu118")}
    assert {tag: sha256(path) for tag, path in copies.items()} == dict.fromkeys(copies, record["sha256"])
    with zipfile.ZipFile(copies["cpu"]) as zf:
        info = json.loads(zf.read("fixpure/_build_info.json"))
        features = json.loads(zf.read("fixpure/_features.json"))
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    assert info == {"component": "fixpure", "version": "0.3.0", "git_sha": head}
    assert features == {"features": [{"id": "fix.norm", "title": "norm on top of fixcext",
                                      "status": {"linux-x86_64": "stable"}}]}
    # pip finds it by name in each variant index (no local version to match).
    python, env = _user_venv(tmp_path / "user")
    for tag in copies:
        index = (root / "dist" / "whl" / tag).as_uri()
        subprocess.run([python, "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps", "--index-url", index,
                        "fixpure"], check=True, env=env)
        assert _installed(python, "fixpure") == ["0.3.0"]


def test_index_has_sha256_on_every_link(minirelease_build):
    root = minirelease_build
    project = root / "dist" / "whl" / "cpu" / "fixcext"
    html = (project / "index.html").read_text()
    data = json.loads((project / "index.json").read_text())
    assert data["meta"]["api-version"] == "1.1" and len(data["files"]) == 2
    for entry in data["files"]:
        digest = sha256(project / entry["filename"])
        assert entry["hashes"]["sha256"] == digest
        assert f"#sha256={digest}" in html
    root_index = json.loads((root / "dist" / "whl" / "cpu" / "index.json").read_text())
    assert [p["name"] for p in root_index["projects"]] == ["fixcext", "fixpure"]


def test_manifest_records_artifacts_features_and_tests(minirelease_build):
    root = minirelease_build
    manifest = json.loads((root / "dist" / "manifest.json").read_text())
    by_cell = {a["cell_id"]: a for a in manifest["artifacts"]}
    record = by_cell["fixcext-cpu-linux-x86_64-cp313-wheel"]
    assert record["sha256"] == sha256(root / "dist" / record["path"])
    assert record["size"] == (root / "dist" / record["path"]).stat().st_size
    assert record["python"] == "3.13" and record["variant"] == "cpu"
    assert record["tests"]["installed"] == "0.3.0+cpu"
    assert record["tests"]["features"]["fix.sumsq"] == {
        "status": "stable", "result": "passed", "summary": "passed (2 of 2)", "passed": 2, "failed": 0, "skipped": 0,
        "skip_reasons": [], "not_run": 0, "not_run_reasons": []}


def test_unchanged_rerun_is_cached_and_fast(minirelease_build, tmp_path):
    # A copy at another path: the cache keys name contents, never the folder.
    root = own_copy(minirelease_build, tmp_path / "release")
    spec = load_spec(root)
    before = {p.name: sha256(p) for p in (root / "dist").rglob("*.whl")}
    start = time.monotonic()
    outcomes = build_variant(spec, request(root, pythons=PYTHONS))
    seconds = time.monotonic() - start
    assert {o.result for o in outcomes} == {"cached"}, [(o.cell.id, o.result, o.build.get("cached")) for o in outcomes]
    assert seconds < 5, f"an unchanged re-run took {seconds:.1f}s"
    assert {p.name: sha256(p) for p in (root / "dist").rglob("*.whl")} == before


def test_a_source_change_rebuilds_only_its_component(minirelease_build, tmp_path):
    root = own_copy(minirelease_build, tmp_path / "release")
    module = root / "library" / "fixpure" / "src" / "fixpure" / "__init__.py"
    module.write_text(module.read_text() + "\n# changed\n")
    outcomes = build_variant(load_spec(root), request(root, pythons=("3.9",)))
    results = {o.cell.component: o.result for o in outcomes}
    assert results == {"fixcext": "cached", "fixpure": "passed"}
    # A run replaces the records of its own cells and keeps every other: the 3.13 cell (as a
    # run of another variant keeps the CPU records beside its own).
    records = {a["cell_id"]: a for a in _manifest(root)["artifacts"]}
    assert set(records) == {"fixcext-cpu-linux-x86_64-cp39-wheel", "fixcext-cpu-linux-x86_64-cp313-wheel",
                            "fixpure-any-wheel"}
    assert records["fixpure-any-wheel"]["sha256"] == sha256(root / "dist" / records["fixpure-any-wheel"]["path"])
    assert records["fixpure-any-wheel"]["sha256"] != next(
        a["sha256"] for a in _manifest(minirelease_build)["artifacts"] if a["cell_id"] == "fixpure-any-wheel")


def test_a_new_commit_that_leaves_the_sources_alone_rebuilds_nothing(minirelease_build, tmp_path):
    root = own_copy(minirelease_build, tmp_path / "release")
    (root / "NOTES.md").write_text("release notes\n")
    env = {**os.environ, **GIT_ENV, "GIT_COMMITTER_DATE": "2020-10-28T12:00:00+00:00"}
    subprocess.run(["git", "add", "-A"], cwd=root, env=env, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "notes"], cwd=root, env=env, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    outcomes = build_variant(load_spec(root), request(root, pythons=("3.9",)))
    assert {o.result for o in outcomes} == {"cached"}, [(o.cell.id, o.result) for o in outcomes]
    # The wheels are re-labelled with the new commit all the same.
    wheel = root / "dist" / "whl" / "cpu" / "fixcext" / "fixcext-0.3.0+cpu-cp39-cp39-manylinux_2_31_x86_64.whl"
    with zipfile.ZipFile(wheel) as zf:
        assert json.loads(zf.read("fixcext/_build_info.json"))["git_sha"] == head


def test_missing_toolkit_fails_with_the_doctors_message(tmp_path, capsys):
    root = make_checkout(tmp_path / "release")
    with pytest.raises(ToolchainMissing) as info:
        build_variant(load_spec(root), request(root, "cuda10.2", pythons=("3.11",), run_tests=False))
    text = str(info.value)
    assert "fixcuda-cu102-linux-x86_64-cp311-wheel: no CUDA 10.2 toolkit, and none can be obtained" in text
    assert "--skip-unavailable" in text
    code = main(["--root", str(root), "build", "--variant", "cuda10.2", "--python", "3.11",
                 "--component", "fixcuda", "--skip-unavailable", "--no-tests"])
    out = capsys.readouterr().out
    assert code == 0
    assert "fixcuda-cu102-linux-x86_64-cp311-wheel" in out and "skipped" in out


def test_container_build_gives_the_same_wheel_names(minirelease_build, tmp_path, docker_engine):
    # The host's wheels are the shared build's; the container builds in a copy of it, with no
    # dist/ (a container build is another cache entry: both cells build again, inside).
    host = sorted(p.name for p in (minirelease_build / "dist" / "whl" / "cpu").glob("*/*.whl")
                  if "cp39" not in p.name)
    container_root = own_copy(minirelease_build, tmp_path / "container", dist=False)
    inside = build_variant(load_spec(container_root),
                           request(container_root, pythons=("3.13",), run_tests=False, container=True))
    assert [o.result for o in inside] == ["built", "built"], [o.detail for o in inside]
    assert host == sorted(o.wheel.name for o in inside) == [
        "fixcext-0.3.0+cpu-cp313-cp313-manylinux_2_31_x86_64.whl", "fixpure-0.3.0-py3-none-any.whl"]
    # The container's wheel is repaired on the host too: libpng is vendored the same way.
    cext = next(o.wheel for o in inside if o.cell.component == "fixcext")
    with zipfile.ZipFile(cext) as zf:
        assert any(m.startswith("fixcext.libs/libpng16") for m in zf.namelist())


def test_checks_name_the_wheel_and_the_rule(minirelease_build):
    from shipyard.release.cuda_archs import DeviceCode
    from shipyard.wheel import checks

    root = minirelease_build
    raw = next((root / ".shipyard" / "raw" / "fixcext-cpu-linux-x86_64-cp39-wheel").glob("*.whl"))
    [lib] = checks.check_shared_libraries(raw, "manylinux_2_31")
    assert lib.wheel == raw.name and lib.rule == "unexpected shared library"
    assert "needs libpng16.so.16, which is neither in the wheel nor allowed by manylinux_2_31" in lib.detail
    final = root / "dist" / "whl" / "cpu" / "fixcext" / "fixcext-0.3.0+cpu-cp39-cp39-manylinux_2_31_x86_64.whl"
    assert checks.check_shared_libraries(final, "manylinux_2_31") == []
    [tag] = checks.check_platform_tag(final, {"cp39-cp39-manylinux_2_17_x86_64"})
    assert str(tag) == (f"{final.name}: platform tag: tags cp39-cp39-manylinux_2_31_x86_64; "
                        f"expected cp39-cp39-manylinux_2_17_x86_64")
    [cuda] = checks.check_cuda_archs(final, ("8.0",), lambda _: DeviceCode())
    assert cuda.rule == "CUDA archs" and "no CUDA device code" in cuda.detail


def test_a_wheel_over_budget_fails_its_cell_and_is_not_published(minirelease_build, tmp_path):
    root = own_copy(minirelease_build, tmp_path / "release", dist=False)
    text = (root / "release.yaml").read_text().replace("wheel_size_budget_mb: 5", "wheel_size_budget_mb: 0.05")
    (root / "release.yaml").write_text(text)
    outcomes = build_variant(load_spec(root), request(root, pythons=("3.13",), components=("fixcext",)))
    [outcome] = outcomes
    assert outcome.result == "failed"
    assert outcome.detail.startswith("fixcext-0.3.0+cpu-cp313-cp313-manylinux_2_31_x86_64.whl: size budget: ")
    assert "over the budget of 0.05 MiB (release.yaml)" in outcome.detail
    assert not list((root / "dist" / "whl" / "cpu").glob("*/*.whl"))


def test_the_declared_vendored_libraries_are_enforced(minirelease_build, tmp_path):
    root = own_copy(minirelease_build, tmp_path / "release")
    release_yaml = root / "release.yaml"
    # fixcext vendors libpng; declare libjpeg instead. The build is cached (a declaration does
    # not change the wheel's bytes), and the check fails the cell both ways.
    release_yaml.write_text(release_yaml.read_text().replace("vendored_libraries: [libpng]",
                                                             "vendored_libraries: [libjpeg]"))
    [outcome] = build_variant(load_spec(root), request(root, pythons=("3.9",), components=("fixcext",),
                                                       run_tests=False))
    name = "fixcext-0.3.0+cpu-cp39-cp39-manylinux_2_31_x86_64.whl"
    assert outcome.result == "failed" and outcome.build["cached"]
    assert f"{name}: vendored libraries: vendors libpng16 (fixcext.libs/libpng16-" in outcome.detail
    assert (f"{name}: vendored libraries: does not vendor libjpeg, which components.fixcext.vendored_libraries "
            f"declares") in outcome.detail


def test_a_console_script_that_crashes_on_help_fails_the_cell(minirelease_build, tmp_path, monkeypatch):
    [pure] = [a for a in _manifest(minirelease_build)["artifacts"] if a["cell_id"] == "fixpure-any-wheel"]
    assert pure["build"]["result"] == "passed"  # fixpure-norm --help ran in the test venv
    root = own_copy(minirelease_build, tmp_path / "release")
    monkeypatch.setenv("FIXTURE_BREAK_SCRIPT", "1")
    forget_test_results(root)  # run the tests again, keep the builds
    [outcome] = build_variant(load_spec(root), request(root, pythons=("3.9",), components=("fixpure",)))
    assert outcome.result == "failed"
    assert "console script fixpure-norm: `fixpure-norm --help` exited 1" in outcome.detail
    assert "RuntimeError: fixture: the console script is broken on purpose" in outcome.detail


def test_a_narrowed_build_builds_what_its_selection_depends_on(minirelease_build, tmp_path, capsys):
    # No dist/, as in a clean checkout: fixpure's tests install fixcext (its dependency) from the
    # variant's index, which only this run can fill. The build cache keeps the rebuild cheap.
    root = own_copy(minirelease_build, tmp_path / "release", dist=False)
    forget_test_results(root)  # fixpure's tests really run, against this run's fixcext
    code = main(["--root", str(root), "build", "--variant", "cpu", "--python", "3.9", "--component", "fixpure"])
    out, err = capsys.readouterr()
    assert "also building fixcext: fixpure depends on it" in err
    assert code == 0, out + err
    results = {a["cell_id"]: (a["build"]["result"], a["tests"] is not None) for a in _manifest(root)["artifacts"]}
    assert results == {"fixpure-any-wheel": ("passed", True),
                       "fixcext-cpu-linux-x86_64-cp39-wheel": ("not tested", False)}
    assert "1 of 2 cells ok; 1 built and checked, not tested (dependencies of --component)" in " ".join(out.split())
