#!/bin/bash
# libembervision: embervision's native core, built as libember is (see ../ember/build_libember.sh);
# libpng and libjpeg come from the host prefix, not from the build machine.
# build_libembervision.bat holds the same steps for cmd.exe.
set -eu
# shellcheck disable=SC2086  # both hold lists of -D definitions, split on purpose
cmake -S core -B build-core -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$PREFIX" -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_FIND_FRAMEWORK=NEVER ${CMAKE_ARGS:-} $SHIPYARD_CMAKE_ARGS
cmake --build build-core --parallel "${CPU_COUNT:-1}"
cmake --install build-core
