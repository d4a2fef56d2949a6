"""`shipyard build-mobile` on the real ember-lite, and ember-lite's own tests against the
installed ember wheel (export from Python, run natively and under qemu, malformed files)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import tarfile
import time

import pytest

from shipyard.cli import main
from shipyard.host.toolchains.discover import discover
from shipyard.mobile.release import build_mobile_release
from shipyard.release.validate import load_spec
from shipyard.supply.binaries import archive_files
from shipyard.supply.sbom import read_mobile_sbom
from shipyard.supply.verify import check_mobile_sbom
from shipyard.testing.runner import run_component_tests
from shipyard.testing.verdict import feature_gate
from shipyard.wheel.build_request import BuildRequest
from shipyard.wheel.variant_wheels import build_variant

pytestmark = pytest.mark.slow


@pytest.mark.qemu  # the arm targets' tests run under qemu-user
def test_build_mobile_packages_host_and_arm_targets(repo, tmp_path, monkeypatch):
    monkeypatch.delenv("ANDROID_NDK_HOME", raising=False)
    dist = tmp_path / "dist"
    results = build_mobile_release(load_spec(repo), targets=(), dist=dist, state=tmp_path / "state",
                                   progress=lambda _: None)
    status = {r.target: r.status for r in results}
    assert status == {"host": "passed", "linux-aarch64": "passed", "linux-armv7": "passed",
                      "android-arm64-v8a": "unavailable", "android-armeabi-v7a": "unavailable"}, results
    # The Android ABIs are reported, with the NDK named as the fix.
    for result in results:
        if result.target.startswith("android"):
            assert "install the Android NDK and set ANDROID_NDK_HOME" in result.reason
    for target in ("host", "linux-aarch64", "linux-armv7"):
        package = dist / "mobile" / f"ember-lite-1.7.0-{target}.tar.gz"
        with tarfile.open(package) as tar:
            names = set(tar.getnames())
            features = json.load(tar.extractfile(f"ember-lite-1.7.0-{target}/share/ember-lite/features.json"))
        top = f"ember-lite-1.7.0-{target}"
        assert {f"{top}/include/ember_lite.h", f"{top}/lib/libember_lite.so", f"{top}/lib/libember_lite.a",
                f"{top}/lib/cmake/ember_lite/ember_liteConfig.cmake"} <= names
        assert {f["id"]: f["status"] for f in features["features"]} == {
            "mobile.runtime": "beta", "mobile.caching-allocator": "beta"}
        # Its SBOM lists the runtime's binaries and what they link, traced to the target's own
        # libraries (the host's libstdc++6, the cross packages for the ARM targets); verify agrees.
        with tarfile.open(package) as tar:
            sbom = read_mobile_sbom(archive_files(tar))
        assert sbom is not None and "lib/libember_lite.so" in sbom.built, sbom
        libstdcxx = {"host": "libstdc++6", "linux-aarch64": "libstdc++6-arm64-cross",
                     "linux-armv7": "libstdc++6-armhf-cross"}[target]
        assert sbom.linked["libstdc++.so.6"].split()[0] == libstdcxx, sbom.linked
        check = check_mobile_sbom(package, "1.7.0")
        assert check.ok, check
    manifest = json.loads((dist / "manifest.json").read_text())
    cells = {a["cell_id"]: a for a in manifest["artifacts"]}
    record = cells["ember-lite-cpu-linux-armv7-mobile"]
    assert record["tests"]["result"] == "passed" and record["tests"]["tests_run"] is True
    assert record["sha256"] == hashlib.sha256((dist / record["path"]).read_bytes()).hexdigest()
    # A second build from scratch gives the same bytes.
    again = tmp_path / "again"
    assert main(["--root", str(repo), "build-mobile", "--target", "linux-aarch64", "--dist", str(again),
                 "--state", str(tmp_path / "state2")]) == 0
    name = "mobile/ember-lite-1.7.0-linux-aarch64.tar.gz"
    assert (again / name).read_bytes() == (dist / name).read_bytes()
    # Built for nightly (the same build folder: nothing to compile again), the tarball and its
    # record carry the commit's development version.
    when = int(subprocess.run(["git", "log", "-1", "--format=%ct"], cwd=repo, capture_output=True, text=True,
                              check=True).stdout)
    version = f"1.7.0.dev{time.strftime('%Y%m%d', time.gmtime(when))}"
    nightly = tmp_path / "nightly"
    assert main(["--root", str(repo), "build-mobile", "--target", "host", "--dist", str(nightly),
                 "--state", str(tmp_path / "state"), "--publish-channel", "nightly"]) == 0
    assert [p.name for p in (nightly / "mobile").glob("*.tar.gz")] == [f"ember-lite-{version}-host.tar.gz"]
    manifest = json.loads((nightly / "manifest.json").read_text())
    assert manifest["version"] == version and [a["version"] for a in manifest["artifacts"]] == [version]


def test_ember_lite_tests_against_the_installed_wheel(repo, tmp_path, suite_state):
    spec = load_spec(repo)
    dist = tmp_path / "dist"
    # linux-x86_64's wheel (the manylinux2014 twin's is another build of the same sources).
    request = BuildRequest(variant="cpu", pythons=("3.11",), components=("ember",), platforms=("linux-x86_64",),
                           run_tests=False, dist=dist, state=suite_state)
    [outcome] = build_variant(spec, request)
    assert outcome.result in ("built", "cached"), outcome.detail
    tests_dir = repo / "library" / "ember" / "tests" / "mobile"
    run = run_component_tests(
        wheel=outcome.wheel, variant_index=dist / "whl" / "cpu", interpreter=discover().interpreter("3.11"),
        tests_dir=tests_dir, gate=feature_gate(spec, "ember-lite", "host", tests_dir, repo),
        source_dir=repo / "library" / "ember", state=suite_state, work=tmp_path / "test-mobile",
        local_projects={"ember"})
    assert run.passed, (run.problems, run.log_tail)
    results = {f.id: f for f in run.features}
    for feature in ("mobile.runtime", "mobile.caching-allocator"):
        assert results[feature].failed == 0 and results[feature].passed > 0, results[feature]
        assert results[feature].skipped == 0, results[feature].skip_reasons
