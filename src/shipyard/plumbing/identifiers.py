"""Identifiers: the names shipyard builds paths, tags and URLs from, and what characters they may hold.

Component, variant, platform, mobile target, publish target and channel names, a record's cell id,
variant tag, platform and package type: each ends up in a file name (`provenance/<cell id>.intoto.jsonl`),
an index folder (`whl/<tag>/`), a workflow job id or an exclusion glob. So each is checked where it is
read (release.yaml, a manifest) against one character set, and can never carry `/`, `..`, a space or a
control character. docs/identifiers-and-paths.md states the rules for users.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

# A letter or digit, then letters, digits, '.', '_', '+' or '-'; never two dots in a row (`..`).
# Every name of release.yaml and of the test fixtures fits, and so does every cell id the matrix
# joins from them with '-' (ember-cu118-linux-x86_64-cp311-wheel).
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
NAME_RULE = "letters, digits, '.', '_', '+' or '-', starting with a letter or digit, without '..'"

# A plain file name as a manifest records an artifact's (`name`): one path component.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

# A Docker image reference a record names an image by: [registry[:port]/]name[/name…][:tag], the tag
# as the distribution spec allows it (at most 128 characters: letters, digits, '_', '.', '-').
IMAGE_REPOSITORY = re.compile(r"([a-z0-9.-]+(:\d+)?/)?[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*")
IMAGE_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
IMAGE_RULE = "[registry[:port]/]name[:tag], lowercase name parts, a tag of letters, digits, '_', '.' or '-'"


def name_problem(value: str) -> str | None:
    """Why `value` is not an identifier (message; allowed set), or None when it is one."""
    if not NAME_PATTERN.fullmatch(value) or ".." in value:
        return f"is not a name; use {NAME_RULE}"
    return None


def check_name(value: str) -> str:
    """`value` when it is an identifier; ValueError naming the allowed set (a pydantic validator)."""
    problem = name_problem(value)
    if problem:
        raise ValueError(problem)
    return value


# A str field (or dict key) that must be an identifier.
Name = Annotated[str, AfterValidator(check_name)]


def file_name_problem(value: str) -> str | None:
    """Why `value` is not a plain file name (one path component), or None."""
    if not value or value in (".", "..") or "/" in value or "\\" in value or _CONTROL.search(value):
        return "is not a plain file name; give one name without '/', '\\' or control characters, not '.' or '..'"
    return None


def check_file_name(value: str) -> str:
    """`value` when it is a plain file name; ValueError otherwise (a pydantic validator)."""
    problem = file_name_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def image_reference_problem(value: str) -> str | None:
    """Why `value` is not an image reference with an optional tag, or None."""
    repository, colon, found = value.rpartition(":")
    tag: str | None = found
    if not colon or "/" in found:  # no tag, or the colon was a registry's port
        repository, tag = value, None
    # A registry's host name never holds '..' (the pattern alone would take `../etc/passwd`).
    if not IMAGE_REPOSITORY.fullmatch(repository) or (tag is not None and not IMAGE_TAG.fullmatch(tag)) \
            or ".." in value:
        return f"is not an image reference; write {IMAGE_RULE}"
    return None
