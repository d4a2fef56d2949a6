"""Steps that several jobs of the workflows share: checkout, shipyard on the runner or in the
builder container, the Pythons and build cache of a job, fragments, and the build step that
records its exit status so that a failing stable feature still uploads its fragment.

Every `run:` script reads matrix values and contexts from `env:` (never `${{ }}` inside the
script: a value cannot become shell code).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shipyard.ci.actions import uses
from shipyard.errors import STABLE_FEATURE_FAILED, SpecError
from shipyard.plumbing.input_files import input_error
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


def checkout() -> Step:
    return {"name": "Check out", "uses": uses("actions/checkout"), "with": {"persist-credentials": False}}


def uv_requirement(root: Path) -> str:
    """The uv version range ci/bootstrap.sh installs, so runners get the uv that runs here."""
    found = re.search(r'"(uv[<>=!~][^"]*)"', (root / "ci" / "bootstrap.sh").read_text())
    if not found:
        raise input_error(root / "ci" / "bootstrap.sh", "(file)", 'no quoted uv requirement (like "uv>=0.8,<0.14") '
                          "found", "the workflows install the same uv, so keep it there")
    return found.group(1)


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
        {"name": "Install shipyard", "env": {"UV_REQUIREMENT": uv_requirement(spec.root), **INSTALL_ENV},
         # a venv of its own: the runner's tool-cache Python stays as setup-python left it. No pip
         # in it (ensurepip costs each job seconds): that Python's pip puts uv in (--python takes the
         # venv folder: Scripts/python.exe on Windows), uv the rest.
         "run": "python -m venv --without-pip .venv\n"
                "bin=.venv/bin; [ \"$RUNNER_OS\" = Windows ] && bin=.venv/Scripts\n"
                "python -m pip --python .venv install --quiet --disable-pip-version-check "
                "\"$UV_REQUIREMENT\"\n"
                "\"$bin/python\" -m uv pip install --python \"$bin/python\" .\n"
                "\"$bin/python\" -c 'import os, sys; print(os.path.dirname(os.path.abspath(sys.executable)))' "
                ">> \"$GITHUB_PATH\"\n"},
    ]


def container_packages() -> Step:
    """What the bare builder image lacks to check out with git and run ci/bootstrap.sh."""
    return {"name": "Container packages (git for the checkout, Python for ci/bootstrap.sh)",
            "run": "if ! python3 -c 'import ensurepip, venv' 2>/dev/null || ! command -v git >/dev/null; then\n"
                   "  apt-get update -qq\n"
                   "  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \\\n"
                   "    python3 python3-venv git ca-certificates >/dev/null\n"
                   "fi\n"}


def bootstrap_set(root: Path, name: str) -> str:
    """`name`, checked to be one of ci/bootstrap.sh's APT_SETS, where each lane's packages are listed."""
    if not re.search(rf"^\s*\[{re.escape(name)}\]=", (root / "ci" / "bootstrap.sh").read_text(), re.M):
        raise SpecError(f"ci/bootstrap.sh: APT_SETS: no set for lane {name}; add "
                            f"[{name}]=\"<its apt packages>\" there (got lane {name})")
    return name


def container_tools(root: Path, apt_set: str) -> list[Step]:
    """shipyard in the Linux builder container: ci/bootstrap.sh as on a bare machine here, with
    only the apt packages of the lane's set (ci/bootstrap.sh's APT_SETS)."""
    return [{"name": f"Install shipyard (ci/bootstrap.sh {apt_set}, as on a bare Debian 12 machine)",
             "env": INSTALL_ENV,
             "run": "git config --global --add safe.directory \"$PWD\"  # the checkout belongs to the runner's user\n"
                    f"bash ci/bootstrap.sh {bootstrap_set(root, apt_set)}\n"
                    ".venv/bin/uv pip install --python .venv/bin/python .\n"
                    "echo \"$PWD/.venv/bin\" >> \"$GITHUB_PATH\"\n"
                    "echo \"$HOME/.local/bin\" >> \"$GITHUB_PATH\"\n"}]


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
         "run": "echo \"key=$(shipyard ci cache-key \"$JOB_ID\")\" >> \"$GITHUB_OUTPUT\"\n"},
        {"name": "Build cache", "uses": uses("actions/cache"),
         "with": {"path": ".shipyard/cache", "key": "${{ steps.cache-key.outputs.key }}",
                  "restore-keys": "${{ matrix.id }}-"}},
    ]


def pythons_and_cache() -> list[Step]:
    return [job_pythons(), *build_cache()]


def download_fragments(pattern: str, name: str) -> list[Step]:
    """Fragments of earlier jobs this job builds on, merged into dist/ as the one manifest."""
    return [
        {"name": f"Download {name}", "uses": uses("actions/download-artifact"),
         "with": {"pattern": pattern, "path": "fragments"}},
        {"name": f"Merge {name} into dist/", "run": "shipyard manifest merge --dist dist fragments/*\n"},
    ]


def upload_fragment() -> Step:
    return {"name": "Upload artifacts and manifest fragment", "uses": uses("actions/upload-artifact"),
            "with": {"name": "fragment-${{ matrix.id }}", "path": "dist/", "if-no-files-found": "error",
                     "retention-days": 14, "compression-level": RELEASE_ARTIFACT_COMPRESSION}}


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
