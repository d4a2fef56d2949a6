"""The JSON schemas of release.yaml and feature_status.yaml as a user writes them (`shipyard schema`),
for editors and other tools to check the files before shipyard reads them.

The pydantic models describe the objects after loading, which differ from the YAML in two places,
mended here: an entry of a named mapping (`components:`, `platforms:` …) takes its `name` from its
key, so the YAML never needs one; and a platform's os, arch, wheel tag and runner follow from its
name (spec.PLATFORM_DEFAULTS), so they are required only of a name outside that table.
"""

from __future__ import annotations

import re
from typing import Any

from shipyard.release.spec import PLATFORM_DEFAULTS, FeatureFile, Release

# The platform keys a name gives: os and arch from `<os>-<arch>`, the others from PLATFORM_DEFAULTS.
_FROM_NAME = ("os", "arch")
_FROM_TABLE = ("wheel_platform_tag", "github_runner")
_OSES = ("linux", "windows", "macos")


def release_schema() -> dict[str, Any]:
    """release.yaml's JSON schema (draft 2020-12, as pydantic writes it)."""
    schema = Release.model_json_schema()
    _names_from_keys(schema)
    _platform_keys_from_names(schema)
    return schema


def feature_status_schema() -> dict[str, Any]:
    """feature_status.yaml's JSON schema."""
    schema = FeatureFile.model_json_schema()
    _names_from_keys(schema)
    return schema


def _definition(schema: dict[str, Any], ref: str) -> dict[str, Any]:
    return schema["$defs"][ref.rsplit("/", 1)[-1]]  # type: ignore[no-any-return]


def _names_from_keys(schema: dict[str, Any]) -> None:
    """An entry of a top-level mapping of named entries gets its name from its key: not required."""
    for prop in schema.get("properties", {}).values():
        ref = (prop.get("additionalProperties") or {}).get("$ref") if isinstance(prop, dict) else None
        if not ref:
            continue
        entry = _definition(schema, ref)
        if "name" in entry.get("properties", {}):
            entry["required"] = [key for key in entry.get("required", []) if key != "name"]


def _platform_keys_from_names(schema: dict[str, Any]) -> None:
    """A platform named in PLATFORM_DEFAULTS needs no key; another `<os>-<arch>` needs the wheel tag
    and runner; any other name needs all four."""
    platforms = schema["properties"]["platforms"]
    ref = platforms["additionalProperties"]["$ref"]
    base = _definition(schema, ref)
    optional = ("name", *_FROM_NAME, *_FROM_TABLE)
    base["required"] = [key for key in base.get("required", []) if key not in optional]

    def needing(keys: tuple[str, ...]) -> dict[str, Any]:
        return {"allOf": [{"$ref": ref}, {"required": list(keys)}]} if keys else {"$ref": ref}

    # The names are identifiers (letters, digits, `-`, `_`): no escaping, which ECMA-262's unicode
    # regexes (the dialect JSON schema names) refuse for `-` outside a class.
    assert all(re.fullmatch(r"[a-z0-9_-]+", name) for name in PLATFORM_DEFAULTS)
    known = "|".join(PLATFORM_DEFAULTS)
    platforms["patternProperties"] = {
        **{f"^{name}$": needing(()) for name in PLATFORM_DEFAULTS},
        f"^(?!(?:{known})$)(?:{'|'.join(_OSES)})-.+$": needing(_FROM_TABLE),
    }
    platforms["additionalProperties"] = needing((*_FROM_NAME, *_FROM_TABLE))
    platforms["description"] = (
        "Platforms by name. os, arch, wheel_platform_tag and github_runner follow from a name in "
        f"PLATFORM_DEFAULTS ({', '.join(PLATFORM_DEFAULTS)}); another <os>-<arch> name gives os and arch "
        "and needs the other two; any other name needs all four.")
