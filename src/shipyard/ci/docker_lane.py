"""The docker lane: a variant's runtime and devel images from its wheel index, saved for publish.

It gets what it builds FROM the way a hosted runner can: `docker pull` of release.yaml's
`images.base_image` and `images.python_image` (`shipyard image bases`; by digest when they are
written `name:tag@sha256:…`), skipping one the engine already holds (a local run loads its own).
It installs what it needs itself: the docker client where the runner has none, and the image's
Python, whose pip resolves the images' pinned dependencies. The debootstrapped base that stands
in for the pulled ones on an offline machine is never used here.
"""

from __future__ import annotations

from shipyard.ci.actions import uses
from shipyard.ci.jobs import Lane
from shipyard.ci.steps import Job, checkout, download_fragments, host_tools, job_pythons, signing_env, upload_fragment
from shipyard.release.spec import Spec


def _docker_client() -> dict[str, str]:
    return {"name": "Docker client (the runner's, else Debian's or Ubuntu's docker.io)",
            "run": "if ! command -v docker >/dev/null; then\n"
                   "  sudo=\"\"; [ \"$(id -u)\" = 0 ] || sudo=sudo\n"
                   "  $sudo apt-get update -qq\n"
                   "  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "
                   "docker.io >/dev/null\n"
                   "fi\n"
                   "docker version --format 'docker engine {{.Server.Version}}'\n"}


def _pull_bases() -> dict[str, object]:
    return {"name": "Base images (release.yaml's images.base_image and python_image, pulled)",
            "env": {"VARIANT": "${{ matrix.variant }}"},
            # A command substitution, not `mapfile < <(…)`: a process substitution's failure never
            # reaches the script, and the step would go on with no bases at all.
            "run": "refs=$(shipyard image bases --variant \"$VARIANT\")\n"
                   "mapfile -t bases <<< \"$refs\"\n"
                   "for ref in \"${bases[@]}\"; do\n"
                   "  docker image inspect \"$ref\" >/dev/null 2>&1 || docker pull --quiet \"$ref\"\n"
                   # range, not join: a docker CLI that decodes the inspect JSON generically
                   # refuses join on it ("expected []string; got []interface {}")
                   "  docker image inspect --format '{{.Id}}{{range .RepoDigests}} {{.}}{{end}}' \"$ref\"\n"
                   "done\n"}


def docker_lane(spec: Spec, lane: Lane) -> Job:
    # The image's Python (whose pip resolves the images' pinned dependencies) from setup-python
    # too: on a runner that is the tool cache, never a download at `ci pythons`.
    python = spec.release.images.python if spec.release.images else None
    steps = [checkout(), *host_tools(spec, also=(python,) if python else ()), job_pythons(), _docker_client(),
             _pull_bases(),
             *download_fragments("fragment-wheel-*-${{ matrix.variant_tag }}-${{ matrix.platform }}",
                                 "the variant's wheels"),
             {"name": "Download the pure wheels", "uses": uses("actions/download-artifact"),
              "with": {"pattern": "fragment-wheel-*-any", "path": "fragments-pure"}},
             {"name": "Merge the pure wheels into dist/",
              "run": "shipyard manifest merge --dist dist fragments-pure/*\n"},
             # --save writes the images this build made, never others an engine holds (a
             # self-hosted runner's, or the one a local run shares)
             {"name": "Build the images and save them for publish",
              "env": {"VARIANT": "${{ matrix.variant }}", "VARIANT_TAG": "${{ matrix.variant_tag }}",
                      **signing_env(spec)},
              "run": "shipyard image build --variant \"$VARIANT\" --channel \"$SHIPYARD_CHANNEL\" "
                     "--save \"dist/images/$VARIANT_TAG.tar\"\n"},
             upload_fragment()]
    return {"steps": steps}
