"""The artifact kinds: what the stages around a build ask of a package type, behind one Protocol,
and the one registry from package type to kind (`KINDS`).

The matrix, the toolchains, the manifest, verify, repro, the report, the CI lanes and publish look
a kind up here (`KINDS[cell.package_type].on_mobile_targets`, `kind_of(record.package_type)`)
instead of comparing package types with "wheel", "conda", "docker" or "mobile";
tests/release/test_artifact_kinds.py fails on such a comparison outside the kind packages.

The descriptions are data in this module rather than one module per kind package
(`wheel/kind.py` …): the matrix (release/, the second floor) needs them, and the kind packages
sit on the fifth floor, so importing from them here would run up the floors
(docs/architecture.md, "The layering rule"). Nothing here imports any other shipyard module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, Protocol, runtime_checkable

# What `shipyard verify` checks inside an artifact beyond its signed digest (supply/verify.py):
# "record": the members against RECORD and the SBOM against the binaries (a wheel); "paths": the
# files against info/paths.json, and the SBOM of a .conda; "tarball-sbom": the SBOM inside a
# .tar.gz; "labelled-sbom": the SBOM file beside it whose sha256 the image's label names.
# "source-sbom": the SBOM file beside an sdist lists each of its files with its sha256.
ContentsCheck = Literal["record", "paths", "tarball-sbom", "labelled-sbom", "source-sbom"]
# Where the size budget the report shows comes from (report/artifacts.py): "release": release.yaml's
# wheel_size_budget_mb of the variant, in MiB (as wheel/checks.py counts); "recorded": the build's
# own `budget_mb`, in MB (as docker counts, image/build.py).
SizeBudget = Literal["release", "recorded"]


@runtime_checkable
class ArtifactKind(Protocol):
    """What every layer outside a kind's own package asks of it."""

    @property
    def name(self) -> str:
        """The package type, as release.yaml's `package_types` and the manifest name it."""
        ...

    @property
    def letter(self) -> str:
        """The report's letter for it in a slot that holds several package types."""
        ...

    @property
    def noun(self) -> str:
        """One of it, as the get-started page says it ("conda package")."""
        ...

    @property
    def plural(self) -> str:
        """Several, as the get-started page says it ("conda packages")."""
        ...

    @property
    def installers(self) -> tuple[str, ...]:
        """The get-started page's installers that install it (pip, uv, conda, docker)."""
        ...

    @property
    def publish_targets(self) -> tuple[str, ...]:
        """The kinds of publish target (release.yaml's `publish.<name>.kind`) that take it."""
        ...

    @property
    def on_nightly(self) -> bool:
        """`shipyard publish --channel nightly` sends it. A nightly's wheels carry the development
        version (1.7.0.dev20261206), made by rewriting their metadata; an sdist keeps the version its
        backend reads from the sources (a pyproject field, setup.py, a git tag), so it goes to test and
        release only, as PyTorch's nightlies ship no sdist."""
        ...

    @property
    def on_mobile_targets(self) -> bool:
        """Its cells are the release's mobile targets, cross-built from Linux x86_64 (so from this
        host), with no Python; not its platforms."""
        ...

    @property
    def pure_once(self) -> bool:
        """A pure component's cells of it collapse into one pure cell for every variant and platform."""
        ...

    @property
    def once_per_component(self) -> bool:
        """One cell per component, pure or native: made once from its sources for every variant,
        platform and Python (an sdist), by the build of another kind (`shipyard build`)."""
        ...

    @property
    def splits_native_core(self) -> bool:
        """A Python component's native core is a package of its own (libember), once per platform
        and variant, as conda-forge splits libtorch from pytorch."""
        ...

    @property
    def host_interpreter(self) -> bool:
        """It is built with this host's interpreter of the cell's Python (a conda package's Python
        comes from its channels instead)."""
        ...

    @property
    def keeps_glibc_promise(self) -> bool:
        """Its platform tag promises a glibc, so it is compiled against that glibc or older."""
        ...

    @property
    def vendors_libraries(self) -> bool:
        """It carries release.yaml's `vendored_libraries` inside it (a conda package takes them
        from its channels)."""
        ...

    @property
    def records_failed_cells(self) -> bool:
        """Its build records a cell whose tests failed (the gate decides on it), so a cell with no
        record in the merged manifest is one that was never built (`shipyard ci fragments --dist`).
        A kind that withholds a failed package from dist/ (conda, mobile) is checked by its
        job's fragment only."""
        ...

    @property
    def is_image(self) -> bool:
        """It is an image in the docker engine, named by its reference (repo:tag) and identified by
        its image id, not a file under dist/."""
        ...

    @property
    def file_suffixes(self) -> tuple[str, ...]:
        """The endings of its files under dist/ (supply/repro.py counts them per kind)."""
        ...

    @property
    def contents_check(self) -> ContentsCheck | None:
        """What verify checks inside it (see ContentsCheck); None: its digest only."""
        ...

    @property
    def size_budget(self) -> SizeBudget | None:
        """Where its size budget comes from (see SizeBudget); None: it has none."""
        ...

    @property
    def ci_lanes(self) -> tuple[str, ...]:
        """Its CI lanes in workflow order. One: every job of the kind runs in it. Several: a job runs
        in `<kind>-<os>`, `<kind>-linux-cuda-image` or `<kind>-pure`, as its builder says (ci/jobs.py)."""
        ...

    @property
    def ci_after_lanes(self) -> tuple[str, ...]:
        """The lanes its CI jobs wait for (an image installs the wheels that those build)."""
        ...

    @property
    def ci_build_command(self) -> str:
        """The shipyard command its CI jobs build with ("": its lane module writes its own steps)."""
        ...

    @property
    def ci_timeout_minutes(self) -> int:
        """How long one of its CI jobs may run before GitHub cancels it: measured builds here times
        the runners' slower cores, with room (docs/pipeline.md)."""
        ...

    @property
    def ci_cuda_timeout_minutes(self) -> int:
        """The same for a lane that builds CUDA variants."""
        ...

    @property
    def recipe(self) -> str:
        """The file a component of this kind needs beside release.yaml, `{name}` its name
        ("recipes/{name}/recipe.yaml" for conda; "": none). shipyard writes none itself, so
        validate reports a missing one before a build meets it."""
        ...


