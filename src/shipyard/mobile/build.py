"""Configure, build, test and package ember-lite for each mobile target."""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from shipyard.errors import ShipyardError
from shipyard.host.source_tree import git_info
from shipyard.mobile.aar import write_aar
from shipyard.mobile.packaging import FeatureEntry, feature_manifest, write_reproducible_tarball
from shipyard.mobile.targets import MobileBuildTarget, TargetToolchain, resolve_toolchain
from shipyard.plumbing import command
from shipyard.plumbing.progress import Progress
from shipyard.supply.sbom import MOBILE_SBOM, mobile_sbom

FeatureTuple = tuple[str, str, str]  # (id, title, status)
FeaturesForTarget = (Callable[[MobileBuildTarget], Sequence[FeatureTuple]]
                     | Mapping[str, Sequence[FeatureTuple]])


@dataclass(frozen=True)
class MobileResult:
    """What happened to one target: status is passed, failed or unavailable."""

    target: str
    status: str
    reason: str
    package: Path | None
    seconds: float
    aar: Path | None = None
    tests_run: bool = False


def ember_lite_source(source_dir: Path) -> Path:
    """library/ember-lite under a repository root, or source_dir itself if it is ember-lite."""
    nested = source_dir / "library" / "ember-lite"
    return nested if (nested / "CMakeLists.txt").is_file() else source_dir


def _features(features_for_target: FeaturesForTarget, target: MobileBuildTarget) -> list[FeatureEntry]:
    raw = (features_for_target(target) if callable(features_for_target)
           else features_for_target.get(target.name, ()))
    return [FeatureEntry(*entry) for entry in raw]


def _ndk_major(cmake_args: Sequence[str]) -> int:
    """The NDK's major version from its source.properties (prefab's abi.json wants it)."""
    toolchain = next(a.split("=", 1)[1] for a in cmake_args if a.startswith("-DCMAKE_TOOLCHAIN_FILE="))
    properties = Path(toolchain).parents[2] / "source.properties"
    match = re.search(r"Pkg\.Revision\s*=\s*(\d+)", properties.read_text()) if properties.is_file() else None
    return int(match.group(1)) if match else 0


def _build_one(toolchain: TargetToolchain, *, source: Path, version: str,
               features: list[FeatureEntry], build_root: Path, dist_dir: Path, epoch: int,
               say: Progress) -> MobileResult:
    target = toolchain.target
    start = time.monotonic()
    build_dir = build_root / target.name
    stage = build_root / f"{target.name}-stage"
    for path in (build_dir, stage):
        if path.exists():
            shutil.rmtree(path)
    # No absolute source or build paths in the binaries, fixed timestamps.
    prefix_maps = f"-ffile-prefix-map={source.parent}=. -ffile-prefix-map={build_dir}=build"
    env = {"SOURCE_DATE_EPOCH": str(epoch), "CFLAGS": prefix_maps, "CXXFLAGS": prefix_maps,
           "LC_ALL": "C", "TZ": "UTC"}
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    what = f"ember-lite {target.name}"
    say(f"{target.name}: configure")
    command.run(["cmake", "-S", source, "-B", build_dir, *generator, "-DCMAKE_BUILD_TYPE=Release",
                 "-DEMBER_LITE_BUILD_BENCH=OFF", *toolchain.cmake_args],
                extra_env=env, timeout=900, what=f"configure {what}")
    say(f"{target.name}: build")
    command.run(["cmake", "--build", build_dir, "--parallel", str(min(2, os.cpu_count() or 1))],
                extra_env=env, timeout=3600, what=f"build {what}")
    reason = "built; ctest passed"
    if toolchain.runs_tests:
        # Cross builds run their tests under the emulator release.yaml names: resolve_toolchain
        # passes it as CMAKE_CROSSCOMPILING_EMULATOR, which ctest applies to every test program.
        say(f"{target.name}: test")
        result = command.run(["ctest", "--output-on-failure", "--timeout", "600"], cwd=build_dir,
                             extra_env=env, timeout=1800, what=f"test {what}")
        summary = next((line for line in result.stdout.splitlines() if "tests passed" in line), "")
        reason = f"built; ctest: {summary.strip()}" if summary else reason
        if target.emulator:
            reason += f" (under {' '.join(target.emulator)})"
    else:
        reason = "built and packaged; tests not run (no Android device or emulator on this host)"
    say(f"{target.name}: package")
    command.run(["cmake", "--install", build_dir, "--prefix", stage, "--component", "ember_lite"],
                extra_env=env, timeout=600, what=f"install {what}")
    (stage / "share" / "ember-lite").mkdir(parents=True, exist_ok=True)
    (stage / "share" / "ember-lite" / "features.json").write_bytes(
        feature_manifest(version=version, target=target.name, features=features))
    # Last, so that it lists every binary the tarball holds.
    (stage / MOBILE_SBOM).write_bytes(mobile_sbom(stage, name="ember-lite", version=version, target=target.name,
                                                  library_dirs=toolchain.library_dirs,
                                                  provided_by=toolchain.provided_by, epoch=epoch))
    name = f"ember-lite-{version}-{target.name}"
    package = write_reproducible_tarball(stage, dist_dir / f"{name}.tar.gz", top_dir=name, epoch=epoch)
    aar = None
    if target.is_android and target.android_abi:
        aar = write_aar(output=dist_dir / f"{name}.aar", abi=target.android_abi,
                        shared_library=stage / "lib" / "libember_lite.so",
                        header=stage / "include" / "ember_lite.h", version=version,
                        min_sdk=int(target.android_platform.removeprefix("android-")),
                        ndk_major=_ndk_major(toolchain.cmake_args), epoch=epoch)
    return MobileResult(target.name, "passed", reason, package, time.monotonic() - start, aar,
                        tests_run=toolchain.runs_tests)


def build_mobile(targets: Sequence[MobileBuildTarget], *, version: str, features_for_target: FeaturesForTarget,
                 source_dir: Path, build_root: Path, dist_dir: Path,
                 progress: Progress | None = None) -> list[MobileResult]:
    """Build, test and package ember-lite for each target; one MobileResult per target.

    source_dir is the repository root (or library/ember-lite itself); packages go to
    dist_dir as ember-lite-<version>-<target>.tar.gz (+ .aar for Android). A target whose
    toolchain is missing is `unavailable` with the reason and fix; a failing step makes it
    `failed` with the error, and the other targets still run.
    """
    say = progress or (lambda _text: None)
    source = ember_lite_source(Path(source_dir)).resolve()
    build_root = Path(build_root).resolve()
    dist_dir = Path(dist_dir).resolve()
    epoch = git_info(source).commit_time
    results = []
    for target in targets:
        toolchain = resolve_toolchain(target, source)
        if not toolchain.available:
            say(f"{target.name}: unavailable: {toolchain.unavailable}")
            results.append(MobileResult(target.name, "unavailable", toolchain.unavailable or "", None, 0.0))
            continue
        start = time.monotonic()
        try:
            result = _build_one(toolchain, source=source, version=version,
                                features=_features(features_for_target, target), build_root=build_root,
                                dist_dir=dist_dir, epoch=epoch, say=say)
        except (ShipyardError, OSError, ValueError) as error:
            result = MobileResult(target.name, "failed", str(error), None, time.monotonic() - start)
        say(f"{target.name}: {result.status} ({result.seconds:.0f}s): {result.reason.splitlines()[0]}")
        results.append(result)
    return results
