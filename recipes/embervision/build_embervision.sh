#!/bin/bash
# embervision for one Python, built as ember is (see ../ember/build_ember.sh) against the
# libembervision of the host prefix. build_embervision.bat holds the same steps for cmd.exe.
set -eu
export CMAKE_GENERATOR=Ninja
export CMAKE_ARGS="${CMAKE_ARGS:-} $SHIPYARD_CMAKE_ARGS -DEMBERVISION_CORE_PREFIX=$PREFIX -DEMBERVISION_BUNDLE_CORE=OFF -DCMAKE_PREFIX_PATH=$PREFIX"
"$PYTHON" -c "import sys; from scikit_build_core.build import build_wheel; print(build_wheel(sys.argv[1]))" "$SRC_DIR/dist"
"$PYTHON" -m installer --no-compile-bytecode "$SRC_DIR"/dist/embervision-*.whl
if [ -n "$SHIPYARD_PACKAGE_FILES" ]; then cp -R "$SHIPYARD_PACKAGE_FILES/." "$SP_DIR/"; fi
