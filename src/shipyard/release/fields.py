"""What the release description's models share: the base model, the value types and formats
(names, versions, Python versions, selectors) and the hints shown when a format is wrong."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Annotated, Any, Literal

from packaging.version import InvalidVersion, Version
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
)

ComponentKind = Literal["python-native", "python-pure", "native"]
PackageType = Literal["wheel", "mobile", "conda", "docker", "sdist"]
# A feature's status: a name of feature_status.yaml's vocabulary (StatusVocabulary), checked
# against it by release/validate.py, which knows the file's own vocabulary.
Status = str
STATUS_NAME = r"^[A-Za-z][A-Za-z0-9._-]*$"


@dataclass(frozen=True)
class StatusVocabulary:
    """The statuses a release's features may have, most mature first, and which of them block a
    release when a feature of that status fails (its cells are not released, a `gate: block`
    channel refuses them). feature_status.yaml may declare its own (PyTorch 2.8's API-Stable /
    API-Unstable); the default is stable / beta / prototype with stable blocking."""

    names: tuple[str, ...]
    blocking: frozenset[str]

    def rank(self, status: str) -> int:
        """Its place in the order, 0 the most mature; a name outside the vocabulary ranks last."""
        return self.names.index(status) if status in self.names else len(self.names)

    def blocks(self, status: str) -> bool:
        return status in self.blocking

    @property
    def unmarked(self) -> str:
        """The status a test of no declared feature gates with: the most mature blocking one
        (nobody declared it lesser)."""
        return next((n for n in self.names if n in self.blocking), self.names[0])

    @property
    def least(self) -> str:
        """The least mature status: the one that promises nothing."""
        return self.names[-1]


DEFAULT_STATUSES = StatusVocabulary(("stable", "beta", "prototype"), frozenset({"stable"}))

NAME = r"^[a-z0-9][a-z0-9._-]*$"
ENV_NAME = r"^[A-Z][A-Z0-9_]*$"
IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
VARIANT_TAG = r"^(cpu|cu\d{3,4})$"
CUDA_VERSION = r"^\d+\.\d+$"
FEATURE_ID = r"^[a-z][a-z0-9-]*(\.[a-z0-9-]+)*$"
TRIPLE = r"^[a-z0-9_]+(-[a-z0-9_]+){1,3}$"
DEBIAN_PACKAGE = r"^[a-z0-9][a-z0-9.+-]+$"
ANDROID_ABI = r"^[a-z0-9][a-z0-9_-]*$"
# A console script is a file in bin/ that users type: an entry-point name (letters, digits, '_',
# '.', '-'), not starting with '-' or '.', which a shell would read as an option or a hidden file.
SCRIPT_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"

# What each pattern means to a person, and how to fix a value that breaks it.
PATTERN_HINTS: dict[str, tuple[str, str]] = {
    NAME: ("must be lowercase letters, digits, '.', '_' or '-'", "rename it, e.g. 'ember'"),
    ENV_NAME: ("must be the NAME of an environment variable (capitals, digits, '_')",
                "write the variable's name, e.g. SHIPYARD_PYPI_TOKEN, and put the secret in that variable"),
    IDENTIFIER: ("must be a Python identifier", "write the name you import, e.g. 'ember'"),
    VARIANT_TAG: ("must be 'cpu' or 'cu' and the CUDA version's digits", "write e.g. 'cpu' or 'cu118'"),
    CUDA_VERSION: ("must be a CUDA version major.minor", "write it quoted, e.g. \"11.8\""),
    FEATURE_ID: ("must be lowercase dotted words", "write e.g. 'ember.fft'"),
    STATUS_NAME: ("must be a status name: letters, digits, '.', '_' or '-', starting with a letter",
                  "write e.g. 'stable' or 'API-Stable'"),
    TRIPLE: ("must be a GNU target triple", "write e.g. aarch64-linux-gnu"),
    DEBIAN_PACKAGE: ("must be a Debian package name", "write e.g. g++-aarch64-linux-gnu"),
    ANDROID_ABI: ("must be an Android ABI name", "write e.g. arm64-v8a"),
    SCRIPT_NAME: ("must be a console-script name: letters, digits, '_', '.' or '-', not starting with '-' or '.'",
                   "write the command users type, e.g. ember-run"),
}


@cache
def supported_pythons() -> tuple[str, ...]:
    """The CPython versions shipyard builds for (resources/pythons.toml), oldest first."""
    text = resources.files("shipyard.resources").joinpath("pythons.toml").read_text()
    return tuple(tomllib.loads(text)["supported"])


class Frozen(BaseModel):
    """Base of every spec model: unknown keys are errors and objects are immutable."""

    # allow_inf_nan=False: `.inf` and `.nan` are YAML numbers, but no budget or version is infinite.
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True, allow_inf_nan=False)


def _python_version(value: Any) -> Any:
    supported = supported_pythons()
    choices = f"{supported[0]} to {supported[-1]}"
    # YAML reads 3.10 as the float 3.1: refuse numbers outright so the typo cannot pass, and
    # name the quoted version the number was meant to be (3.1 -> "3.10", never "3.1").
    if isinstance(value, float | int) and not isinstance(value, bool):
        meant = [v for v in supported if float(v) == float(value)]
        fix = (f"quote it: \"{meant[-1]}\"" if meant else f"quote a supported version ({choices}), e.g. \"3.11\"")
        raise ValueError(f"Python version given as a number, which YAML reads as {float(value)!r}; {fix}")
    if not isinstance(value, str) or not re.fullmatch(r"\d+\.\d+", value):
        raise ValueError(f"not a Python version; write one quoted, like \"3.11\" ({choices})")
    if value not in supported:
        raise ValueError(f"Python {value} is not one shipyard builds for; pick from {', '.join(supported)} "
                         f"(resources/pythons.toml)")
    return value


PythonVersion = Annotated[str, BeforeValidator(_python_version)]


def _tuple_of_str(value: Any) -> Any:
    # A selector may be one string or a list of strings; normalise to a tuple.
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    if isinstance(value, list) and all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in value):
        return tuple(str(v) if not isinstance(v, float) else _python_version(v) for v in value)
    if isinstance(value, float):
        return (_python_version(value),)
    raise ValueError("expected a name or a list of names; write e.g. 'cuda*' or [cpu, cuda11]")


Selector = Annotated[tuple[str, ...], BeforeValidator(_tuple_of_str)]


def _whole_number(value: Any) -> Any:
    # pydantic's Literal[1] takes `true` and 1.0 for 1: a schema version is written as the number itself.
    if isinstance(value, bool | float):
        raise ValueError(f"must be the whole number 1, not {'a boolean' if isinstance(value, bool) else 'a decimal'}")
    return value


SchemaVersion = Annotated[Literal[1], BeforeValidator(_whole_number)]


def version_text(value: Any) -> str:
    if isinstance(value, float):
        raw = getattr(value, "raw", None) or str(value)
        raise ValueError(f"version given as a number, which YAML may misread (1.10 is 1.1); quote it: \"{raw}\"")
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise ValueError("not a version; write one like 1.7.0")
    text = str(value)
    try:
        Version(text)
    except InvalidVersion as exc:
        raise ValueError("not a PEP 440 version; write one like 1.7.0") from exc
    return text


def named_entries(mapping_key: str) -> Any:
    """A before-validator that copies each mapping key into its entry's `name`."""

    def inject(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: ({**v, "name": k} if isinstance(v, dict) else v) for k, v in value.items()}
        return value

    inject.__name__ = f"name_{mapping_key}"
    return inject
