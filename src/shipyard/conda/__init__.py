"""Conda packages (#11): recipes built with rattler-build into a channel that py-rattler indexes, solves and installs."""
