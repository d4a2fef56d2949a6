"""Load and validate release.yaml and feature_status.yaml, alone and against each other.

Every problem becomes a `SpecIssue` that names the file, line, key and bad value, says
what to do, and suggests the nearest valid value for a typo. `load_spec` raises SpecError
listing them. What an issue shows of a value is decided by `errors.shown`: never a credential.
release/issues.py collects the issues and explains pydantic's; this module checks what the
models cannot see alone (the files against each other, the project folders, the tests).
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import get_args

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version
from pydantic import ValidationError

from shipyard.errors import NO_VALUE, InputError, ShipyardError, SpecError, SpecIssue, nearest
from shipyard.plumbing.confined_paths import resolves_inside
from shipyard.plumbing.input_files import read_input_bytes
from shipyard.plumbing.pinned_commits import fetch_commit
from shipyard.plumbing.pinned_sdists import fetch_sdist
from shipyard.plumbing.progress import Progress
from shipyard.release.build_routes import unbuildable
from shipyard.release.credential_variables import watch_credential_variables
from shipyard.release.cuda_archs import supported_archs
from shipyard.release.feature_markers import marker_issues
from shipyard.release.fields import PackageType, StatusVocabulary
from shipyard.release.issues import Collector, pydantic_issues
from shipyard.release.kinds import CONDA, KINDS, WHEEL
from shipyard.release.local_targets import stand_in_targets
from shipyard.release.matrix import excluded_cells, exclusion_cells, surviving_platforms
from shipyard.release.project_declaration import declared_requires_python
from shipyard.release.pytest_selection import parse_pytest_args
from shipyard.release.spec import Component, FeatureFile, Platform, Release, Spec
from shipyard.release.tag_channels import PIPELINE_FIX, PRERELEASE_FIX, is_prerelease_tag, pipeline_channels
from shipyard.release.yaml_source import YamlDocument, load_yaml
from shipyard.resources.pytest_plugin.shipyard_test_ids import (
    DefinedTest,
    defined_tests,
    param_fixtures_for,
    test_id_problem,
)

__all__ = ["BackendRequiresPython", "SpecIssue", "load_spec", "nearest"]

# The generated workflows (ci/workflow.py writes them): a repository that holds them runs the pipeline.
WORKFLOW_FILES = (".github/workflows/release.yml", ".github/workflows/nightly.yml")

# A project's folder -> the Requires-Python its build backend's metadata states (None: none stated,
# or the project's own files settle it without the backend).
BackendRequiresPython = Callable[[Path], str | None]


def _check_release(release: Release, doc: YamlDocument, root: Path, out: Collector) -> None:
    known = supported_archs()
    for name, variant in release.variants.items():
        if not variant.cuda:
            continue
        loc = ("variants", name, "arch_list")
        if variant.cuda not in known:
            out.add(doc, ("variants", name, "cuda"), "unknown CUDA version",
                    fix=f"use one shipyard knows ({', '.join(known)}) or add it to resources/cuda_archs.toml",
                    suggestion=nearest(variant.cuda, known))
            continue
        for arch in variant.archs:
            if arch.upper().endswith("+PTX"):
                out.add(doc, loc, f"write {arch[:-4]}: PTX is implicit, shipyard embeds it for the highest arch "
                        "of every CUDA variant (library/README.md)", value=arch)
            elif arch not in known[variant.cuda]:
                valid = known[variant.cuda]
                out.add(doc, loc, f"arch {arch} is not supported by CUDA {variant.cuda} "
                        f"(supported: {valid[0]} to {valid[-1]}); remove it or change the CUDA version",
                        value=arch)
        if len(set(variant.archs)) != len(variant.archs):
            out.add(doc, loc, "an arch appears twice; list each once")
    tags: dict[str, str] = {}
    for name, variant in release.variants.items():
        if variant.tag in tags:
            out.add(doc, ("variants", name, "tag"),
                    f"tag is already used by variant {tags[variant.tag]!r}; tags must be unique")
        tags[variant.tag] = name
    if len(set(release.pythons)) != len(release.pythons):
        out.add(doc, ("pythons",), "a Python version appears twice; list each once")
    for name, component in release.components.items():
        project = component.source_dir(root)
        if not _is_dir(project):
            if component.path is not None:  # else _fetch_sources said why
                out.add(doc, ("components", name, "path"), f"folder does not exist: {project}",
                        fix="give the component's project folder, absolute or relative to release.yaml")
        elif component.tests:
            tests = component.tests_folder(root)
            # Where it really is: inside the release, or inside the component's own (real) folder, which
            # may itself be a symlink to a checkout; never elsewhere through a symlink (tests -> /etc).
            if Path(component.tests).is_absolute() or not (resolves_inside(tests, root)
                                                           or resolves_inside(tests, project)):
                out.add(doc, ("components", name, "tests"),
                        "the tests folder lies outside the release and outside the project (a symlink counts "
                        "where it leads)",
                        fix="give a folder relative to the project's folder, inside the project or inside the "
                            "release (e.g. ../tests-of-x)")
            elif not _is_dir(tests):
                # The build copies this folder beside the installed wheel: a missing one stops it there.
                out.add(doc, ("components", name, "tests"), f"the tests folder does not exist: {tests}",
                        fix="create it, or give the folder that holds the component's tests, relative to the "
                            "project's folder")
        if component.limited_api and (problem := limited_api_problem(component.limited_api, release.pythons)):
            out.add(doc, ("components", name, "limited_api"), problem)
        if any(KINDS[t].on_mobile_targets for t in component.package_types) and not release.mobile_targets:
            out.add(doc, ("components", name, "package_types"),
                    "package type 'mobile' needs mobile_targets; add a mobile_targets section")
        for package_type in component.package_types:
            recipe = KINDS[package_type].recipe.format(name=name)
            if recipe and not (root / recipe).is_file():
                out.add(doc, ("components", name, "package_types"),
                        f"package type {package_type!r} needs {recipe}, which does not exist (shipyard writes "
                        f"none)", fix=f"write {recipe} (recipes/README.md says how), or drop {package_type!r} "
                        f"from package_types", value=package_type)
        if CONDA.name in component.package_types and release.conda is None:
            out.add(doc, ("components", name, "package_types"),
                    "package type 'conda' needs the channels its dependencies come from; add a top-level "
                    "section `conda: {channels: [conda-forge]}`")
    for name, target in release.mobile_targets.items():
        if target.stands_in_for and target.stands_in_for not in release.mobile_targets:
            out.add(doc, ("mobile_targets", name, "stands_in_for"), "names no mobile target",
                    fix=f"use one of {', '.join(release.mobile_targets)}",
                    suggestion=nearest(target.stands_in_for, release.mobile_targets))
    for name, publish_target in release.publish.items():
        default = publish_target.default_variant
        if default and default not in release.variants:
            out.add(doc, ("publish", name, "default_variant"), "names no variant",
                    fix=f"use one of {', '.join(release.variants)}", value=NO_VALUE,
                    suggestion=nearest(default, release.variants))
        for number, channel in enumerate(publish_target.channels):
            if channel not in release.channels:
                out.add(doc, ("publish", name, "channels", number), "names no channel",
                        fix=f"use one of {', '.join(release.channels) or 'the channels under channels:'}",
                        value=NO_VALUE, suggestion=nearest(channel, release.channels))
    if release.publish and not release.channels:
        out.add(doc, ("channels",), "publish targets need the channels they publish to", fix=PIPELINE_FIX,
                value=NO_VALUE)
    _check_pipeline_channels(release, doc, root, out)
    for name, platform in release.platforms.items():
        problem = _platform_tag_problem(platform)
        if problem:
            out.add(doc, ("platforms", name, "wheel_platform_tag"), problem)
        elif refused := unbuildable(platform):
            # Refused here, not as a doctor row or a CI job that fails after its set-up.
            out.add(doc, ("platforms", name, refused.key), refused.reason, fix=refused.needed,
                    value=getattr(platform, refused.key))
    _check_signing_key_file(release, doc, root, out)
    _check_exclusions(release, doc, out)
    _check_images(release, doc, out)
    _check_pytest_args(release, doc, root, out)


def limited_api_problem(floor: str, pythons: tuple[str, ...]) -> str | None:
    """Why the limited-API floor `floor` does not fit the release's `pythons`, or None: its one
    abi3 wheel is built with the lowest of them, which must offer that limited API."""
    lowest = min(pythons, key=lambda p: tuple(int(n) for n in p.split(".")))
    if tuple(int(n) for n in floor.split(".")) <= tuple(int(n) for n in lowest.split(".")):
        return None
    return (f"is above the release's lowest Python ({lowest}), whose build could not offer that limited API; "
            f"set limited_api: \"{lowest}\" or lower, or drop Python {lowest} from pythons")


def _check_pipeline_channels(release: Release, doc: YamlDocument, root: Path, out: Collector) -> None:
    """The channels `shipyard ci generate` and its workflows need: a nightly channel and one that holds
    releases, when release.yaml declares channels or the repository holds the generated workflows; and
    a channel for a pre-release tag when release.version or a component's own version is a
    pre-release (every tag of it is one)."""
    channels = list(release.channels)
    workflows = [name for name in WORKFLOW_FILES if (root / name).is_file()]
    if pipeline_channels(channels) is None and (channels or workflows):
        why = (f"{' and '.join(workflows)} {'is' if len(workflows) == 1 else 'are'} generated from them"
               if workflows and not channels else f"{', '.join(channels)} alone")
        out.add(doc, ("channels",), f"the release pipeline needs a nightly channel and one that holds releases "
                f"({why}): `shipyard ci generate` stops here", fix=PIPELINE_FIX, value=NO_VALUE)
        return
    pipeline = pipeline_channels(channels)
    if pipeline is None or pipeline.prerelease is not None:
        return
    # A component's own version is tagged too (<component>-v<version>, release/release_tags.py).
    versions: dict[tuple[str, ...], str] = {("release", "version"): release.release.version}
    versions |= {("components", name, "version"): c.version for name, c in release.components.items() if c.version}
    for path, version in versions.items():
        if is_prerelease_tag("", version):
            out.add(doc, path, f"is a pre-release, and its tags may not reach {pipeline.final}, "
                    f"the channel that holds releases (channels: {', '.join(channels)})", fix=PRERELEASE_FIX)


def pipeline_notes(release: Release) -> list[str]:
    """What validate says of the pipeline that is not an error yet: no channels (ci generate would
    stop), or no channel for a pre-release tag (its release run would stop)."""
    pipeline = pipeline_channels(list(release.channels))
    if pipeline is None:
        return [f"no channels: `shipyard ci generate` needs a nightly channel and one that holds releases; "
                f"{PIPELINE_FIX} before generating workflows"]
    if pipeline.prerelease is None:
        return [f"a pre-release tag (v{release.release.version}-rc1) has no channel to go to: "
                f"{pipeline.final} holds releases, so its release run stops in the plan job; {PRERELEASE_FIX}"]
    return []


# A wheel platform tag's OS and architecture: manylinux_2_31_x86_64, musllinux_1_2_aarch64,
# manylinux2014_x86_64, linux_armv7l, win_amd64, win32, macosx_11_0_arm64 (universal2: both Macs).
_TAG_FORMS = (
    (re.compile(r"(?:manylinux|musllinux)_\d+_\d+_(\w+)|manylinux(?:1|2010|2014)_(\w+)|linux_(\w+)"), "linux"),
    (re.compile(r"win_(\w+)|(win32)"), "windows"),
    (re.compile(r"macosx_\d+_\d+_(\w+)"), "macos"),
)
# Names of one architecture: PEP 425 tags say x86_64/aarch64 on Linux, amd64/arm64 on Windows.
_ARCH_NAMES = {"x86_64": "x86_64", "amd64": "x86_64", "x64": "x86_64", "aarch64": "arm64", "arm64": "arm64",
               "i686": "x86", "i386": "x86", "x86": "x86", "win32": "x86", "armv7l": "armv7", "armv7": "armv7"}


def _platform_tag_problem(platform: Platform) -> str | None:
    """What makes the platform's wheel tag disagree with its os and arch ("message; fix"), or None."""
    found = next(((match, os_name) for form, os_name in _TAG_FORMS
                  if (match := form.fullmatch(platform.wheel_platform_tag))), None)
    if found is None:
        return "not a wheel platform tag; write one like manylinux_2_31_x86_64, win_amd64 or macosx_11_0_arm64"
    match, os_name = found
    tag_arch = next(group for group in match.groups() if group)
    if os_name != platform.os:
        return f"is a {os_name} tag, but the platform's os is {platform.os}; make the tag and the os agree"
    wanted = _ARCH_NAMES.get(platform.arch.lower(), platform.arch.lower())
    archs = {"x86_64", "arm64"} if tag_arch in ("universal2", "universal") else {_ARCH_NAMES.get(tag_arch, tag_arch)}
    if wanted not in archs:
        return (f"is a tag for {tag_arch}, but the platform's arch is {platform.arch}; make the tag and the arch "
                f"agree")
    return None


