"""Example training scripts shipped with emberelastic."""
