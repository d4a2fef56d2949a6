"""Conda packages (issue #11): built with rattler-build, indexed, solved and installed with py-rattler.

`bootstrap` makes the local channel that stands in for conda-forge on a machine that cannot reach
any conda channel: python, numpy, pytest, pip, scikit-build-core, the CUDA runtime, libpng/libjpeg.
"""
