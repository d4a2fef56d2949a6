"""Exceptions raised by ember.distributed (defined by the native extension)."""
from ember._distributed import DistributedError, DistributedTimeoutError

__all__ = ["DistributedError", "DistributedTimeoutError"]
