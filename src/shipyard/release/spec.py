"""The release description: pydantic models for release.yaml and feature_status.yaml.

These models check each file on its own (types, required keys, unknown keys, formats).
What the models share (the base model, value types, formats) is in `fields.py`; where the
release goes (publish targets, channels, conda, images, provenance) in `destinations.py`.
Checks that relate one part to another live in `validate.py`. Both files resolve once
into these frozen objects, held together by `Spec`; nothing downstream reads the YAML again.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from pydantic import (
    BeforeValidator,
    Field,
    field_validator,
    model_validator,
)

from shipyard.plumbing.identifiers import Name
from shipyard.plumbing.pinned_commits import commit_folder
from shipyard.plumbing.pinned_sdists import sdist_folder
from shipyard.release.cuda_archs import parse_arch_list
from shipyard.release.destinations import (
    CondaSettings,
    ImageSettings,
    PublishTarget,
    ReleaseChannel,
    SupplyChain,
    WheelVariants,
)
from shipyard.release.fields import (
    ANDROID_ABI,
    CUDA_VERSION,
    DEBIAN_PACKAGE,
    DEFAULT_STATUSES,
    ENV_NAME,
    FEATURE_ID,
    IDENTIFIER,
    NAME,
    SCRIPT_NAME,
    STATUS_NAME,
    TRIPLE,
    VARIANT_TAG,
    ComponentKind,
    Frozen,
    PackageType,
    PythonVersion,
    SchemaVersion,
    Selector,
    Status,
    StatusVocabulary,
    named_entries,
    version_text,
)


class ReleaseInfo(Frozen):
    name: str = Field(pattern=NAME)
    version: Annotated[str, BeforeValidator(version_text)]
    # The largest wheel the release publishes, in MiB; none: wheel sizes are not checked.
    wheel_size_budget_mb: float | None = Field(default=None, gt=0)


class NativeCore(Frozen):
    """A Python-independent CMake project inside a component, built once per variant."""

    source: str
    prefix_define: str = Field(pattern=ENV_NAME)


# Which package types each kind of component can be built into: a wheel needs a Python
# package, a mobile archive needs a native library.
PACKAGE_TYPES_BY_KIND: dict[str, tuple[str, ...]] = {
    "python-native": ("wheel", "conda", "docker", "sdist"),
    "python-pure": ("wheel", "conda", "docker", "sdist"),
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


def _limited_api(value: Any) -> Any:
    if isinstance(value, float | int) and not isinstance(value, bool):
        raise ValueError(f"limited_api given as a number ({value!r}), which YAML may misread (3.10 is 3.1); "
                         f"write it quoted, e.g. \"3.9\"")
    if not isinstance(value, str) or not re.fullmatch(r"3\.\d+", value) or int(value.split(".")[1]) < 2:
        raise ValueError("not a limited-API version; write the oldest Python the extensions' limited API "
                         "keeps to, quoted, \"3.2\" or later, e.g. \"3.9\"")
    return value


def _lowercase_hex(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value  # as `sha256sum`, PyPI or a commit page shows it


class PinnedSdist(Frozen):
    """A component's sources as a released sdist, pinned as conda-forge recipes pin theirs."""

    # https://, file:// or a path relative to release.yaml (a .tar.gz with one top folder).
    url: str = Field(min_length=1)
    sha256: Annotated[str, BeforeValidator(_lowercase_hex)] = Field(pattern=r"^[0-9a-f]{64}$")


def _commit_id(value: Any) -> Any:
    value = _lowercase_hex(value)
    if isinstance(value, str) and not re.fullmatch(r"[0-9a-f]{40}", value):
        raise ValueError("must be a whole commit id, 40 hex digits (`git rev-parse <branch or tag>` prints it): a "
                         "branch, a tag or a short id can come to mean another commit")
    return value


def _subdirectory(value: Any) -> Any:
    if isinstance(value, str) and (value.startswith(("/", "\\")) or ".." in Path(value).parts or ":" in value):
        raise ValueError("must be a folder inside the repository, relative to its top (e.g. python/mylib), "
                         "without '..'")
    return value


class PinnedCommit(Frozen):
    """A component's sources as a git repository at one commit (the whole id: a branch or tag moves)."""

    # Any url git fetches from (https://, ssh://, git@host:path, file://) or a path relative to release.yaml.
    url: str = Field(min_length=1)
    commit: Annotated[str, BeforeValidator(_commit_id)] = Field(pattern=r"^[0-9a-f]{40}$")
    # The project's folder inside the repository (a monorepo's), relative to its top.
    subdirectory: Annotated[str, BeforeValidator(_subdirectory)] | None = Field(default=None, min_length=1)

    def folder(self) -> Path:
        """The project's folder once fetched (plumbing/pinned_commits.fetch_commit)."""
        top = commit_folder(self.url, self.commit)
        return Path(os.path.normpath(top / self.subdirectory)) if self.subdirectory else top


