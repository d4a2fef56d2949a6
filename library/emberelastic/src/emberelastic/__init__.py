"""emberelastic: the elastic launcher (`ember-run`) for ember.distributed."""
__version__ = "1.7.0"

from emberelastic.config import LaunchConfig, UsageError, parse_nnodes

__all__ = ["LaunchConfig", "UsageError", "parse_nnodes", "__version__"]
