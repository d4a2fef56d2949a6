"""Steps that several jobs of the workflows share: checkout, shipyard on the runner or in the
builder container, the Pythons and build cache of a job, fragments, and the build step that
records its exit status so that a failing stable feature still uploads its fragment.

Every `run:` script reads matrix values and contexts from `env:` (never `${{ }}` inside the
script: a value cannot become shell code).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence
from typing import Any

from packaging.requirements import Requirement

import shipyard
from shipyard.ci.actions import uses
from shipyard.errors import STABLE_FEATURE_FAILED, SpecError, ToolError
from shipyard.host.apt_install import lane_packages
from shipyard.release.spec import Release, Spec

Step = dict[str, Any]
Job = dict[str, Any]

MATRIX_ENV = {"VARIANT": "${{ matrix.variant }}", "COMPONENTS": "${{ matrix.components }}"}  # space-separated

BUILD_STEP_ID = "build"


# uv's cache while a job installs shipyard: beside the venv, on its file system. uv hardlinks what
# it unpacked into the venv only when both are on one file system. A container job's workspace is a
# mount (GitHub's /__w, act's volume) and the home folder is not: with uv's default cache every file
# was unpacked and then copied, about 3 s more CPU per job (measured under `shipyard ci run`).
INSTALL_ENV = {"UV_CACHE_DIR": ".venv/uv-cache"}


# zlib level of the uploads that carry a release (fragments, release-dist): wheels and conda packages
# are compressed already, and a docker lane's image tar (618 MB for ember's cpu images) deflates at
# level 1 to 246 MB in 6.9 s of CPU, at the action's default 6 to 224 MB in 20.8 s.
RELEASE_ARTIFACT_COMPRESSION = 1


# Every upload a re-run of its job makes again: a re-run of a failed job uploads under the same
# name, which upload-artifact v4 refuses (409 Conflict) unless it may replace the earlier one.
RERUN_UPLOAD: dict[str, Any] = {"overwrite": True}


def checkout() -> Step:
    return {"name": "Check out", "uses": uses("actions/checkout"), "with": {"persist-credentials": False}}


def uv_requirement() -> str:
    """The uv version range shipyard depends on (pyproject.toml), so runners get the uv that runs here."""
    for line in importlib.metadata.requires("shipyard") or ():
        requirement = Requirement(line)
        if requirement.name == "uv" and not requirement.marker:
            return f"uv{requirement.specifier}"
    raise ToolError("shipyard's installed metadata lists no uv requirement; reinstall shipyard "
                    "(uv pip install shipyard, or -e . in its checkout)")


def shipyard_requirement() -> str:
    """What every job installs: the shipyard that generated the workflow, by exact version."""
    return f"shipyard=={shipyard.__version__}"


# Where a job gets shipyard: PyPI by default. Two repository variables (Settings → Variables) point
# elsewhere without regenerating: an index searched before PyPI (a private index, or a local one for
# `shipyard ci run`), or the URL of the wheel itself, which must be this version's.
SHIPYARD_SOURCE_ENV = {"SHIPYARD_REQUIREMENT": "", "SHIPYARD_INDEX_URL": "${{ vars.SHIPYARD_INDEX_URL }}",
                       "SHIPYARD_WHEEL_URL": "${{ vars.SHIPYARD_WHEEL_URL }}"}

# Sets the bash arrays `shipyard_from` (what to install) and `shipyard_index` (uv's --index, when
# given) from SHIPYARD_SOURCE_ENV. uv asks the given index first and PyPI for what it lacks
# (shipyard's own dependencies); a wheel URL comes with the exact requirement, which uv holds the
# wheel to (a wheel of another version fails the install). No single quote: the CUDA lane runs it
# inside `bash -c '…'`.
SHIPYARD_SOURCE = (
    "shipyard_from=(\"$SHIPYARD_REQUIREMENT\"); shipyard_index=()\n"
    "[ -z \"$SHIPYARD_WHEEL_URL\" ] || shipyard_from+=(\"shipyard @ $SHIPYARD_WHEEL_URL\")\n"
    "[ -z \"$SHIPYARD_INDEX_URL\" ] || shipyard_index=(--index \"$SHIPYARD_INDEX_URL\")\n"
)
SHIPYARD_SOURCE_ARGS = "\"${shipyard_index[@]}\" \"${shipyard_from[@]}\""  # uv pip install's, after SHIPYARD_SOURCE


def shipyard_source_env() -> dict[str, str]:
    return {**SHIPYARD_SOURCE_ENV, "SHIPYARD_REQUIREMENT": shipyard_requirement()}


def tools_python(release: Release) -> str:
    """The Python shipyard itself runs on: the newest of the release's (shipyard needs 3.11+)."""
    return release.pythons[-1]


