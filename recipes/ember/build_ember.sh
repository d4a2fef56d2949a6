#!/bin/bash
# ember for one Python: the extensions built by scikit-build-core against the libember of the host
# prefix (not compiled or bundled again), then installed. build_ember.bat holds the same steps
# for cmd.exe.
set -eu
# Ninja, as the core's build: the extension sources compile side by side (scikit-build-core
# picked Make inside rattler-build, one source at a time)
export CMAKE_GENERATOR=Ninja
export CMAKE_ARGS="${CMAKE_ARGS:-} $SHIPYARD_CMAKE_ARGS -DEMBER_CORE_PREFIX=$PREFIX -DEMBER_BUNDLE_CORE=OFF"
# The build backend's PEP 517 hook, called directly, and the wheel installed by `installer`
# (pypa's library for exactly that): `pip install .` would start pip, a large import with no
# bytecode in the host environment, then run scikit-build-core twice in subprocesses (metadata,
# then the wheel). No direct_url.json records the build's temporary path.
"$PYTHON" -c "import sys; from scikit_build_core.build import build_wheel; print(build_wheel(sys.argv[1]))" "$SRC_DIR/dist"
"$PYTHON" -m installer --no-compile-bytecode "$SRC_DIR"/dist/ember-*.whl
if [ -n "$SHIPYARD_PACKAGE_FILES" ]; then cp -R "$SHIPYARD_PACKAGE_FILES/." "$SP_DIR/"; fi