@dataclass(frozen=True)
class KindDescription:
    """An ArtifactKind as data; see ArtifactKind for what each field means."""

    name: str
    letter: str
    noun: str
    plural: str
    installers: tuple[str, ...] = ()
    publish_targets: tuple[str, ...] = ()
    on_nightly: bool = True
    on_mobile_targets: bool = False
    pure_once: bool = False
    once_per_component: bool = False
    splits_native_core: bool = False
    host_interpreter: bool = True
    keeps_glibc_promise: bool = False
    vendors_libraries: bool = False
    records_failed_cells: bool = False
    is_image: bool = False
    file_suffixes: tuple[str, ...] = ()
    contents_check: ContentsCheck | None = None
    size_budget: SizeBudget | None = None
    ci_lanes: tuple[str, ...] = ()
    ci_after_lanes: tuple[str, ...] = ()
    ci_build_command: str = ""
    ci_timeout_minutes: int = 60
    ci_cuda_timeout_minutes: int = 60
    recipe: str = ""


def _per_os_lanes(name: str) -> tuple[str, ...]:
    return (f"{name}-linux", f"{name}-linux-cuda-image", f"{name}-windows", f"{name}-macos", f"{name}-pure")


# The build commands CI runs, built for the workflow's channel: nightly's artifacts get development
# versions of the commit's day.
_CHANNEL = "--publish-channel \"$SHIPYARD_CHANNEL\"\n"

