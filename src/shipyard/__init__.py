"""shipyard: a build and release matrix system for a machine-learning library family."""

__version__ = "0.1.0"
