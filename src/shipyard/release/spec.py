"""The release description: pydantic models for release.yaml and feature_status.yaml.

These models check each file on its own (types, required keys, unknown keys, formats).
Checks that relate one part to another live in `validate.py`. Both files resolve once
into these frozen objects; nothing downstream reads the YAML again.
"""

from __future__ import annotations

import fnmatch
import os
import re
import tomllib
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from shipyard.errors import names_a_secret
from shipyard.release.cuda_archs import parse_arch_list

ComponentKind = Literal["python-native", "python-pure", "native"]
PackageType = Literal["wheel", "mobile", "conda", "docker"]
Status = Literal["stable", "beta", "prototype"]
STATUS_ORDER: dict[str, int] = {"stable": 0, "beta": 1, "prototype": 2}

_NAME = r"^[a-z0-9][a-z0-9._-]*$"
_ENV_NAME = r"^[A-Z][A-Z0-9_]*$"
_IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
_VARIANT_TAG = r"^(cpu|cu\d{3,4})$"
_CUDA_VERSION = r"^\d+\.\d+$"
_FEATURE_ID = r"^[a-z][a-z0-9-]*(\.[a-z0-9-]+)*$"
_TRIPLE = r"^[a-z0-9_]+(-[a-z0-9_]+){1,3}$"
_DEBIAN_PACKAGE = r"^[a-z0-9][a-z0-9.+-]+$"
_ANDROID_ABI = r"^[a-z0-9][a-z0-9_-]*$"
# A console script is a file in bin/ that users type: an entry-point name (letters, digits, '_',
# '.', '-'), not starting with '-' or '.', which a shell would read as an option or a hidden file.
_SCRIPT_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"