def _check_signing_key_file(release: Release, doc: YamlDocument, root: Path, out: Collector) -> None:
    """The provenance key file lies in the repository or the user's home: `shipyard keygen` writes
    there and every build reads it, so a path such as /etc/shadow is a mistake either way."""
    settings = release.supply_chain
    if settings is None or not settings.signing_key_file:
        return
    try:
        path = (root / settings.signing_key_file).resolve()
        inside = path.is_relative_to(root.resolve()) or path.is_relative_to(Path.home().resolve())
    except (OSError, RuntimeError, ValueError):  # a NUL byte, a symlink loop: not a usable place either
        inside = False
    if not inside:
        out.add(doc, ("supply_chain", "signing_key_file"), "the key file lies outside the repository and your home",
                fix="keep it in the repository (relative to release.yaml, e.g. .shipyard/keys/provenance-ed25519.pem, "
                    "git-ignored) or under your home, or use signing_key_env")


def _check_images(release: Release, doc: YamlDocument, out: Collector) -> None:
    """The images section names variants, components and a platform of this release."""
    images = release.images
    if images is None:
        return
    if images.python not in release.pythons:
        out.add(doc, ("images", "python"), "the images' Python is not one of the release's pythons",
                fix=f"pick one of {', '.join(release.pythons)}")
    platform = release.platforms.get(images.platform)
    if platform is None:
        out.add(doc, ("images", "platform"), "names no platform of the release",
                fix=f"use one of {', '.join(release.platforms)}",
                suggestion=nearest(images.platform, release.platforms))
    elif platform.os != "linux":
        out.add(doc, ("images", "platform"), "images are Linux containers; name a linux platform")
    for i, name in enumerate(images.components):
        component = release.components.get(name)
        if component is None:
            out.add(doc, ("images", "components", i), "names no component",
                    fix=f"use one of {', '.join(release.components)}", suggestion=nearest(name, release.components))
        elif not component.is_python or WHEEL.name not in component.package_types:
            out.add(doc, ("images", "components", i),
                    "images install wheels by name; this component builds no wheel")
    for name, entry in images.variants.items():
        if name not in release.variants:
            out.add(doc, ("images", "variants", name), "names no variant of the release",
                    fix=f"use one of {', '.join(release.variants)}", suggestion=nearest(name, release.variants),
                    value=name)
        elif entry.devel_budget_mb < entry.runtime_budget_mb:
            out.add(doc, ("images", "variants", name, "devel_budget_mb"),
                    "the devel image holds the runtime image and more, so its budget cannot be smaller; "
                    f"raise it to at least {entry.runtime_budget_mb:g}")


