"""What the pipeline needs to know about GitHub's runners that release.yaml does not say.

release.yaml names the runner of each platform (`platforms.*.github_runner`); the rest is here,
in one place, because it describes GitHub's machines rather than the release.
"""

from __future__ import annotations

# The image Linux jobs build in: the same Debian 12 builder this repository's wheels are made
# on. Its own gcc links glibc 2.36, so the wheel jobs first install the compiler that keeps
# release.yaml's glibc promise (the bullseye sysroot for manylinux_2_31, toolchains.sysroot; zig's
# clang for manylinux_2_28 and manylinux2014, toolchains.zig; release/build_routes.py chooses) and
# compile with it, as here; auditwheel then repairs every wheel to exactly that tag.
# ci/bootstrap.sh sets the machine up, as here.
LINUX_BUILDER_IMAGE = "debian:bookworm"

# CUDA versions no runner image can install (they need a host gcc older than any runner has), and
# whose devel image NVIDIA no longer publishes (nvidia/cuda:10.2-devel-ubuntu18.04 is gone from
# Docker Hub): the job builds its own builder image from the Dockerfile in shipyard's package data
# (resources/docker/<folder>/, from NVIDIA's archived installer) and caches it by the Dockerfile's
# sha256 (shipyard.ci.cuda_builder). Its glibc is too old for the Node 20 that actions run on,
# so the job stays on the runner and `docker run`s the build step in it.
CUDA_BUILDER_IMAGES: dict[str, str] = {
    "10.2": "cuda10.2",  # CUDA version -> folder of src/shipyard/resources/docker/
}

# Windows has no `shipyard toolchain install` (it assembles Linux toolkits): the job runs
# NVIDIA's network installer for the full release of each CUDA version, compiler and runtime only.
CUDA_WINDOWS_RELEASES: dict[str, str] = {
    "11.8": "11.8.0",
    "12.4": "12.4.1",
    "13.0": "13.0.0",
}

# Where a Windows or macOS wheel job gets the libraries release.yaml's `vendored_libraries` name
# (embervision's libpng and libjpeg; Linux jobs take them from Debian): a vcpkg port on Windows
# (the runner's VCPKG_INSTALLATION_ROOT), a Homebrew formula on macOS. delvewheel and delocate then
# vendor them into the wheel, as auditwheel does on Linux (wheel/repair.py).
VENDORED_LIBRARY_SOURCES: dict[str, dict[str, str]] = {
    "libpng": {"windows": "libpng", "macos": "libpng"},
    "libjpeg": {"windows": "libjpeg-turbo", "macos": "jpeg-turbo"},
}
VCPKG_TRIPLET = "x64-windows"

# Minutes each job around the build lanes may run before GitHub cancels it: measured runs here times
# the runners' slower cores, with room (docs/pipeline.md). A build lane's are its
# kind's (ci_timeout_minutes, ci_cuda_timeout_minutes in shipyard.release.kinds).
TIMEOUT_MINUTES: dict[str, int] = {
    "plan": 10,
    "manifest": 20,
    "publish": 60,
}

# The runner plan, manifest, publish, mobile and docker jobs use: the Linux platform's.
HOST_OS = "linux"
