"""Plumbing: small helpers every other package leans on (commands, locks, generations,
progress, caches, ports, input files, atomic files, hashing). It imports nothing above itself."""
