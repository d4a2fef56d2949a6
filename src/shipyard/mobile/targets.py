"""The mobile targets ember-lite is built for, and what each needs from this host."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class MobileTarget:
    """One mobile target: `name` is host, linux-aarch64, linux-armv7, android-arm64-v8a or
    android-armeabi-v7a; `android_platform` is the minimum Android API for Android ABIs."""

    name: str
    android_platform: str = "android-21"

    def __post_init__(self) -> None:
        if self.name not in KNOWN_TARGETS:
            raise ValueError(f"unknown mobile target {self.name!r}; known: {', '.join(KNOWN_TARGETS)}")

    @property
    def is_android(self) -> bool:
        return self.name.startswith("android-")

    @property
    def android_abi(self) -> str | None:
        return self.name.removeprefix("android-") if self.is_android else None


KNOWN_TARGETS = ("host", "linux-aarch64", "linux-armv7", "android-arm64-v8a", "android-armeabi-v7a")

# Linux cross targets: (GNU triple, qemu-user binary) for the toolchain files under
# library/ember-lite/cmake/ (which also set qemu as CMAKE_CROSSCOMPILING_EMULATOR).
_LINUX_CROSS = {
    "linux-aarch64": ("aarch64-linux-gnu", "qemu-aarch64"),
    "linux-armv7": ("arm-linux-gnueabihf", "qemu-arm"),
}


@dataclass(frozen=True)
class TargetToolchain:
    """How to configure one target on this host, or why it cannot be built here."""

    target: MobileTarget
    cmake_args: tuple[str, ...] = ()
    runs_tests: bool = True  # False: built and packaged, but no way to run its binaries here
    unavailable: str | None = None  # the reason and the fix, when the target cannot be built

    @property
    def available(self) -> bool:
        return self.unavailable is None


def resolve_toolchain(target: MobileTarget, source_dir: Path,
                      environ: Mapping[str, str] | None = None) -> TargetToolchain:
    """What `target` needs on this host: CMake arguments, or the reason it is unavailable."""
    env = os.environ if environ is None else environ
    if target.name == "host":
        return TargetToolchain(target)
    if target.name in _LINUX_CROSS:
        triple, qemu = _LINUX_CROSS[target.name]
        compiler = f"{triple}-g++"
        toolchain_file = source_dir / "cmake" / f"{triple}.cmake"
        if not shutil.which(compiler):
            package = f"g++-{triple}"
            return TargetToolchain(target, unavailable=f"{compiler} not found: install it "
                                                       f"(apt-get install {package})")
        if not shutil.which(qemu) or not Path(f"/usr/{triple}").is_dir():
            return TargetToolchain(target, unavailable=f"{qemu} or the /usr/{triple} sysroot not found: "
                                                       "install qemu-user and the cross compiler "
                                                       "(apt-get install qemu-user)")
        return TargetToolchain(target, cmake_args=(f"-DCMAKE_TOOLCHAIN_FILE={toolchain_file}",))
    ndk = env.get("ANDROID_NDK_HOME") or env.get("ANDROID_NDK_ROOT")
    ndk_toolchain = Path(ndk) / "build" / "cmake" / "android.toolchain.cmake" if ndk else None
    if ndk_toolchain is None or not ndk_toolchain.is_file():
        where = f" (ANDROID_NDK_HOME={ndk} has no build/cmake/android.toolchain.cmake)" if ndk else ""
        return TargetToolchain(target, unavailable="Android NDK not found" + where +
                                                   ": install the Android NDK and set ANDROID_NDK_HOME")
    args: tuple[str, ...] = (f"-DCMAKE_TOOLCHAIN_FILE={ndk_toolchain}", f"-DANDROID_ABI={target.android_abi}",
            f"-DANDROID_PLATFORM={target.android_platform}", "-DANDROID_STL=c++_static")
    if target.android_abi == "armeabi-v7a":
        args += ("-DANDROID_ARM_NEON=ON",)
    # No Android emulator or device here: the binaries are built and packaged, not run.
    return TargetToolchain(target, cmake_args=args, runs_tests=False)