def _check_pytest_args(release: Release, doc: YamlDocument, root: Path, out: Collector) -> None:
    """pytest_args only leave tests out (pytest_selection): nothing that changes the verdict; and
    each path they name exists in the tests folder, where the tests run (a path that names nothing
    would leave nothing out, silently)."""
    for name, component in release.components.items():
        if not component.pytest_args:
            continue
        loc = ("components", name, "pytest_args")
        if not component.tests:
            out.add(doc, loc, "leaves out tests of a component that declares none",
                    fix="set tests: to the component's tests folder, or remove pytest_args")
        selection, issues = parse_pytest_args(component.pytest_args)
        for issue in issues:
            out.add(doc, (*loc, issue.index), issue.message, fix=issue.fix)
        if issues or not component.tests or not _is_dir(tests := component.tests_folder(root)):
            continue  # the tests folder's own problem is reported under tests:
        for named in selection.paths:
            file_part = named.path.split("::", 1)[0].rstrip("/")
            if (tests / file_part).exists():
                continue
            # Written from the project's root or the release's (as pytest users write it): say how
            # the tests folder sees it.
            seen_from = next((relative for base in (component.source_dir(root), root)
                              if (base / file_part).exists() and resolves_inside(base / file_part, tests)
                              and (relative := os.path.relpath((base / file_part).resolve(), tests.resolve()))),
                             None)
            fix = (f"write it relative to the tests folder: {named.option}={seen_from}"
                   + (f"::{named.path.split('::', 1)[1]}" if "::" in named.path else "") if seen_from
                   else f"name a file or folder in {os.path.relpath(tests, root.resolve())}, relative to it, "
                        f"or remove it")
            out.add(doc, (*loc, named.index), f"{named.option} names nothing in the tests folder (its paths are "
                    f"relative to {component.tests!r}, where the tests run)", fix=fix, value=named.path)


