"""The environment variables release.yaml keeps credentials in (a publish target's password_env and
token_env, supply_chain's signing_key_env): their values are hidden in everything shipyard shows
(redaction.py), and a value too short to be hidden is refused.

A username (username_env) is not a secret: hiding it would blank every word that happens to
be the user's name, and messages name the user they log in as.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

from shipyard.errors import NO_VALUE, SpecIssue
from shipyard.redaction import SHORTEST_SECRET, watch_variables
from shipyard.release.yaml_source import PathKey, YamlDocument

SECRET_VARIABLE_KEYS = ("password_env", "token_env", "signing_key_env")


def _named(data: Any) -> Iterator[tuple[PathKey, str]]:
    """(where, variable name) of every secret-holding *_env key in release.yaml's data, read from
    the YAML itself so that they are known even when the file is otherwise invalid."""
    if not isinstance(data, dict):
        return
    sections: list[tuple[PathKey, Any]] = [(("supply_chain",), data.get("supply_chain"))]
    publish = data.get("publish")
    if isinstance(publish, dict):
        sections += [(("publish", name), target) for name, target in publish.items()]
    for loc, section in sections:
        if not isinstance(section, dict):
            continue
        for key in SECRET_VARIABLE_KEYS:
            name = section.get(key)
            if isinstance(name, str) and name:
                yield (*loc, key), name


def watch_credential_variables(doc: YamlDocument, environ: Mapping[str, str] | None = None) -> list[SpecIssue]:
    """Hide the values of the variables `doc` (release.yaml) names for credentials from now on, and
    an issue for each such variable set to a value shorter than SHORTEST_SECRET. An unset variable
    is no problem here: validate runs where the secrets are not (publish says when one is missing)."""
    env = os.environ if environ is None else environ
    named = list(_named(doc.data))
    watch_variables(name for _, name in named)
    issues = []
    for loc, name in named:
        value = env.get(name)
        if value and len(value) < SHORTEST_SECRET:
            issues.append(SpecIssue(
                doc.path, doc.line_of(loc), ".".join(str(p) for p in loc), NO_VALUE,
                f"the environment variable {name} holds a secret shorter than {SHORTEST_SECRET} characters, which "
                f"cannot be hidden in logs", f"set {name} to a longer password or token"))
    return issues
