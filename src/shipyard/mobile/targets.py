"""The mobile targets ember-lite is built for, and what each needs from this host."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from shipyard.release import spec
from shipyard.supply.grafted import SYSTEM_LIBRARY_DIRS


@dataclass(frozen=True)
class MobileBuildTarget:
    """One target of release.yaml's `mobile_targets`, which alone names them: how it builds
    (`toolchain`: host, cross-gcc or android-ndk), a cross target's GNU `triple`, the `emulator`
    command its programs run under (an argv list) and the Debian `apt_packages` that provide
    both, an Android target's `abi`. `android_platform` is the minimum Android API."""

    name: str
    toolchain: str = "host"
    triple: str | None = None
    emulator: tuple[str, ...] = ()
    abi: str | None = None
    android_platform: str = "android-21"
    apt_packages: tuple[str, ...] = ()

    @classmethod
    def from_spec(cls, target: spec.MobileTarget) -> MobileBuildTarget:
        return cls(target.name, target.toolchain, target.triple, target.emulator or (), target.abi,
                   apt_packages=target.apt_packages)

    @property
    def is_android(self) -> bool:
        return self.toolchain == "android-ndk"

    @property
    def android_abi(self) -> str | None:
        return self.abi if self.is_android else None


@dataclass(frozen=True)
class TargetToolchain:
    """How to configure one target on this host, or why it cannot be built here."""

    target: MobileBuildTarget
    cmake_args: tuple[str, ...] = ()
    runs_tests: bool = True  # False: built and packaged, but no way to run its binaries here
    unavailable: str | None = None  # the reason and the fix, when the target cannot be built
    # Where the libraries the runtime links are found on this host (its SBOM traces them there), or
    # what provides them on the device when this host has no copy (Android's system libraries).
    library_dirs: tuple[Path, ...] = ()
    provided_by: str | None = None

    @property
    def available(self) -> bool:
        return self.unavailable is None


def resolve_toolchain(target: MobileBuildTarget, source_dir: Path,
                      environ: Mapping[str, str] | None = None) -> TargetToolchain:
    """What `target` needs on this host: CMake arguments, or the reason it is unavailable."""
    env = os.environ if environ is None else environ
    if target.toolchain == "host":
        return TargetToolchain(target, library_dirs=SYSTEM_LIBRARY_DIRS)
    if target.toolchain == "cross-gcc":
        # The toolchain files under library/ember-lite/cmake/ are named by triple; ctest runs the
        # target's programs under the emulator release.yaml names (CMAKE_CROSSCOMPILING_EMULATOR).
        triple, emulator = target.triple, target.emulator
        if not triple or not emulator:
            return TargetToolchain(target, unavailable=f"release.yaml: mobile target {target.name} (cross-gcc) "
                                                       f"needs both triple and emulator")
        compiler = f"{triple}-g++"
        toolchain_file = source_dir / "cmake" / f"{triple}.cmake"
        install = f"apt-get install -y {' '.join(target.apt_packages)}"
        if not shutil.which(compiler):
            return TargetToolchain(target, unavailable=f"{compiler} not found: install it ({install})")
        if not shutil.which(emulator[0]) or not Path(f"/usr/{triple}").is_dir():
            return TargetToolchain(target, unavailable=f"{emulator[0]} or the /usr/{triple} sysroot not found: "
                                                       f"install the emulator and the cross compiler ({install})")
        # A CMake list: release.yaml's argv, each entry already checked to hold no ';' (spec.Argv).
        return TargetToolchain(target, cmake_args=(f"-DCMAKE_TOOLCHAIN_FILE={toolchain_file}",
                                                   f"-DCMAKE_CROSSCOMPILING_EMULATOR={';'.join(emulator)}"),
                               library_dirs=(Path(f"/usr/{triple}/lib"),))
    if not target.abi:
        return TargetToolchain(target, unavailable=f"release.yaml: mobile target {target.name} (android-ndk) "
                                                   f"needs an abi such as arm64-v8a")
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
    return TargetToolchain(target, cmake_args=args, runs_tests=False,
                           provided_by=f"the Android platform ({target.android_platform} or later)")