def _source_key(component: Component) -> tuple[str, ...]:
    """Where release.yaml says where a component's sources are."""
    return ("components", component.name, "sdist" if component.sdist else "git" if component.git else "path")


def _source_value(component: Component) -> str:
    return component.sdist.url if component.sdist else component.git.url if component.git else str(component.path)


def _fetch_sources(release: Release, doc: YamlDocument, root: Path, out: Collector, progress: Progress) -> None:
    """Fetch (once: shipyard's cache keeps them) the sdists and git commits components are pinned to;
    a fetch that fails, an sdist that does not match its sha256, a commit the repository does not
    hold or a subdirectory its tree lacks is an issue of its component."""
    for name, component in release.components.items():
        try:
            if component.sdist is not None:
                fetch_sdist(component.sdist.url, component.sdist.sha256, base=root, progress=progress)
            elif component.git is not None:
                pinned = component.git
                fetch_commit(pinned.url, pinned.commit, base=root, progress=progress)
                if pinned.subdirectory and not _is_dir(pinned.folder()):
                    out.add(doc, ("components", name, "git", "subdirectory"),
                            f"{pinned.url} at {pinned.commit[:12]} has no folder {pinned.subdirectory}",
                            fix="give the project's folder relative to the repository's top",
                            value=pinned.subdirectory)
        except ValueError as exc:
            out.add(doc, _source_key(component), str(exc), value=_source_value(component))


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):  # a NUL byte or an over-long name is not a folder either
        return False


