"""Mobile targets: triples, emulators and ABIs come from release.yaml's mobile_targets alone."""

from __future__ import annotations

from shipyard.mobile.targets import MobileTarget, resolve_toolchain
from shipyard.validate import load_spec


def _targets(root) -> dict[str, MobileTarget]:
    return {name: MobileTarget.from_spec(t) for name, t in load_spec(root).release.mobile_targets.items()}


def test_a_cross_target_builds_with_the_triple_and_emulator_release_yaml_names(spec_copy, tmp_path):
    spec_copy.edit("release.yaml", "  linux-armv7:\n", "  linux-armhf:\n")
    spec_copy.edit("release.yaml", "emulator: qemu-aarch64\n", "emulator: qemu-aarch64-nowhere\n")
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