class Component(Frozen):
    name: str
    # The project's folder: relative to release.yaml or absolute, inside the release or not. Exactly
    # one of `path`, `sdist` and `git` says where the sources are; `source_dir` is where they are read.
    path: str | None = Field(default=None, min_length=1)
    sdist: PinnedSdist | None = None
    git: PinnedCommit | None = None
    kind: ComponentKind
    import_name: str | None = Field(default=None, pattern=IDENTIFIER)
    package_types: tuple[PackageType, ...] = Field(min_length=1)
    native_core: NativeCore | None = None
    # Compiles CUDA code in CUDA variants: its wheels must then hold SASS for the arch list.
    cuda_kernels: bool = False
    vendored_libraries: tuple[str, ...] = ()
    console_scripts: tuple[Annotated[str, Field(pattern=SCRIPT_NAME)], ...] = ()
    # The tests folder, relative to the project's folder; it may lie outside the project
    # (`../tests-of-x`), for projects whose sources ship no tests, but then inside the release.
    tests: str | None = None
    # What the tests need beyond pytest and the wheel's own dependencies (PEP 508 requirements).
    test_requires: tuple[Annotated[str, BeforeValidator(_requirement)], ...] = ()
    # Which of the project's own tests this release leaves out, as pytest's selection options (a
    # list of arguments): -k EXPR, -m EXPR, --deselect ID, --ignore PATH (validate refuses the rest).
    pytest_args: tuple[str, ...] = ()
    # The wheel's version is the project's own (its built metadata: setuptools_scm, a
    # pyproject version, setup.py's) unless this overrides it.
    version: Annotated[str, BeforeValidator(version_text)] | None = None
    # The Pythons the project supports. Read from the project (pyproject.toml's [project] or
    # setup.cfg) when not given; a setup.py-only project states it here. The matrix's other
    # Pythons become "not applicable" cells, never failures.
    requires_python: Annotated[str, BeforeValidator(_requires_python)] | None = None
    # The oldest Python whose limited API (PEP 384) the extensions keep to: one wheel per platform
    # and variant, tagged cp39-abi3, built with the lowest Python and tested on every Python of the
    # release (validate.py holds it to the release's Pythons; wheel/limited_api.py builds and audits it).
    limited_api: Annotated[str, BeforeValidator(_limited_api)] | None = None

    @model_validator(mode="after")
    def _one_source(self) -> Component:
        if [self.path, self.sdist, self.git].count(None) != 2:
            raise ValueError(f"component {self.name!r} needs exactly one of path (its folder), sdist "
                             f"({{url, sha256}} of a released source distribution) and git ({{url, commit}} of "
                             f"a repository)")
        return self

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
    def _limited_api_needs_extensions(self) -> Component:
        if self.limited_api and self.kind != "python-native":
            raise ValueError(f"limited_api applies to extension modules; component {self.name!r} is "
                             f"{self.kind}: remove limited_api")
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

    def source_dir(self, root: Path) -> Path:
        """The project's folder, absolute and normalised, for the release folder `root`: its `path`
        (relative to `root`, or absolute), or where its pinned sdist unpacks or its pinned commit's tree
        lands in shipyard's cache (validate fetches both). The one place a component's sources are found."""
        if self.sdist is not None:
            return sdist_folder(self.sdist.sha256)
        if self.git is not None:
            return self.git.folder()
        assert self.path is not None
        return Path(os.path.normpath(root.resolve() / self.path))

    def tests_folder(self, root: Path) -> Path:
        """The absolute, normalised tests folder (it may lie outside the project)."""
        assert self.tests is not None
        return Path(os.path.normpath(self.source_dir(root) / self.tests))

    def test_id_root(self, root: Path) -> Path:
        """What feature_status.yaml's test ids of this component are relative to: the release folder
        `root` when the tests folder lies inside it (as always before), else the project's folder (a
        project outside the release, or an unpacked sdist, names its tests as its own runs do).
        Inside as release.yaml writes it, not where symlinks lead: a release whose library/ is a
        link keeps its ids (validate checks where the tests folder leads on its own)."""
        if self.tests is None or self.tests_folder(root).is_relative_to(root.resolve()):
            return root.resolve()
        return self.source_dir(root).resolve()

    @property
    def abi3_tag(self) -> str | None:
        """The Python tag of the one abi3 wheel (limited_api "3.9" -> "cp39"), None without limited_api."""
        return "cp" + self.limited_api.replace(".", "") if self.limited_api else None

    def admits_python(self, python: str) -> bool:
        """Whether `requires_python` admits some release of Python `python` (major.minor)."""
        if not self.requires_python:
            return True
        spec = SpecifierSet(self.requires_python)
        return any(spec.contains(f"{python}.{patch}", prereleases=True) for patch in (0, 99))