def _check_exclusions(release: Release, doc: YamlDocument, out: Collector) -> None:
    names = {
        "component": list(release.components),
        "variant": list(release.variants),
        "platform": list(release.platforms) + list(release.mobile_targets),
        "python": list(release.pythons),
        "package_type": list(get_args(PackageType)),  # release.yaml's order, as its own errors list them
    }
    typo = False
    for i, exclusion in enumerate(release.exclusions):
        for key, patterns in exclusion.selectors().items():
            for pattern in patterns:
                if not any(fnmatch.fnmatchcase(n, pattern) for n in names[key]):
                    typo = True
                    out.add(doc, ("exclusions", i, key), f"matches no {key.replace('_', ' ')}",
                            fix=f"use one of {', '.join(names[key])}, or a glob over them", value=pattern,
                            suggestion=nearest(pattern, names[key]))
    if typo:
        return
    matched = exclusion_cells(release)
    kept = set(range(len(matched)))
    # Later exclusions are checked first, so of two identical ones the second is reported; an
    # exclusion is dead when the others still kept remove every cell it removes.
    for i in reversed(range(len(matched))):
        if not matched[i]:
            out.add(doc, ("exclusions", i), "this exclusion matches no cell of the matrix; "
                    "remove it or fix its selectors", value=None)
            kept.discard(i)
            continue
        others = [j for j in sorted(kept) if j != i and matched[j] & matched[i]]
        if matched[i] <= set().union(*(matched[j] for j in others)):
            names_of = " and ".join(f"exclusions.{j} ({release.exclusions[j].reason})" for j in others)
            out.add(doc, ("exclusions", i), f"every cell this exclusion removes is already removed by "
                    f"{names_of}", fix=f"remove it, or narrow the {'others' if len(others) > 1 else 'other'}",
                    value=None)
            kept.discard(i)


