"""The debian:bullseye image the glibc checks install wheels into: Debian's python3 (3.9) and venv,
nothing else, built once per bootstrap base image and then found by its tag."""

from __future__ import annotations

import pytest

from shipyard.host import docker_base
from shipyard.plumbing import command


def bullseye_python_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The image's tag, built first when the engine does not have it."""
    base = docker_base.bootstrap_base_image(suite="bullseye")
    tag = f"shipyard/bullseye-python3:{docker_base.image_id(base).removeprefix('sha256:')[:16]}"
    if docker_base.image_labels(tag) is None:
        context = tmp_path_factory.mktemp("bullseye-python3")
        (context / "Dockerfile").write_text(
            f"FROM {base}\n"
            "RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv \\\n"
            " && rm -rf /var/lib/apt/lists/*\n")
        command.run(["docker", "build", "--tag", tag, context], extra_env={"DOCKER_BUILDKIT": "0"},
                    timeout=1800, what=f"docker build {tag}")
    return tag
