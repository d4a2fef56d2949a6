"""Which images the Dockerfile builds FROM.

On CI (a registry is reachable) they are release.yaml's `images.base_image` and
`images.python_image` (`configured_bases`), pulled by the docker job before the build (`shipyard
image bases` lists them; written `name:tag@sha256:…` they are pulled by digest). Where the engine does not hold
them and none can be pulled (this offline machine), shipyard's debootstrapped bookworm base
stands in for the OS and a small image holding this host's own CPython prefix for the Python;
the pyenv Pythons are built against bookworm's glibc, so they run on that base.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import docker

from shipyard.errors import BuildError, ToolchainMissing
from shipyard.host import docker_base
from shipyard.host.toolchains.discover import discover
from shipyard.image.plan import LABEL_PREFIX
from shipyard.plumbing.hashing import sha256_hex
from shipyard.plumbing.progress import Progress
from shipyard.release.destinations import ImageSettings

LOCAL_PYTHON_REPOSITORY = "shipyard/python-prefix"
LOCAL_PYTHON_PREFIX = "/opt/python"
_PYTHON_RECIPE = "1"


@dataclass(frozen=True)
class Bases:
    base_image: str
    python_image: str
    python_prefix: str
    origin: str  # "release.yaml", "given" or "local bootstrap": said in the output and a label

    def identity(self) -> dict[str, str]:
        """What the images' bytes depend on: the image ids, not the names."""
        return {"base": docker_base.image_id(self.base_image), "python": docker_base.image_id(self.python_image),
                "python_prefix": self.python_prefix}


def configured_bases(settings: ImageSettings, variant: str) -> tuple[str, str]:
    """The OS base and the Python image release.yaml names for `variant`, as written there."""
    return settings.base_for(variant), settings.python_image


def pinned_by_digest(ref: str) -> bool:
    return "@sha256:" in ref


def resolve_bases(settings: ImageSettings, variant: str, *, base_image: str | None = None,
                  python_image: str | None = None, python_prefix: str | None = None,
                  progress: Progress | None = None) -> Bases:
    """Given images win; then release.yaml's when the engine holds them; else the local stand-ins."""
    configured_base, configured_python = configured_bases(settings, variant)
    if base_image or python_image:
        return Bases(base_image or configured_base, python_image or configured_python,
                     python_prefix or (settings.python_prefix if not python_image else "/usr/local"), "given")
    present = [docker_base.image_labels(ref) is not None for ref in (configured_base, configured_python)]
    if all(present):
        return Bases(configured_base, configured_python, settings.python_prefix, "release.yaml")
    if progress:
        progress(f"{configured_base} / {configured_python} are not in the engine: using shipyard's bootstrapped "
                 f"Debian base and this host's Python {settings.python}")
    base = docker_base.bootstrap_base_image(progress=progress)
    return Bases(base, local_python_image(settings.python, progress=progress), LOCAL_PYTHON_PREFIX,
                 "local bootstrap")


def local_python_image(version: str, *, prefix: str = LOCAL_PYTHON_PREFIX, tag: str | None = None,
                       progress: Progress | None = None) -> str:
    """An image holding only this host's CPython `version` prefix at `prefix` (what the
    Dockerfile copies from PYTHON_IMAGE), tagged `tag` (default: shipyard's own name for it);
    rebuilt only when the prefix's files change."""
    interpreter = discover().interpreter(version)
    if interpreter is None:
        raise ToolchainMissing(f"no Python {version} here to put in the image (pyenv install {version})")
    source = docker_base.python_prefix(interpreter)
    inputs = {"recipe": _PYTHON_RECIPE, "prefix": str(source.prefix), "files": docker_base._fingerprint(source),
              **({"into": prefix} if prefix != LOCAL_PYTHON_PREFIX else {})}
    digest = sha256_hex(json.dumps(inputs, sort_keys=True).encode())
    tag = tag or f"{LOCAL_PYTHON_REPOSITORY}:{interpreter.full_version}-{digest[:12]}"
    labels = docker_base.image_labels(tag)
    if labels is not None and labels.get(f"{LABEL_PREFIX}.python-inputs") == digest:
        return tag
    if progress:
        progress(f"python image {tag} from {source.prefix}")
    with tempfile.TemporaryDirectory(prefix="shipyard-python-", dir="/var/tmp") as work:
        context = Path(work)
        docker_base._stage_prefix(source, context)
        staged = Path("pythons") / source.prefix.relative_to("/")
        (context / "Dockerfile").write_text(f"FROM scratch\nCOPY {staged.as_posix()}/ {prefix}/\n")
        client = docker.from_env(timeout=1800)
        try:
            client.images.build(path=str(context), tag=tag, rm=True, forcerm=True, pull=False,
                                labels={f"{LABEL_PREFIX}.python-inputs": digest,
                                        f"{LABEL_PREFIX}.python-source": str(source.prefix)})
        except (docker.errors.BuildError, docker.errors.APIError) as exc:
            raise BuildError(f"building the Python image {tag} failed: {exc}") from exc
    return tag