def _check_features(release: Release, features: FeatureFile, doc: YamlDocument,
                    root: Path, out: Collector) -> list[str]:
    platforms = list(release.platforms) + list(release.mobile_targets)
    vocabulary = _check_vocabulary(features, doc, out)
    seen: dict[str, int] = {}
    pending: list[str] = []
    version = Version(release.release.version)
    built_on = surviving_platforms(release)  # one pass over the matrix for every status below
    for i, feature in enumerate(features.features):
        if feature.id in seen:
            out.add(doc, ("features", i, "id"),
                    f"duplicate feature id (first defined as features[{seen[feature.id]}]); "
                    f"give each feature its own id")
        seen.setdefault(feature.id, i)
        if feature.component not in release.components:
            out.add(doc, ("features", i, "component"), "names no component of release.yaml",
                    fix=f"use one of {', '.join(release.components)}",
                    suggestion=nearest(feature.component, release.components))
        # Measured against its component's own version (mesonext 0.9.1), else the family's.
        ships = (Version(release.component_version(feature.component)) if feature.component in release.components
                 else version)
        if Version(feature.since) > ships:
            whose = "" if ships == version else f" of {feature.component}"
            out.add(doc, ("features", i, "since"), f"is later than the release{whose} ({ships}) that ships it",
                    fix=f"set since: {ships} or earlier, or leave the feature out of this release")
        for platform, status in feature.status.items():
            if status not in vocabulary.names:
                out.add(doc, ("features", i, "status", platform), f"must be one of {', '.join(vocabulary.names)}",
                        value=status, suggestion=nearest(status, vocabulary.names),
                        fix="use a status of the file's vocabulary" if features.vocabulary else
                        "use one of them, or declare the file's own under vocabulary:")
            elif platform != "*" and platform not in platforms:
                out.add(doc, ("features", i, "status", platform),
                        "names no platform or mobile target of release.yaml", value=platform,
                        fix=f"use one of {', '.join(platforms)}", suggestion=nearest(platform, platforms))
            elif platform != "*" and status != vocabulary.least and feature.component in release.components:
                unbuilt = _not_built_there(release, feature.component, platform, built_on)
                if unbuilt:
                    out.add(doc, ("features", i, "status", platform),
                            f"{status} on {platform}, where {feature.component} {unbuilt}",
                            fix="remove this platform's status, or the exclusion, so that what is promised is built")
        blocking = sorted({status for status in feature.status.values() if vocabulary.blocks(status)})
        owner = release.components.get(feature.component)
        id_root = owner.test_id_root(root) if owner else root
        for j, test_id in enumerate(feature.tests):
            state = _test_state(id_root, test_id)
            if state == "pending" and blocking:
                # A pending id would pass validate and then fail the cell after its build.
                lesser = [n for n in vocabulary.names if not vocabulary.blocks(n)]
                out.add(doc, ("features", i, "tests", j), f"the test file does not exist, and a {blocking[0]} "
                        f"feature's tests must exist now (a pending test is allowed for "
                        f"{' or '.join(lesser) or 'a status that does not block'})",
                        fix=f"write {test_id.split('::', 1)[0]}, fix the id, or give the feature the status "
                            f"{lesser[0] if lesser else 'of one that does not block'} until it exists", value=test_id)
            elif state == "pending":
                pending.append(test_id)
            elif state != "ok":
                out.add(doc, ("features", i, "tests", j), state, value=test_id)
    return pending


