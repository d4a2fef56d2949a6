"""Counts as a reader says them: "1 component", "2 components", "0 features"."""

from __future__ import annotations


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """`number` and `noun`, plural unless the number is one (`plural` where adding "s" is wrong)."""
    return f"{number} {noun if number == 1 else plural or noun + 's'}"
