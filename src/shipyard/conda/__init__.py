"""Conda packages (issue #11): built with rattler-build, indexed, solved and installed with py-rattler.

`bootstrap` makes the local channel that stands in for conda-forge on a machine that cannot reach
any conda channel: python, numpy, pytest, pip, scikit-build-core, the CUDA runtime, libpng/libjpeg.
`variants`, `recipes`, `preflight` and `build` render the recipes from release.yaml's variants and
build them; `normalize`, `channel` and `serve` make the channel byte-identical, atomic and served;
`shipyard.conda.package_tests` installs each package with a real solver and runs its component's tests.
"""