def _check_vocabulary(features: FeatureFile, doc: YamlDocument, out: Collector) -> StatusVocabulary:
    """The file's status vocabulary, each name once."""
    seen: set[str] = set()
    for i, status in enumerate(features.vocabulary or ()):
        if status.name in seen:
            out.add(doc, ("vocabulary", i, "name"), "the status is declared twice; declare each once",
                    value=status.name)
        seen.add(status.name)
    return features.statuses


def _not_built_there(release: Release, component: str, platform: str, built_on: dict[str, set[str]]) -> str | None:
    """Why no cell of `component` is built on `platform` (e.g. 'is excluded (exclusions.2: …)'), or None;
    `built_on` is surviving_platforms(release)."""
    if platform in built_on.get(component, set()):
        return None
    removed = [(cell, exclusion) for cell, exclusion in excluded_cells(release)
               if cell.component == component and cell.platform == platform]
    if removed:
        number = release.exclusions.index(removed[0][1])
        return f"is excluded (exclusions.{number}: {removed[0][1].reason})"
    return "builds nothing"


def _test_state(root: Path, test_id: str) -> str:
    """'ok', 'pending' (the file does not exist yet) or an error message (with its fix). The id
    means what it means at run time (shipyard_test_ids): `file::test[case]` is that one case."""
    file_part, _, rest = test_id.partition("::")
    if Path(file_part).is_absolute() or ".." in Path(file_part).parts or "\0" in test_id:
        return "not a test id; write a pytest node id relative to the repository, e.g. tests/test_x.py::test_y"
    path = root / file_part
    if not path.exists():
        return "pending"
    if not rest:
        return "ok"
    defined = _defined_tests(root.resolve(), file_part, _read_files(root, file_part))
    if defined is None:
        return f"{file_part} cannot be read as Python; fix the file or the test id"
    return test_id_problem(test_id, list(defined)) or "ok"


def _read_files(root: Path, file_part: str) -> tuple[tuple[object, ...], ...]:
    """What _defined_tests reads, by stat: the test file and the conftest.py files above it."""
    path = root / file_part
    keys: list[tuple[object, ...]] = []
    for read in [path, *(f / "conftest.py" for f in path.parents if f == root or root in f.parents)]:
        try:
            stat = read.stat()
        except OSError:
            keys.append((str(read),))
            continue
        keys.append((str(read), stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns))
    return tuple(keys)


# Every command loads the release description, which checks each test id of feature_status.yaml
# against its file: parse each file once per process, again when it or a conftest.py changes.
@functools.lru_cache(maxsize=1024)
def _defined_tests(root: Path, file_part: str, _read: tuple[tuple[object, ...], ...]) -> tuple[DefinedTest, ...] | None:
    try:
        tree = ast.parse(read_input_bytes(root / file_part, limit="test file", missing_fix=""))
    except (SyntaxError, ValueError, InputError):
        return None
    return tuple(defined_tests(tree, file_part, param_fixtures_for(root, file_part)))


def _with_requires_python(release: Release, doc: YamlDocument, root: Path, out: Collector,
                          backend_reader: BackendRequiresPython | None) -> Release:
    """The release with each Python component's requires-python filled in from its project where
    release.yaml does not give it; a release.yaml value that contradicts the project is an issue."""
    components = {}
    for name, component in release.components.items():
        try:
            declared = declared_requires_python(component.source_dir(root)) if component.is_python else None
        except ShipyardError as exc:
            out.add(doc, _source_key(component), str(exc), value=_source_value(component))
            components[name] = component
            continue
        if declared and component.requires_python and not _same_specifiers(declared[0], component.requires_python):
            out.add(doc, ("components", name, "requires_python"),
                    f"disagrees with the project's {declared[1]} ({declared[0]!r})",
                    fix="remove it (the project's own declaration is read) or make the two agree")
        if declared and not component.requires_python:
            component = component.model_copy(update={"requires_python": declared[0]})
        elif not declared and not component.requires_python and component.is_python:
            component = _with_metadata_requires_python(component, root, doc, out, backend_reader)
        components[name] = component
    return release.model_copy(update={"components": components})


