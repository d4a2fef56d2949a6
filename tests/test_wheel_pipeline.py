"""The wheel pipeline end to end on the fixture release: real builds, auditwheel, pip, pytest."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
import zipfile
from pathlib import Path

import pytest
from minirelease import GIT_ENV, forget_test_results, make_checkout, request

from shipyard.cli import main
from shipyard.errors import ToolchainMissing
from shipyard.release.validate import load_spec
from shipyard.wheel.pipeline import build_variant

pytestmark = pytest.mark.slow

PYTHONS = ("3.9", "3.13")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def cpu_build(tmp_path_factory):
    root = make_checkout(tmp_path_factory.mktemp("first") / "release")
    spec = load_spec(root)
    start = time.monotonic()
    outcomes = build_variant(spec, request(root, pythons=PYTHONS, test_jobs=2))
    return root, spec, outcomes, time.monotonic() - start


def test_every_cell_builds_and_passes(cpu_build):
    _, _, outcomes, _ = cpu_build
    assert {o.cell.id: o.result for o in outcomes} == {
        **{f"fixcext-cpu-linux-x86_64-cp{p.replace('.', '')}-wheel": "passed" for p in PYTHONS},
        "fixpure-any-wheel": "passed"}


def test_cells_are_tested_side_by_side_each_in_its_own_folder_and_ports(cpu_build):
    """Three cells, two at a time: their runs overlap, and each had its own TMPDIR and port range."""
    root, _, _, _ = cpu_build
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


def test_uv_makes_the_environments_and_pip_resolves_once_per_python(cpu_build):
    """pip resolves by name from the variant index for one cell per Python: the one that pulls
    in most of the release's packages (fixpure brings fixcext); uv makes the others."""
    root, _, _, _ = cpu_build
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


def test_wheels_are_labelled_repaired_and_carry_build_info(cpu_build):
    root, _, _, _ = cpu_build
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
                    "platform": "linux-x86_64"}
    assert {f["id"]: f["status"] for f in features["features"]} == {
        "fix.sumsq": "stable", "fix.png": "stable", "fix.flaky-beta": "beta"}


