"""Mobile targets: triples, emulators and ABIs come from release.yaml's mobile_targets alone."""

from __future__ import annotations

import os
import re
import shutil

import pytest
import yaml
from support.report_release import host_without_tools

from shipyard.ci.workflow import workflows
from shipyard.cli import main
from shipyard.errors import HOST_NOT_READY
from shipyard.host.doctor import diagnose
from shipyard.host.toolchains.discover import discover, discover_for
from shipyard.mobile.targets import MobileBuildTarget, resolve_toolchain
from shipyard.release.validate import load_spec

RISCV = ("  linux-riscv64:\n    toolchain: cross-gcc\n    triple: riscv64-linux-gnu\n"
         "    emulator: [qemu-riscv64, -L, /usr/riscv64-linux-gnu]\n")


def _targets(root) -> dict[str, MobileBuildTarget]:
    return {name: MobileBuildTarget.from_spec(t) for name, t in load_spec(root).release.mobile_targets.items()}


def test_a_cross_target_builds_with_the_triple_and_emulator_release_yaml_names(spec_copy, tmp_path):
    spec_copy.edit("release.yaml", "  linux-armv7:\n", "  linux-armhf:\n")
    spec_copy.edit("release.yaml", "emulator: [qemu-aarch64, -L", "emulator: [qemu-aarch64-nowhere, -L")
    targets = _targets(spec_copy.root)
    # ci/bootstrap.sh installs the cross compilers and qemu-user.
    armhf = resolve_toolchain(targets["linux-armhf"], tmp_path)
    assert armhf.available and armhf.runs_tests, armhf.unavailable
    assert armhf.cmake_args == (f"-DCMAKE_TOOLCHAIN_FILE={tmp_path}/cmake/arm-linux-gnueabihf.cmake",
                                "-DCMAKE_CROSSCOMPILING_EMULATOR=qemu-arm;-L;/usr/arm-linux-gnueabihf")
    aarch64 = resolve_toolchain(targets["linux-aarch64"], tmp_path)
    assert not aarch64.available
    assert "qemu-aarch64-nowhere" in (aarch64.unavailable or "")


def test_an_android_target_builds_for_the_abi_release_yaml_names(spec_copy, tmp_path):
    spec_copy.edit("release.yaml", "mobile_targets:\n", "mobile_targets:\n  android-x86_64:\n"
                   "    toolchain: android-ndk\n    abi: x86_64\n  phone:\n    toolchain: android-ndk\n"
                   "    abi: arm64-v8a\n")
    ndk = tmp_path / "ndk"
    (ndk / "build" / "cmake").mkdir(parents=True)
    (ndk / "build" / "cmake" / "android.toolchain.cmake").write_text("")
    targets = _targets(spec_copy.root)
    for name, abi in (("android-x86_64", "x86_64"), ("phone", "arm64-v8a"), ("android-armeabi-v7a", "armeabi-v7a")):
        toolchain = resolve_toolchain(targets[name], tmp_path, environ={"ANDROID_NDK_HOME": str(ndk)})
        assert toolchain.available and not toolchain.runs_tests
        assert f"-DANDROID_ABI={abi}" in toolchain.cmake_args
    missing = resolve_toolchain(targets["phone"], tmp_path, environ={})
    assert missing.unavailable == "Android NDK not found: install the Android NDK and set ANDROID_NDK_HOME"


def test_an_emulator_is_passed_to_cmake_as_the_argv_release_yaml_names(spec_copy, tmp_path):
    # A plain name is a one-element command; every argument is its own CMake list entry.
    spec_copy.edit("release.yaml", "emulator: [qemu-arm, -L, /usr/arm-linux-gnueabihf]", "emulator: qemu-arm")
    armv7 = resolve_toolchain(_targets(spec_copy.root)["linux-armv7"], tmp_path)
    assert armv7.cmake_args[-1] == "-DCMAKE_CROSSCOMPILING_EMULATOR=qemu-arm"


def _fake_program(folder, name: str) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text("#!/bin/sh\nexit 0\n")
    (folder / name).chmod(0o755)


@pytest.fixture
def fresh_discovery():
    discover.cache_clear()
    yield
    discover.cache_clear()