def host_tools(spec: Spec, also: Sequence[str] = ()) -> list[Step]:
    """shipyard in .venv on a runner (not in a container), on PATH for the later steps; `also`:
    Pythons the job needs beside it (setup-python sets up each; the last listed, shipyard's, is
    the default `python`)."""
    versions = [*dict.fromkeys(v for v in also if v != tools_python(spec.release)), tools_python(spec.release)]
    for_job = f" (and {', '.join(versions[:-1])} for the job)" if len(versions) > 1 else ""
    return [
        {"name": "Python for shipyard" + for_job,
         "uses": uses("actions/setup-python"),
         "with": {"python-version": "\n".join(versions) + ("\n" if len(versions) > 1 else "")}},
        {"name": f"Install {shipyard_requirement()}",
         "env": {"UV_REQUIREMENT": uv_requirement(), **shipyard_source_env(), **INSTALL_ENV},
         # a venv of its own: the runner's tool-cache Python stays as setup-python left it. No pip
         # in it (ensurepip costs each job seconds): that Python's pip puts uv in (--python takes the
         # venv folder: Scripts/python.exe on Windows), uv the rest.
         "run": "python -m venv --without-pip .venv\n"
                "bin=.venv/bin; [ \"$RUNNER_OS\" = Windows ] && bin=.venv/Scripts\n"
                "python -m pip --python .venv install --quiet --disable-pip-version-check "
                "\"$UV_REQUIREMENT\"\n"
                + SHIPYARD_SOURCE +
                f"\"$bin/python\" -m uv pip install --python \"$bin/python\" {SHIPYARD_SOURCE_ARGS}\n"
                "\"$bin/python\" -c 'import os, sys; print(os.path.dirname(os.path.abspath(sys.executable)))' "
                ">> \"$GITHUB_PATH\"\n"},
    ]


def bootstrap_set(name: str) -> str:
    """`name`, checked to be a lane with an apt package set (resources/ci_lane_packages.toml)."""
    if name not in lane_packages():
        raise SpecError(f"shipyard/resources/ci_lane_packages.toml: lanes: no apt package set for lane {name}; "
                        f"add the line {name} = [<its apt packages>] there (got lane {name})")
    return name


PYTHONS_ENV = {"PYTHONS": "${{ matrix.pythons }}"}  # the job's Pythons, space-separated

# A build step's `--component` per component of the job ($COMPONENTS: one, or a pure job's every
# pure component), read by the build command as "${component_args[@]}", and `--python` per Python:
# the plan narrows matrix.pythons (a dispatched run's `python` input), and without them `shipyard
# build` builds every Python of the release.
JOB_ARGS = ("read -r -a components <<< \"$COMPONENTS\"\n"
            "component_args=(); for component in \"${components[@]}\"; do "
            "component_args+=(--component \"$component\"); done\n"
            "read -r -a pythons <<< \"$PYTHONS\"\n"
            "python_args=(); for python in \"${pythons[@]}\"; do python_args+=(--python \"$python\"); done\n")


def for_job(command: str) -> str:
    """`command` (its last line the build, naming "${component_args[@]}") given `--python` per
    Python of $PYTHONS."""
    return JOB_ARGS + command.rstrip() + " \"${python_args[@]}\"\n"