def _user_venv(path: Path) -> tuple[Path, dict[str, str]]:
    """A fresh venv of Python 3.11 and an environment that ignores every pip setting."""
    from shipyard.host.toolchains.discover import discover

    subprocess.run([discover().interpreter("3.11").path, "-m", "venv", path], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_CONFIG_FILE": os.devnull}
    return path / "bin" / "python", env


def _installed(python: Path, *names: str) -> list[str]:
    probe = "import importlib.metadata as m, sys; print(*(m.version(n) for n in sys.argv[1:]))"
    return subprocess.run([python, "-c", probe, *names], capture_output=True, text=True, check=True).stdout.split()


def test_a_pure_wheel_is_one_artifact_with_the_same_bytes_in_every_variant_index(cpu_build, tmp_path):
    root, _, _, _ = cpu_build
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


def test_index_has_sha256_on_every_link(cpu_build):
    root, _, _, _ = cpu_build
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


def test_manifest_records_artifacts_features_and_tests(cpu_build):
    root, _, _, _ = cpu_build
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


def test_unchanged_rerun_is_cached_and_fast(cpu_build):
    root, spec, _, _ = cpu_build
    before = {p.name: sha256(p) for p in (root / "dist").rglob("*.whl")}
    start = time.monotonic()
    outcomes = build_variant(spec, request(root, pythons=PYTHONS))
    seconds = time.monotonic() - start
    assert {o.result for o in outcomes} == {"cached"}, [(o.cell.id, o.result, o.build.get("cached")) for o in outcomes]
    assert seconds < 5, f"an unchanged re-run took {seconds:.1f}s"
    assert {p.name: sha256(p) for p in (root / "dist").rglob("*.whl")} == before


def test_a_source_change_rebuilds_only_its_component(cpu_build):
    root, spec, _, _ = cpu_build
    module = root / "library" / "fixpure" / "src" / "fixpure" / "__init__.py"
    module.write_text(module.read_text() + "\n# changed\n")
    outcomes = build_variant(spec, request(root, pythons=("3.9",)))
    results = {o.cell.component: o.result for o in outcomes}
    assert results == {"fixcext": "cached", "fixpure": "passed"}


def test_a_new_commit_that_leaves_the_sources_alone_rebuilds_nothing(cpu_build):
    root, spec, _, _ = cpu_build
    (root / "NOTES.md").write_text("release notes\n")
    env = {**os.environ, **GIT_ENV, "GIT_COMMITTER_DATE": "2020-10-28T12:00:00+00:00"}
    subprocess.run(["git", "add", "-A"], cwd=root, env=env, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "notes"], cwd=root, env=env, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    # Python 3.9 only: the previous test rebuilt (and tested) fixpure's change there alone.
    outcomes = build_variant(spec, request(root, pythons=("3.9",)))
    assert {o.result for o in outcomes} == {"cached"}, [(o.cell.id, o.result) for o in outcomes]
    # The wheels are re-labelled with the new commit all the same.
    wheel = root / "dist" / "whl" / "cpu" / "fixcext" / "fixcext-0.3.0+cpu-cp39-cp39-manylinux_2_31_x86_64.whl"
    with zipfile.ZipFile(wheel) as zf:
        assert json.loads(zf.read("fixcext/_build_info.json"))["git_sha"] == head


def test_two_clean_builds_are_byte_identical(tmp_path):
    roots = [make_checkout(tmp_path / "one" / "release"), make_checkout(tmp_path / "elsewhere" / "x" / "release")]
    digests = []
    for root in roots:
        build_variant(load_spec(root), request(root, pythons=("3.9",), run_tests=False))
        digests.append({p.name: sha256(p) for p in (root / "dist").rglob("*.whl")})
    assert sorted(digests[0]) == ["fixcext-0.3.0+cpu-cp39-cp39-manylinux_2_31_x86_64.whl",
                                  "fixpure-0.3.0-py3-none-any.whl"]
    assert digests[0] == digests[1]


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


@pytest.mark.cuda_toolkit  # --install-toolchain
def test_cuda11_wheels_pass_the_arch_check_and_resolve_from_their_index(tmp_path, capsys):
    root = make_checkout(tmp_path / "release")
    # CPU wheels first, so that the dist folder holds both variants side by side.
    assert main(["--root", str(root), "build", "--variant", "cpu", "--python", "3.11", "--no-tests"]) == 0
    code = main(["--root", str(root), "build", "--variant", "cuda11", "--python", "3.11", "--install-toolchain"])
    out = capsys.readouterr().out
    assert code == 0, out
    # Runs of different variants merge into one manifest.
    tags = {a["variant_tag"] for a in json.loads((root / "dist" / "manifest.json").read_text())["artifacts"]}
    assert tags >= {"cpu", "cu118"}, tags
    wheel = root / "dist" / "whl" / "cu118" / "fixcuda" / "fixcuda-0.3.0+cu118-cp311-cp311-manylinux_2_31_x86_64.whl"
    with zipfile.ZipFile(wheel) as zf:
        members = zf.namelist()
        info = json.loads(zf.read("fixcuda/_build_info.json"))
    assert info["cuda_version"] == "11.8" and info["cuda_archs"] == ["3.7", "5.0", "6.0", "7.0", "7.5", "8.0",
                                                                      "8.6", "9.0"]
    # cudart is vendored by auditwheel; the driver never is.
    assert any(m.startswith("fixcuda.libs/libcudart") for m in members)
    assert not any("libcuda.so" in m or "libcuda-" in m for m in members)
    from shipyard.host.toolchains.cuobjdump import cuda_device_code
    from shipyard.host.toolchains.discover import discover

    toolkit = discover().cuda_toolkit("11.8")
    with zipfile.ZipFile(wheel) as zf:
        so = next(m for m in members if m.startswith("fixcuda/_fixcuda"))
        path = Path(zf.extract(so, tmp_path / "x"))
    code = cuda_device_code(path, toolkit.cuobjdump)
    assert code.sass == {"sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"}
    assert code.ptx == {"sm_90"}  # the implicit +PTX of the highest arch, for GPUs newer than 9.0
    # A list that misses the binary's archs is caught both ways, naming the wheel, and so is
    # PTX that is not for the list's highest arch.
    from shipyard.wheel import checks

    failures = [str(f) for f in checks.check_cuda_archs(wheel, ("3.7", "5.0", "12.0"),
                                                          lambda p: cuda_device_code(p, toolkit.cuobjdump))]
    assert f"{wheel.name}: CUDA archs: missing SASS for sm_120" in failures
    assert (f"{wheel.name}: CUDA archs: SASS for archs not in the list: sm_60, sm_70, sm_75, sm_80, sm_86, sm_90"
            in failures)
    assert any(f.startswith(f"{wheel.name}: CUDA +PTX: missing PTX for sm_120") for f in failures)
    assert (f"{wheel.name}: CUDA +PTX: PTX for sm_90: only the highest arch of the list (sm_120) ships PTX"
            in failures)
    # What a user gets from the cu118 index: the cu118 build, never a CPU one; the pure wheel
    # by name, the same bytes as in the CPU index, with this variant's native dependency.
    python, env = _user_venv(tmp_path / "user")
    pure = [root / "dist" / "whl" / tag / "fixpure" / "fixpure-0.3.0-py3-none-any.whl" for tag in ("cpu", "cu118")]
    assert sha256(pure[0]) == sha256(pure[1])
    index = (root / "dist" / "whl" / "cu118").as_uri()
    subprocess.run([python, "-m", "pip", "install", "-q", "--index-url", index, "fixpure"], check=True, env=env)
    assert _installed(python, "fixpure", "fixcext") == ["0.3.0", "0.3.0+cu118"]
    assert (root / "dist" / "whl" / "cpu" / "fixcext").is_dir()  # the CPU wheel existed all along


def test_container_build_gives_the_same_wheel_names(tmp_path, docker_engine):
    host_root = make_checkout(tmp_path / "host")
    container_root = make_checkout(tmp_path / "container")
    host = build_variant(load_spec(host_root), request(host_root, pythons=("3.11",), run_tests=False))
    inside = build_variant(load_spec(container_root),
                           request(container_root, pythons=("3.11",), run_tests=False, container=True))
    assert [o.result for o in inside] == ["built", "built"], [o.detail for o in inside]
    assert sorted(o.wheel.name for o in host) == sorted(o.wheel.name for o in inside) == [
        "fixcext-0.3.0+cpu-cp311-cp311-manylinux_2_31_x86_64.whl", "fixpure-0.3.0-py3-none-any.whl"]
    # The container's wheel is repaired on the host too: libpng is vendored the same way.
    cext = next(o.wheel for o in inside if o.cell.component == "fixcext")
    with zipfile.ZipFile(cext) as zf:
        assert any(m.startswith("fixcext.libs/libpng16") for m in zf.namelist())


def test_checks_name_the_wheel_and_the_rule(cpu_build):
    from shipyard.release.cuda_archs import DeviceCode
    from shipyard.wheel import checks

    root, _, _, _ = cpu_build
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


def test_a_wheel_over_budget_fails_its_cell_and_is_not_published(tmp_path):
    root = make_checkout(tmp_path / "release")
    text = (root / "release.yaml").read_text().replace("wheel_size_budget_mb: 5", "wheel_size_budget_mb: 0.05")
    (root / "release.yaml").write_text(text)
    outcomes = build_variant(load_spec(root), request(root, pythons=("3.11",), components=("fixcext",)))
    [outcome] = outcomes
    assert outcome.result == "failed"
    assert outcome.detail.startswith("fixcext-0.3.0+cpu-cp311-cp311-manylinux_2_31_x86_64.whl: size budget: ")
    assert "over the budget of 0.05 MiB (release.yaml)" in outcome.detail
    assert not list((root / "dist" / "whl" / "cpu").glob("*/*.whl"))


def test_the_declared_vendored_libraries_are_enforced(cpu_build):
    root, _, _, _ = cpu_build
    release_yaml = root / "release.yaml"
    original = release_yaml.read_text()
    # fixcext vendors libpng; declare libjpeg instead. The build is cached (a declaration does
    # not change the wheel's bytes), and the check fails the cell both ways.
    release_yaml.write_text(original.replace("vendored_libraries: [libpng]", "vendored_libraries: [libjpeg]"))
    try:
        [outcome] = build_variant(load_spec(root), request(root, pythons=("3.9",), components=("fixcext",),
                                                           run_tests=False))
    finally:
        release_yaml.write_text(original)
    name = "fixcext-0.3.0+cpu-cp39-cp39-manylinux_2_31_x86_64.whl"
    assert outcome.result == "failed" and outcome.build["cached"]
    assert f"{name}: vendored libraries: vendors libpng16 (fixcext.libs/libpng16-" in outcome.detail
    assert (f"{name}: vendored libraries: does not vendor libjpeg, which components.fixcext.vendored_libraries "
            f"declares") in outcome.detail


def test_a_console_script_that_crashes_on_help_fails_the_cell(cpu_build, monkeypatch):
    root, spec, outcomes, _ = cpu_build
    [pure] = [o for o in outcomes if o.cell.is_pure]
    assert pure.result == "passed"  # fixpure-norm --help ran in the test venv
    monkeypatch.setenv("FIXTURE_BREAK_SCRIPT", "1")
    forget_test_results(root)  # run the tests again, keep the builds
    [outcome] = build_variant(spec, request(root, pythons=("3.9",), components=("fixpure",)))
    assert outcome.result == "failed"
    assert "console script fixpure-norm: `fixpure-norm --help` exited 1" in outcome.detail
    assert "RuntimeError: fixture: the console script is broken on purpose" in outcome.detail