class Variant(Frozen):
    name: str
    tag: str = Field(pattern=VARIANT_TAG)
    cuda: str | None = Field(default=None, pattern=CUDA_VERSION)
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


# What a platform named `<os>-<arch>` builds with when release.yaml does not say: the oldest glibc
# the Linux wheels promise (the bullseye sysroot's, docs/glibc.md), the oldest macOS an arm64 wheel
# can run on, and the GitHub runner of each.
PLATFORM_DEFAULTS: dict[str, dict[str, str]] = {
    "linux-x86_64": {"wheel_platform_tag": "manylinux_2_31_x86_64", "github_runner": "ubuntu-22.04"},
    "linux-aarch64": {"wheel_platform_tag": "manylinux_2_31_aarch64", "github_runner": "ubuntu-22.04-arm"},
    "windows-amd64": {"wheel_platform_tag": "win_amd64", "github_runner": "windows-2022"},
    "windows-arm64": {"wheel_platform_tag": "win_arm64", "github_runner": "windows-11-arm"},
    "macos-arm64": {"wheel_platform_tag": "macosx_11_0_arm64", "github_runner": "macos-14"},
    "macos-x86_64": {"wheel_platform_tag": "macosx_10_13_x86_64", "github_runner": "macos-13"},
}


def _platform_keys_from_name(value: Any) -> Any:
    """A platform's os, arch, wheel tag and runner follow from its name (`linux-x86_64`) unless
    release.yaml gives them; a key given wins, a name outside PLATFORM_DEFAULTS gives only os and arch."""
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return value
    os_name, _, arch = value["name"].partition("-")
    derived = {"os": os_name, "arch": arch} if os_name in ("linux", "windows", "macos") and arch else {}
    return {**derived, **PLATFORM_DEFAULTS.get(value["name"], {}), **value}