def test_a_new_cross_triple_is_found_once_its_compiler_is_installed(spec_copy, repo, tmp_path, monkeypatch, capsys,
                                                                    fresh_discovery):
    """Nothing in shipyard names riscv64: discovery, doctor and the CI workflow take the triple,
    the emulator and the Debian packages from release.yaml's mobile_targets."""
    spec_copy.edit("release.yaml", "mobile_targets:\n", "mobile_targets:\n" + RISCV)
    bin_dir = tmp_path / "bin"
    if not shutil.which("riscv64-linux-gnu-g++"):  # a stand-in where Debian's cross g++ is not installed
        _fake_program(bin_dir, "riscv64-linux-gnu-g++")
    if not shutil.which("qemu-riscv64"):
        _fake_program(bin_dir, "qemu-riscv64")
    release = load_spec(spec_copy.root).release

    # Not installed yet: doctor names the package Debian ships the compiler in.
    monkeypatch.setenv("PATH", os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                               if not shutil.which("riscv64-linux-gnu-g++", path=p)))
    (before,) = [r for r in diagnose(release, discover_for(release), "cpu") if r.cell.platform == "linux-riscv64"]
    assert not before.ready
    assert before.detail == ("no riscv64-linux-gnu cross compiler (riscv64-linux-gnu-g++). "
                             "Fix: apt-get install -y g++-riscv64-linux-gnu qemu-user")
    assert main(["--root", str(spec_copy.root), "doctor", "--variant", "cpu"]) == HOST_NOT_READY  # riscv64 is not
    ready_before = re.search(r"(\d+) of (\d+) cells ready", " ".join(capsys.readouterr().out.split()))

    discover.cache_clear()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    inventory = discover_for(release)
    assert str(inventory.cross_compilers["riscv64-linux-gnu"]) == shutil.which("riscv64-linux-gnu-g++")
    assert str(inventory.emulators["qemu-riscv64"]) == shutil.which("qemu-riscv64")
    (after,) = [r for r in diagnose(release, inventory, "cpu") if r.cell.platform == "linux-riscv64"]
    assert after.ready, after.detail
    status = main(["--root", str(spec_copy.root), "doctor", "--variant", "cpu"])
    ready_after = re.search(r"(\d+) of (\d+) cells ready", " ".join(capsys.readouterr().out.split()))
    assert ready_before and ready_after
    # 0 only when every cell is ready (the Android ABIs need an NDK this host may lack).
    assert status == (0 if ready_after[1] == ready_after[2] else HOST_NOT_READY), ready_after[0]
    assert (int(ready_after[1]), ready_after[2]) == (int(ready_before[1]) + 1, ready_before[2])

    # The generated workflow's mobile job installs it too (the generator reads ci/bootstrap.sh's uv range).
    (spec_copy.root / "ci").mkdir()
    shutil.copy(repo / "ci" / "bootstrap.sh", spec_copy.root / "ci" / "bootstrap.sh")
    mobile = next(job for data in workflows(load_spec(spec_copy.root)).values()
                  for job in yaml.safe_load(yaml.safe_dump(data))["jobs"].values()
                  if any(s.get("name") == "Android NDK and cross compilers" for s in job.get("steps", [])))
    step = next(s for s in mobile["steps"] if s.get("name") == "Android NDK and cross compilers")
    install = next(line for line in step["run"].splitlines() if "apt-get install" in line)
    assert "g++-riscv64-linux-gnu" in install.split() and "qemu-user" in install.split(), install
    # the host target builds and runs natively: the runner's own g++ (a bare runner lacks it)
    assert "g++" in install.split(), install


def test_a_target_may_name_the_packages_that_provide_its_tools(spec_copy):
    # A toolchain Debian names otherwise (here a distribution's own cross gcc and emulator).
    spec_copy.edit("release.yaml", "mobile_targets:\n", "mobile_targets:\n" + RISCV +
                   "    packages: [gcc-riscv64-unknown-elf, box64]\n")
    release = load_spec(spec_copy.root).release
    assert release.mobile_targets["linux-riscv64"].apt_packages == ("gcc-riscv64-unknown-elf", "box64")
    assert release.mobile_targets["linux-armv7"].apt_packages == ("g++-arm-linux-gnueabihf", "qemu-user")
    (row,) = [r for r in diagnose(release, host_without_tools(), "cpu") if r.cell.platform == "linux-riscv64"]
    assert row.detail == ("no riscv64-linux-gnu cross compiler (riscv64-linux-gnu-g++). "
                          "Fix: apt-get install -y gcc-riscv64-unknown-elf box64")