def _same_specifiers(project: str, release: str) -> bool:
    """Whether two requires-python values say the same (">= 3.11" is ">=3.11"); a project value that
    is no specifier at all never agrees."""
    try:
        return SpecifierSet(project) == SpecifierSet(release)
    except InvalidSpecifier:
        return False


def _with_metadata_requires_python(component: Component, root: Path, doc: YamlDocument, out: Collector,
                                   backend_reader: BackendRequiresPython | None) -> Component:
    """The component with the Requires-Python its backend's metadata states (a setup.py-only
    project computes it), when the caller handed in the reader that asks the backend."""
    if backend_reader is None:
        return component
    try:
        found = backend_reader(component.source_dir(root))
    except ShipyardError as exc:
        out.add(doc, _source_key(component), f"{exc}; fix the project, or state "
                f"requires_python under components.{component.name} so that the hook is not needed",
                value=_source_value(component))
        return component
    return component.model_copy(update={"requires_python": found}) if found else component


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def load_spec(root: Path, release_file: str = "release.yaml", feature_file: str = "feature_status.yaml", *,
              backend_reader: BackendRequiresPython | None = None, progress: Progress | None = None,
              targets_file: Path | None = None) -> Spec:
    """Validate both files under `root`; raise SpecError listing every issue found.

    `backend_reader` asks a project's build backend for the Requires-Python its own files do not
    settle (a setup.py-only project computes it); without it such a component keeps what
    release.yaml says. It needs a build frontend, a floor above this one, so the caller hands it
    in: the CLI passes `wheel/project_metadata.backend_requires_python` (cli/shared.load_release).
    A component pinned to an sdist or a git commit is fetched here, once, saying so on `progress`
    (default: stderr). `targets_file`: a local targets file whose stand-ins take the place of
    release.yaml's publish targets (release/local_targets.py)."""
    out = Collector()
    docs: list[YamlDocument | None] = []
    for name in (release_file, feature_file):
        try:
            docs.append(load_yaml(root / name))
        except SpecError as exc:
            out.issues.extend(exc.issues)
            docs.append(None)
    release_doc, feature_doc = docs
    if release_doc is not None:
        out.issues.extend(watch_credential_variables(release_doc))
    if release_doc is not None and targets_file is not None:
        stand_ins = stand_in_targets(targets_file, release_doc, out)
        if stand_ins is not None:
            release_doc.data["publish"] = stand_ins
    release = features = None
    if release_doc is not None:
        try:
            release = Release.model_validate(release_doc.data)
        except ValidationError as exc:
            pydantic_issues(exc, Release, release_doc, out)
    if feature_doc is not None:
        try:
            features = FeatureFile.model_validate(feature_doc.data)
        except ValidationError as exc:
            pydantic_issues(exc, FeatureFile, feature_doc, out)
    pending: list[str] = []
    if release is not None and release_doc is not None:
        _fetch_sources(release, release_doc, root, out, progress or _say)
        _check_release(release, release_doc, root, out)
        if features is not None and feature_doc is not None:
            pending = _check_features(release, features, feature_doc, root, out)
            if not out.issues:
                out.issues.extend(marker_issues(release, features, feature_doc, root))
    if release is not None and release_doc is not None and not out.issues:
        release = _with_requires_python(release, release_doc, root, out, backend_reader)
    if out.issues:
        raise SpecError(out.issues)
    assert release is not None and features is not None
    return Spec(root=root.resolve(), release=release, features=features, pending_tests=tuple(pending))