class Platform(Frozen):
    """A platform wheels are built for; only its name is required (PLATFORM_DEFAULTS)."""

    name: str
    os: Literal["linux", "windows", "macos"]
    arch: str
    wheel_platform_tag: str
    github_runner: str  # the runner label the release pipeline builds this platform on

    @model_validator(mode="before")
    @classmethod
    def _defaults_from_name(cls, value: Any) -> Any:
        return _platform_keys_from_name(value)

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
    abi: str | None = Field(default=None, pattern=ANDROID_ABI)  # passed to CMake as ANDROID_ABI
    triple: str | None = Field(default=None, pattern=TRIPLE)
    # The command ctest runs the target's programs under, e.g. [qemu-aarch64, -L, /usr/aarch64-linux-gnu].
    emulator: Argv | None = None
    # The Debian packages that provide the cross compiler and the emulator. Default: the cross
    # g++ named after the triple, and qemu-user for a qemu-* emulator (apt_packages).
    packages: tuple[Annotated[str, Field(pattern=DEBIAN_PACKAGE)], ...] | None = None
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
        g++-x86-64-linux-gnu) and qemu-user when the emulator is one of its programs; the host's
        own g++ for a `host` target (a hosted runner has it; a bare one does not)."""
        if self.packages is not None:
            return self.packages
        if self.toolchain == "host":
            return ("g++",)
        if self.toolchain != "cross-gcc":
            return ()
        found = [f"g++-{self.triple.replace('_', '-')}"] if self.triple else []
        if self.emulator and self.emulator[0].startswith("qemu-"):
            found.append("qemu-user")
        return tuple(found)


@functools.lru_cache(maxsize=4096)
def _globs_match(name: str, patterns: tuple[str, ...]) -> bool:
    """Whether any of `patterns` (fnmatch globs, case-sensitive) matches `name`."""
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


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
        # Asked for every cell of the matrix and every exclusion each time release.yaml is
        # validated (thousands of times per command): each (name, globs) answer is computed once.
        return all(not patterns or _globs_match(fields[key], patterns) for key, patterns in self.selectors().items())

    def selectors(self) -> dict[str, tuple[str, ...]]:
        return {"component": self.component, "variant": self.variant, "platform": self.platform,
                "python": self.python, "package_type": self.package_type}


class Release(Frozen):
    # Every name below (components, variants, platforms, mobile targets, publish targets, channels)
    # is an identifier (plumbing/identifiers.py): cell ids, folders and tags are built from them.
    schema_version: SchemaVersion
    release: ReleaseInfo
    components: Annotated[dict[Name, Component], BeforeValidator(named_entries("components"))]
    variants: Annotated[dict[Name, Variant], BeforeValidator(named_entries("variants"))]
    platforms: Annotated[dict[Name, Platform], BeforeValidator(named_entries("platforms"))]
    mobile_targets: Annotated[dict[Name, MobileTarget], BeforeValidator(named_entries("mobile_targets"))] = {}
    pythons: tuple[PythonVersion, ...] = Field(min_length=1)
    exclusions: tuple[Exclusion, ...] = ()
    publish: Annotated[dict[Name, PublishTarget], BeforeValidator(named_entries("publish"))] = {}
    # Publish channels in promotion order: `shipyard promote` moves a version only forward.
    channels: Annotated[dict[Name, ReleaseChannel], BeforeValidator(named_entries("channels"))] = {}
    conda: CondaSettings | None = None
    images: ImageSettings | None = None
    supply_chain: SupplyChain | None = None
    wheel_variants: WheelVariants | None = None

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

    def wheel_size_budget_mb(self, variant: Variant | None) -> float | None:
        """The size budget (MiB) of `variant`'s wheels (its own, else the release's), of a pure wheel
        (`variant` None: the same in every variant, so the release's); None: sizes are not checked."""
        own = variant.wheel_size_budget_mb if variant else None
        return own or self.release.wheel_size_budget_mb

    def component_version(self, name: str) -> str:
        """Component `name`'s release version: its own `version:`, else the family's release.version.
        The one place its tags (`<name>-v<version>`), its features' `since` and its mobile packages
        take it from."""
        return self.components[name].version or self.release.version


def _status_map(value: Any) -> Any:
    # `status: beta` means every platform; a mapping gives one status per platform.
    if isinstance(value, str):
        return {"*": value}
    return value


class Feature(Frozen):
    id: str = Field(pattern=FEATURE_ID)
    title: str = Field(min_length=3)
    component: str
    since: Annotated[str, BeforeValidator(version_text)]
    status: Annotated[dict[str, Status], BeforeValidator(_status_map)] = Field(min_length=1)
    tests: tuple[str, ...] = Field(min_length=1)

    def status_on(self, platform: str) -> Status | None:
        """The feature's status on `platform`, or None when it does not exist there."""
        return self.status.get(platform, self.status.get("*"))


class StatusName(Frozen):
    """One status of feature_status.yaml's `vocabulary`; `blocks`: a failing feature of this
    status stops the release (its cells are not released; gate: block channels refuse it)."""

    name: str = Field(pattern=STATUS_NAME)
    blocks: bool = False


class FeatureFile(Frozen):
    schema_version: SchemaVersion
    # The statuses features may have, most mature first (default: stable / beta / prototype,
    # stable blocking); release/validate.py holds every feature's status to it.
    vocabulary: tuple[StatusName, ...] | None = Field(default=None, min_length=1)
    features: tuple[Feature, ...] = Field(min_length=1)

    @property
    def statuses(self) -> StatusVocabulary:
        """The vocabulary the features' statuses come from: the file's own, or the default."""
        if self.vocabulary is None:
            return DEFAULT_STATUSES
        return StatusVocabulary(tuple(s.name for s in self.vocabulary),
                                frozenset(s.name for s in self.vocabulary if s.blocks))


@dataclass(frozen=True)
class Spec:
    """Both files, validated: the one description of the release every layer reads."""

    root: Path
    release: Release
    features: FeatureFile
    pending_tests: tuple[str, ...] = ()

    def features_for(self, component: str, platform: str) -> list[tuple[str, str, str]]:
        """(id, title, status) of the component's features that exist on `platform`."""
        out: list[tuple[str, str, str]] = []
        for feature in self.features.features:
            status = feature.status_on(platform)
            if feature.component == component and status:
                out.append((feature.id, feature.title, status))
        return out

    def component_dir(self, name: str) -> Path:
        """Component `name`'s project folder (Component.source_dir)."""
        return self.release.components[name].source_dir(self.root)

    @property
    def statuses(self) -> StatusVocabulary:
        """feature_status.yaml's status vocabulary (stable / beta / prototype unless it declares one)."""
        return self.features.statuses

    def gating_statuses(self, component: str, platform: str) -> dict[str, str]:
        """Feature id -> the status that gates its tests on `platform`. A feature that does
        not exist there (its tests may still run, e.g. Windows code under wine on Linux)
        gates with its most lenient status elsewhere."""
        out: dict[str, str] = {}
        for feature in self.features.features:
            if feature.component != component:
                continue
            here = feature.status_on(platform)
            out[feature.id] = here or max(feature.status.values(), key=self.statuses.rank)
        return out
