"""Plumbing: running commands, file locks, cache generations, progress, build-cache keys, port ranges, input files."""