WHEEL: Final = KindDescription(
    name="wheel", letter="w", noun="wheel", plural="wheels", installers=("pip", "uv"),
    publish_targets=("devpi", "pypi", "static", "s3"), pure_once=True, keeps_glibc_promise=True,
    vendors_libraries=True, records_failed_cells=True, file_suffixes=(".whl",), contents_check="record",
    size_budget="release",
    ci_lanes=_per_os_lanes("wheel"),
    ci_build_command="shipyard build --variant \"$VARIANT\" \"${component_args[@]}\" " + _CHANNEL,
    ci_timeout_minutes=120, ci_cuda_timeout_minutes=180)
CONDA: Final = KindDescription(
    name="conda", letter="c", noun="conda package", plural="conda packages", installers=("conda",),
    publish_targets=("conda", "s3-conda"), pure_once=True, splits_native_core=True, host_interpreter=False,
    file_suffixes=(".conda", ".tar.bz2"), contents_check="paths", ci_lanes=_per_os_lanes("conda"),
    ci_build_command="shipyard conda build --variant \"$VARIANT\" \"${component_args[@]}\" " + _CHANNEL,
    ci_timeout_minutes=120, ci_cuda_timeout_minutes=120, recipe="recipes/{name}/recipe.yaml")
MOBILE: Final = KindDescription(
    name="mobile", letter="m", noun="mobile archive", plural="mobile archives", on_mobile_targets=True,
    file_suffixes=(".tar.gz", ".aar"), contents_check="tarball-sbom", ci_lanes=("mobile",),
    ci_build_command="shipyard build-mobile " + _CHANNEL)
IMAGE: Final = KindDescription(
    name="docker", letter="d", noun="image", plural="images", installers=("docker",), publish_targets=("docker",),
    is_image=True, contents_check="labelled-sbom", size_budget="recorded", ci_lanes=("docker",),
    ci_after_lanes=("wheel-linux", "wheel-pure"))

# No installer or lane of its own: pip installs it where no wheel fits (`--no-binary :all:`), and
# `shipyard build` makes it in the wheel lanes, then builds that component's wheels from it. Not on
# nightly: beside wheels of 1.7.0.dev20261206 an sdist of 1.7.0 is the newer version, and pip would
# build it from source instead of installing the nightly's wheel.
SDIST: Final = KindDescription(
    name="sdist", letter="s", noun="source distribution", plural="source distributions",
    publish_targets=("devpi", "pypi"), on_nightly=False, pure_once=True, once_per_component=True,
    file_suffixes=(".tar.gz",),
    contents_check="source-sbom")

# Every kind, by package type; the order is the workflows' lane order and the get-started page's
# installer order. A new kind is one description above and one line here (docs/architecture.md).
KINDS: Final[dict[str, ArtifactKind]] = {
    WHEEL.name: WHEEL,
    CONDA.name: CONDA,
    MOBILE.name: MOBILE,
    IMAGE.name: IMAGE,
    # The mobile tarball's ending is `.tar.gz` too: supply/repro.py asks a file's manifest record
    # which kind it is, and goes by the ending only where one kind has it.
    SDIST.name: SDIST,
}

# What the stages assume of a package type they do not know (a hand-edited manifest may name one):
# a file under dist/, nothing checked inside it, no budget, shown as "?"; never a crash.
UNKNOWN: Final = KindDescription(name="", letter="?", noun="artifact", plural="artifacts")


def kind_of(package_type: str | None) -> ArtifactKind:
    """The kind of a manifest record's package type, or UNKNOWN. Cells of the matrix (release.yaml's
    package types, validated) look up `KINDS[cell.package_type]` directly."""
    return KINDS.get(package_type or "", UNKNOWN)


def kinds_taken_by(target_kind: str) -> tuple[str, ...]:
    """The package types a kind of publish target takes (a static tree: wheel)."""
    return tuple(kind.name for kind in KINDS.values() if target_kind in kind.publish_targets)