def job_pythons() -> Step:
    return {"name": "Pythons of the job", "env": PYTHONS_ENV,
            "run": "read -r -a pythons <<< \"$PYTHONS\"  # one argument per Python\n"
                   "shipyard ci pythons \"${pythons[@]}\"\n"}


def build_cache() -> list[Step]:
    return [
        {"name": "Cache key (shipyard's own, from the job's sources and release.yaml)", "id": "cache-key",
         "env": {"JOB_ID": "${{ matrix.id }}"},
         # The key first, on a line of its own: inside echo's argument its failure would be lost.
         "run": "key=$(shipyard ci cache-key \"$JOB_ID\")\necho \"key=$key\" >> \"$GITHUB_OUTPUT\"\n"},
        {"name": "Build cache", "uses": uses("actions/cache"),
         "with": {"path": ".shipyard/cache", "key": "${{ steps.cache-key.outputs.key }}",
                  "restore-keys": "${{ matrix.id }}-"}},
    ]


def pythons_and_cache() -> list[Step]:
    return [job_pythons(), *build_cache()]


def download_fragments(pattern: str, name: str, when: str | None = None) -> list[Step]:
    """Fragments of earlier jobs this job builds on, merged into dist/ as the one manifest; only
    `when` (an expression) holds, if given."""
    condition = {"if": when} if when else {}
    return [
        {"name": f"Download {name}", **condition, "uses": uses("actions/download-artifact"),
         "with": {"pattern": pattern, "path": "fragments"}},
        {"name": f"Merge {name} into dist/", **condition, "run": "shipyard manifest merge --dist dist fragments/*\n"},
    ]


def upload_fragment() -> Step:
    return {"name": "Upload artifacts and manifest fragment", "uses": uses("actions/upload-artifact"),
            "with": {"name": "fragment-${{ matrix.id }}", "path": "dist/", "if-no-files-found": "error",
                     "retention-days": 14, "compression-level": RELEASE_ARTIFACT_COMPRESSION,
                     **RERUN_UPLOAD}}


def signing_env(spec: Spec) -> dict[str, str]:
    """The env of a step that builds: the provenance key from the secret named like release.yaml's
    supply_chain.signing_key_env. Only the building steps see it. Where the secret is not set,
    GitHub gives an empty value and the build says `unsigned`."""
    chain = spec.release.supply_chain
    name = chain.signing_key_env if chain else None
    return {name: f"${{{{ secrets.{name} }}}}"} if name else {}


def build_upload_and_judge(name: str, env: dict[str, str], command: str) -> list[Step]:
    """The build step, the fragment upload, and the job's verdict, in that order.

    A failing stable feature (errors.STABLE_FEATURE_FAILED, the status `shipyard build` and `shipyard
    conda build` give it) must not stop the upload: the fragment's manifest records the failure,
    the manifest job merges it, the report names it and the publish job's gate decides per
    channel. So the build step records its status as an output and succeeds for that status; the
    upload runs; the last step fails the job, visibly, with that status. Any other failure (a build
    that did not finish, a crash) fails the build step itself and uploads nothing.
    """
    run = ("status=0\n"
           f"{command.rstrip()} || status=$?\n"
           "echo \"status=$status\" >> \"$GITHUB_OUTPUT\"\n"
           f"# {STABLE_FEATURE_FAILED}: a stable feature failed; the fragment records it and is uploaded before "
           "the job fails\n"
           f"if [ \"$status\" -ne 0 ] && [ \"$status\" -ne {STABLE_FEATURE_FAILED} ]; then exit \"$status\"; fi\n")
    return [
        {"name": name, "id": BUILD_STEP_ID, "env": env, "run": run},
        upload_fragment(),
        {"name": "Fail the job when a stable feature failed (after the upload)",
         "if": f"steps.{BUILD_STEP_ID}.outputs.status != '0'",
         "env": {"STATUS": f"${{{{ steps.{BUILD_STEP_ID}.outputs.status }}}}"},
         "run": "echo \"::error::a stable feature failed its tests (exit $STATUS): the fragment is uploaded, the "
                "release report names the feature, and the publish job's gate decides per channel\"\n"
                "exit \"$STATUS\"\n"},
    ]