# What each pattern means to a person, and how to fix a value that breaks it.
PATTERN_HINTS: dict[str, tuple[str, str]] = {
    _NAME: ("must be lowercase letters, digits, '.', '_' or '-'", "rename it, e.g. 'ember'"),
    _ENV_NAME: ("must be the NAME of an environment variable (capitals, digits, '_')",
                "write the variable's name, e.g. SHIPYARD_PYPI_TOKEN, and put the secret in that variable"),
    _IDENTIFIER: ("must be a Python identifier", "write the name you import, e.g. 'ember'"),
    _VARIANT_TAG: ("must be 'cpu' or 'cu' and the CUDA version's digits", "write e.g. 'cpu' or 'cu118'"),
    _CUDA_VERSION: ("must be a CUDA version major.minor", "write it quoted, e.g. \"11.8\""),
    _FEATURE_ID: ("must be lowercase dotted words", "write e.g. 'ember.fft'"),
    _TRIPLE: ("must be a GNU target triple", "write e.g. aarch64-linux-gnu"),
    _DEBIAN_PACKAGE: ("must be a Debian package name", "write e.g. g++-aarch64-linux-gnu"),
    _ANDROID_ABI: ("must be an Android ABI name", "write e.g. arm64-v8a"),
    _SCRIPT_NAME: ("must be a console-script name: letters, digits, '_', '.' or '-', not starting with '-' or '.'",
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


def _version(value: Any) -> str:
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


class ReleaseInfo(Frozen):
    name: str = Field(pattern=_NAME)
    version: Annotated[str, BeforeValidator(_version)]
    wheel_size_budget_mb: float = Field(gt=0)


class NativeCore(Frozen):
    """A Python-independent CMake project inside a component, built once per variant."""

    source: str
    prefix_define: str = Field(pattern=_ENV_NAME)


# Which package types each kind of component can be built into: a wheel needs a Python
# package, a mobile archive needs a native library.
PACKAGE_TYPES_BY_KIND: dict[str, tuple[str, ...]] = {
    "python-native": ("wheel", "conda", "docker"),
    "python-pure": ("wheel", "conda", "docker"),
    "native": ("mobile", "conda", "docker"),
}


def _requires_python(value: Any) -> Any:
    if isinstance(value, float | int) and not isinstance(value, bool):
        raise ValueError(f"requires-python given as a number ({value!r}); write a quoted specifier, e.g. \">=3.10\"")
    if not isinstance(value, str):
        raise ValueError("not a version specifier; write one quoted, e.g. \">=3.10\"")
    try:
        SpecifierSet(value)
    except InvalidSpecifier as exc:
        raise ValueError("not a PEP 440 version specifier; write one like \">=3.10\" or \">=3.9,<3.13\"") from exc
    return value


def _requirement(value: Any) -> Any:
    if not isinstance(value, str):
        raise ValueError("not a requirement; write one like \"hypothesis>=6\"")
    try:
        Requirement(value)
    except InvalidRequirement as exc:
        reason = str(exc).splitlines()[0]  # packaging adds the text and a caret on further lines
        raise ValueError(f"not a PEP 508 requirement ({reason}); write one like \"hypothesis>=6\"") from exc
    return value


class Component(Frozen):
    name: str
    path: str
    kind: ComponentKind
    import_name: str | None = Field(default=None, pattern=_IDENTIFIER)
    package_types: tuple[PackageType, ...] = Field(min_length=1)
    native_core: NativeCore | None = None
    # Compiles CUDA code in CUDA variants: its wheels must then hold SASS for the arch list.
    cuda_kernels: bool = False
    vendored_libraries: tuple[str, ...] = ()
    console_scripts: tuple[Annotated[str, Field(pattern=_SCRIPT_NAME)], ...] = ()
    # The tests folder, relative to `path`; it may lie outside the project (`../tests-of-x`), for
    # projects whose sources ship no tests, but not outside the release.
    tests: str | None = None
    # What the tests need beyond pytest and the wheel's own dependencies (PEP 508 requirements).
    test_requires: tuple[Annotated[str, BeforeValidator(_requirement)], ...] = ()
    # The wheel's version is the project's own (its built metadata: setuptools_scm, a
    # pyproject version, setup.py's) unless this overrides it.
    version: Annotated[str, BeforeValidator(_version)] | None = None
    # The Pythons the project supports. Read from the project (pyproject.toml's [project] or
    # setup.cfg) when not given; a setup.py-only project states it here. The matrix's other
    # Pythons become "not applicable" cells, never failures.
    requires_python: Annotated[str, BeforeValidator(_requires_python)] | None = None

    @model_validator(mode="after")
    def _python_needs_import_name(self) -> Component:
        if self.kind != "native" and not self.import_name:
            raise ValueError(f"component {self.name!r} is a Python package; set import_name")
        return self

    @model_validator(mode="after")
    def _package_types_fit_kind(self) -> Component:
        allowed = PACKAGE_TYPES_BY_KIND[self.kind]
        wrong = [t for t in self.package_types if t not in allowed]
        if wrong:
            raise ValueError(f"a {self.kind} component cannot be packaged as {', '.join(wrong)}; "
                             f"use {', '.join(allowed)}, or change its kind")
        return self

    @model_validator(mode="after")
    def _python_only_keys(self) -> Component:
        given = [k for k in ("test_requires", "version", "requires_python") if getattr(self, k)]
        if self.kind == "native" and given:
            raise ValueError(f"{', '.join(given)} apply to Python packages; component {self.name!r} is "
                             f"native: remove them")
        return self

    @property
    def is_python(self) -> bool:
        return self.kind != "native"

    def tests_folder(self, root: Path) -> Path:
        """The absolute, normalised tests folder (it may lie outside the project)."""
        assert self.tests is not None
        return Path(os.path.normpath(root.resolve() / self.path / self.tests))

    def admits_python(self, python: str) -> bool:
        """Whether `requires_python` admits some release of Python `python` (major.minor)."""
        if not self.requires_python:
            return True
        spec = SpecifierSet(self.requires_python)
        return any(spec.contains(f"{python}.{patch}", prereleases=True) for patch in (0, 99))


class Variant(Frozen):
    name: str
    tag: str = Field(pattern=_VARIANT_TAG)
    cuda: str | None = Field(default=None, pattern=_CUDA_VERSION)
    arch_list: str | None = None
    host_gcc_max: int | None = Field(default=None, ge=4)
    wheel_size_budget_mb: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _cuda_fields_together(self) -> Variant:
        if self.cuda and not self.archs:
            raise ValueError(f"CUDA variant {self.name!r} names no GPU arch; set arch_list to a list "
                             f"such as \"7.5;8.0\"")
        if not self.cuda and (self.arch_list is not None or self.host_gcc_max):
            raise ValueError(f"variant {self.name!r} sets arch_list/host_gcc_max but no cuda version; "
                             f"add cuda: \"X.Y\" or remove them")
        if self.cuda:
            expected = "cu" + self.cuda.replace(".", "")
            if self.tag != expected:
                raise ValueError(f"variant {self.name!r}: CUDA {self.cuda} has tag {expected!r}, "
                                 f"not {self.tag!r}; set tag: {expected}")
        elif self.tag != "cpu":
            raise ValueError(f"variant {self.name!r} has no cuda version, so its tag must be 'cpu'; "
                             f"set tag: cpu or add cuda: \"X.Y\"")
        return self

    @property
    def is_cuda(self) -> bool:
        return self.cuda is not None

    @property
    def archs(self) -> tuple[str, ...]:
        return parse_arch_list(self.arch_list or "")


class Platform(Frozen):
    name: str
    os: Literal["linux", "windows", "macos"]
    arch: str
    wheel_platform_tag: str
    github_runner: str  # the runner label the release pipeline builds this platform on

    @property
    def promised_glibc(self) -> str | None:
        """The glibc a manylinux tag promises to run on: manylinux_2_31_x86_64 -> '2.31' (and the
        legacy aliases: manylinux2014 -> '2.17'); None for other platforms."""
        legacy = {"manylinux1": "2.5", "manylinux2010": "2.12", "manylinux2014": "2.17"}
        if match := re.fullmatch(r"manylinux_(\d+)_(\d+)_\w+", self.wheel_platform_tag):
            return f"{match.group(1)}.{match.group(2)}"
        return legacy.get(self.wheel_platform_tag.split("_", 1)[0])


# What a shell or CMake would read as more than one plain argument: blanks split words, ';' ends a
# command (and separates a CMake list), quotes, '$', backticks, redirections, braces and globs change
# what runs. A command is an argv list, so no single argument needs any of them.
_SPLITTING = re.compile(r"[\s;|&$`'\"\\<>(){}\[\]*?#]")


def _argument(value: Any) -> Any:
    if not isinstance(value, str):
        return value  # pydantic's own "must be text"
    if not value.strip():
        raise ValueError("an argument is empty; remove it")
    if match := _SPLITTING.search(value):
        raise ValueError(f"{match.group()!r} in an argument would split it or run something else in a shell "
                         "or a CMake list; give each argument as its own list entry, e.g. "
                         "[qemu-aarch64, -L, /usr/aarch64-linux-gnu], with no shell syntax")
    return value


def _argv(value: Any) -> Any:
    # A plain string is a program name alone: one argument, checked like every other.
    return [value] if isinstance(value, str) else value


# A tool command as its argv: the program, then each argument as its own entry.
Argv = Annotated[tuple[Annotated[str, BeforeValidator(_argument)], ...], BeforeValidator(_argv),
                 Field(min_length=1)]


class MobileTarget(Frozen):
    name: str
    toolchain: Literal["android-ndk", "cross-gcc", "host"]
    abi: str | None = Field(default=None, pattern=_ANDROID_ABI)  # passed to CMake as ANDROID_ABI
    triple: str | None = Field(default=None, pattern=_TRIPLE)
    # The command ctest runs the target's programs under, e.g. [qemu-aarch64, -L, /usr/aarch64-linux-gnu].
    emulator: Argv | None = None
    # The Debian packages that provide the cross compiler and the emulator. Default: the cross
    # g++ named after the triple, and qemu-user for a qemu-* emulator (apt_packages).
    packages: tuple[Annotated[str, Field(pattern=_DEBIAN_PACKAGE)], ...] | None = None
    stands_in_for: str | None = None

    @model_validator(mode="after")
    def _cross_names_its_tools(self) -> MobileTarget:
        if self.toolchain == "cross-gcc" and not (self.triple and self.emulator):
            raise ValueError("a cross-gcc target needs both triple and emulator; add e.g. "
                             "'triple: aarch64-linux-gnu' and 'emulator: [qemu-aarch64, -L, /usr/aarch64-linux-gnu]'")
        return self

    @property
    def compiler(self) -> str | None:
        """The cross C++ compiler's program name: <triple>-g++."""
        return f"{self.triple}-g++" if self.triple else None

    @property
    def apt_packages(self) -> tuple[str, ...]:
        """What `apt-get install` needs for this target: `packages:` when release.yaml names them,
        else Debian's cross g++ for the triple (g++-aarch64-linux-gnu; '_' becomes '-', as in
        g++-x86-64-linux-gnu) and qemu-user when the emulator is one of its programs."""
        if self.packages is not None:
            return self.packages
        if self.toolchain != "cross-gcc":
            return ()
        found = [f"g++-{self.triple.replace('_', '-')}"] if self.triple else []
        if self.emulator and self.emulator[0].startswith("qemu-"):
            found.append("qemu-user")
        return tuple(found)


class Exclusion(Frozen):
    """Cells matching every given selector (fnmatch globs) are removed from the matrix."""

    component: Selector = ()
    variant: Selector = ()
    platform: Selector = ()
    python: Selector = ()
    package_type: Selector = ()
    reason: str = Field(min_length=3)

    @model_validator(mode="after")
    def _selects_something(self) -> Exclusion:
        if not (self.component or self.variant or self.platform or self.python or self.package_type):
            raise ValueError("an exclusion selects nothing; give at least one of component, variant, "
                             "platform, python, package_type")
        return self

    def matches(self, **fields: str) -> bool:
        for key, patterns in self.selectors().items():
            if patterns and not any(fnmatch.fnmatchcase(fields[key], p) for p in patterns):
                return False
        return True

    def selectors(self) -> dict[str, tuple[str, ...]]:
        return {"component": self.component, "variant": self.variant, "platform": self.platform,
                "python": self.python, "package_type": self.package_type}


# The URL schemes each kind of publish target speaks ('' is a bare host:port, as registries are named).
URL_SCHEMES_BY_TARGET: dict[str, tuple[str, ...]] = {
    "pypi": ("http", "https"), "static": ("http", "https"), "conda": ("http", "https"),
    "docker": ("", "http", "https"),
}
_URL_EXAMPLES = {"pypi": "https://pypi.example.org/", "static": "https://example.org/whl/",
                 "conda": "https://example.org/conda/", "docker": "127.0.0.1:5000"}
# A host name, an IPv4 address, or an IPv6 address in brackets.
_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$"
                   r"|^\[[0-9A-Fa-f:.]+\]$")


def _publish_url_problem(url: str, kind: str | None) -> str | None:
    """What is wrong with `url` as a `kind` target's URL ("message; fix"), or None. Never repeats the
    URL: the part before '@', or the query, may be a credential."""
    example = _URL_EXAMPLES.get(kind or "", "https://example.org/")
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    authority = rest.partition("/")[0]
    if "@" in authority:
        return ("the URL carries credentials (user:password@); remove them and name the environment variables "
                "that hold them with username_env and password_env")
    if "?" in url or "#" in url:
        return ("the URL carries a query or fragment (?… or #…), which may hold a token; remove it and name the "
                "environment variable that holds a token with token_env")
    parts = re.fullmatch(r"(?P<host>\[[^\]]*\]|[^:\[\]]*)(:(?P<port>\d{1,5}))?", authority)
    if (re.search(r"\s", url) or parts is None or not _HOST.match(parts["host"])
            or (parts["port"] and not 0 < int(parts["port"]) < 65536)):
        return f"not a URL; write one like {example}"
    allowed = URL_SCHEMES_BY_TARGET.get(kind or "")
    if allowed is not None and scheme.lower() not in allowed:
        speaks = " or ".join(f"{s}://" if s else "host:port" for s in allowed)
        given = f"{scheme}://" if scheme else "a URL without a scheme"
        return f"a {kind} target speaks {speaks}, not {given}; write e.g. {example}"
    return None


# Which manifest package types each kind of publish target takes.
PACKAGE_TYPES_BY_TARGET: dict[str, tuple[str, ...]] = {
    "pypi": ("wheel",), "static": ("wheel",), "conda": ("conda",), "docker": ("docker",),
}


class PublishTarget(Frozen):
    """Where artifacts go. Credentials are named by environment variable, never inlined.

    `pypi` is a devpi server (url: its root; one index per channel and variant under the user
    named by username_env); `static` a PyTorch-layout tree (`<path>/<channel>/<tag>/<project>/`)
    that a web server serves at url; `conda` a static channel (`<path>/<channel>/<subdir>/`) served
    at url with conda's /t/<token>/; `docker` a registry (url: host:port)."""

    name: str
    kind: Literal["pypi", "static", "conda", "docker"]
    url: str
    path: str | None = None  # static and conda: the folder the web server serves, relative to release.yaml
    # pypi: the variant whose wheels are also published under the plain version (PyPI refuses +cpu).
    default_variant: str | None = None
    username_env: str | None = Field(default=None, pattern=_ENV_NAME)
    password_env: str | None = Field(default=None, pattern=_ENV_NAME)
    token_env: str | None = Field(default=None, pattern=_ENV_NAME)

    @model_validator(mode="after")
    def _fields_fit_kind(self) -> PublishTarget:
        if self.kind in ("static", "conda") and not self.path:
            raise ValueError(f"a {self.kind} target writes files that a web server serves; set path to that "
                             f"folder, relative to release.yaml (e.g. dist/site/{self.kind})")
        if self.kind not in ("static", "conda") and self.path:
            raise ValueError(f"a {self.kind} target is a server shipyard talks to; remove path")
        if self.default_variant and self.kind != "pypi":
            raise ValueError("default_variant (the PyPI flavour) belongs to a pypi target; remove it here")
        if self.kind == "pypi" and not (self.username_env and self.password_env):
            raise ValueError("a pypi target needs username_env and password_env: the names of the environment "
                             "variables holding the devpi user and password")
        if self.kind == "conda" and not self.token_env:
            raise ValueError("a conda target needs token_env: the name of the environment variable holding the "
                             "channel token its web server checks (/t/<token>/)")
        return self

    def credential_envs(self) -> tuple[str, ...]:
        """The environment variables this target's credentials come from."""
        return tuple(e for e in (self.username_env, self.password_env, self.token_env) if e)

    @model_validator(mode="before")
    @classmethod
    def _no_inline_secrets(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in data:
                word = str(key).lower().replace("-", "_")
                if word.endswith("_env") or not names_a_secret(word):
                    continue
                raise ValueError(
                    f"{key!r} holds a secret inline and release.yaml must never contain credentials; "
                    f"put it in an environment variable and name that variable with "
                    f"{'token_env' if 'token' in word else 'password_env'}")
        return data

    @field_validator("url")
    @classmethod
    def _url_fits_kind(cls, url: str, info: ValidationInfo) -> str:
        # `kind` is validated first; when it is wrong, only the URL's shape is checked here.
        problem = _publish_url_problem(url, info.data.get("kind"))
        if problem:
            raise ValueError(problem)
        return url


class ReleaseChannel(Frozen):
    """A channel artifacts are published to (nightly, test, release), in promotion order.
    gate: block refuses an artifact with a failing stable feature; mark publishes it, marked."""

    name: str = Field(pattern=_NAME)
    gate: Literal["block", "mark"]


# A conda channel: a name on anaconda.org (conda-forge, pytorch) or a URL (https://, http://, file://).
_CHANNEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/label/[A-Za-z0-9._-]+)?$")
_CHANNEL_URL = re.compile(r"^(https?|file)://\S+$")


def _conda_channel(channel: str) -> str:
    if _CHANNEL_URL.match(channel):
        authority = channel.split("//", 1)[1].split("/", 1)[0]
        if "@" in authority or "?" in channel or re.search(r"/t/[^/]+/", channel):
            raise ValueError("a channel URL carries credentials (user:password@, a /t/<token>/ or a ?query); remove "
                             "them, conda channels named here must be readable without a login")
    elif not _CHANNEL_NAME.match(channel):
        raise ValueError("not a conda channel; write a channel name such as conda-forge, or a URL (https://…, "
                         "file:///…)")
    return channel


class CondaSettings(Frozen):
    """Where conda packages get their dependencies: channels in priority order. Where none can
    be reached, shipyard's bootstrap channel stands in for them."""

    channels: tuple[Annotated[str, AfterValidator(_conda_channel)], ...] = Field(min_length=1)

    @field_validator("channels")
    @classmethod
    def _channels_once(cls, channels: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(channels)) != len(channels):
            raise ValueError("a channel appears twice; list each once")
        return channels


def _named(mapping_key: str) -> Any:
    """A before-validator that copies each mapping key into its entry's `name`."""

    def inject(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: ({**v, "name": k} if isinstance(v, dict) else v) for k, v in value.items()}
        return value

    inject.__name__ = f"name_{mapping_key}"
    return inject


# A Docker image reference without a tag or digest: [registry[:port]/]name[/name…].
_IMAGE_REPOSITORY = re.compile(r"^([a-z0-9.-]+(:\d+)?/)?[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*$")
_IMAGE_REF = re.compile(r"^[A-Za-z0-9./:_@-]+$")


class ImageVariant(Frozen):
    """One variant's images: their size budgets (MB, as `docker image inspect` counts them, base
    included) and the base image CI builds FROM."""

    name: str
    runtime_budget_mb: float = Field(gt=0)
    devel_budget_mb: float = Field(gt=0)
    base_image: str | None = Field(default=None, pattern=_IMAGE_REF.pattern)


class ImageSettings(Frozen):
    """The ready-to-train Docker images (`shipyard image build`): one runtime and one devel
    image per listed variant, holding `components` for one Python."""

    repository: str
    python: PythonVersion
    platform: str
    components: tuple[str, ...] = Field(min_length=1)
    channel: Literal["nightly", "test", "release"]
    # What CI builds FROM (a registry is reachable there); a variant may name its own.
    base_image: str = Field(pattern=_IMAGE_REF.pattern)
    # The official image the Python prefix is copied from on CI, and where it lives in it.
    python_image: str = Field(pattern=_IMAGE_REF.pattern)
    python_prefix: str = "/usr/local"
    # The repository the images are built from: the OCI `source` label.
    source: str = Field(pattern=r"^https?://\S+$")
    variants: Annotated[dict[str, ImageVariant], BeforeValidator(_named("variants"))] = Field(min_length=1)

    @field_validator("repository")
    @classmethod
    def _repository_is_a_name(cls, value: str) -> str:
        if not _IMAGE_REPOSITORY.match(value):
            raise ValueError("not an image repository name; write lowercase words such as 'ember' or "
                             "'registry.example.com/ember', without a tag")
        return value

    def base_for(self, variant: str) -> str:
        return self.variants[variant].base_image or self.base_image


class SupplyChain(Frozen):
    """Signed provenance (shipyard.supply): where the Ed25519 signing key comes from, never the
    key itself, and the builder id the provenance names."""

    # A PEM (PKCS#8) private key file, relative to release.yaml, or an environment variable holding
    # the PEM text (a CI secret). The variable wins when it is set.
    signing_key_file: str | None = None
    signing_key_env: str | None = Field(default=None, pattern=_ENV_NAME)
    builder_id: str = Field(min_length=3)

    @model_validator(mode="after")
    def _names_a_key(self) -> SupplyChain:
        if not (self.signing_key_file or self.signing_key_env):
            raise ValueError("supply_chain needs signing_key_file (a PEM file, relative to release.yaml) or "
                             "signing_key_env (the name of the environment variable holding the PEM key)")
        if self.signing_key_file and "PRIVATE KEY" in self.signing_key_file:
            raise ValueError("signing_key_file holds a key, not a path; name the file the key is in")
        return self


class Release(Frozen):
    schema_version: Literal[1]
    release: ReleaseInfo
    components: Annotated[dict[str, Component], BeforeValidator(_named("components"))]
    variants: Annotated[dict[str, Variant], BeforeValidator(_named("variants"))]
    platforms: Annotated[dict[str, Platform], BeforeValidator(_named("platforms"))]
    mobile_targets: Annotated[dict[str, MobileTarget], BeforeValidator(_named("mobile_targets"))] = {}
    pythons: tuple[PythonVersion, ...] = Field(min_length=1)
    exclusions: tuple[Exclusion, ...] = ()
    publish: Annotated[dict[str, PublishTarget], BeforeValidator(_named("publish"))] = {}
    # Publish channels in promotion order: `shipyard promote` moves a version only forward.
    channels: Annotated[dict[str, ReleaseChannel], BeforeValidator(_named("channels"))] = {}
    conda: CondaSettings | None = None
    images: ImageSettings | None = None
    supply_chain: SupplyChain | None = None

    @field_validator("components", "variants", "platforms")
    @classmethod
    def _not_empty(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not value:
            raise ValueError("must name at least one entry")
        return value

    def find_variant(self, name_or_tag: str) -> Variant | None:
        """The variant named `name_or_tag` (cuda11) or tagged so (cu118), if any."""
        if name_or_tag in self.variants:
            return self.variants[name_or_tag]
        return next((v for v in self.variants.values() if v.tag == name_or_tag), None)

    def wheel_size_budget_mb(self, variant: Variant) -> float:
        return variant.wheel_size_budget_mb or self.release.wheel_size_budget_mb


def _status_map(value: Any) -> Any:
    # `status: beta` means every platform; a mapping gives one status per platform.
    if isinstance(value, str):
        return {"*": value}
    return value


class Feature(Frozen):
    id: str = Field(pattern=_FEATURE_ID)
    title: str = Field(min_length=3)
    component: str
    since: Annotated[str, BeforeValidator(_version)]
    status: Annotated[dict[str, Status], BeforeValidator(_status_map)] = Field(min_length=1)
    tests: tuple[str, ...] = Field(min_length=1)

    def status_on(self, platform: str) -> Status | None:
        """The feature's status on `platform`, or None when it does not exist there."""
        return self.status.get(platform, self.status.get("*"))


class FeatureFile(Frozen):
    schema_version: Literal[1]
    features: tuple[Feature, ...] = Field(min_length=1)
