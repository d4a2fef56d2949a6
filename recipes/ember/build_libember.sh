#!/bin/bash
# libember: ember's native core, configured, built and installed into the host prefix by the CMake
# and Ninja of the build environment, with the compilers its compiler packages activate.
# build_libember.bat holds the same steps for cmd.exe (rattler-build runs the .bat on Windows).
# CMAKE_ARGS: what the compiler packages' activation hands CMake (conda-forge's set it; the
# bootstrap channel's stand-ins do not). SHIPYARD_CMAKE_ARGS: shipyard's definitions (variant,
# CUDA toolkit and arch list, the toolchain it resolved), empty where shipyard does not build.
set -eu
# shellcheck disable=SC2086  # both hold lists of -D definitions, split on purpose
cmake -S core -B build-core -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$PREFIX" ${CMAKE_ARGS:-} $SHIPYARD_CMAKE_ARGS
cmake --build build-core --parallel "${CPU_COUNT:-1}"
cmake --install build-core
