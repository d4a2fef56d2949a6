"""Pushing images to a registry: `push_image(ref, target)` tags a local image for the target's
registry and pushes it with the credentials from the environment variables the target names.

Credentials travel only in the docker SDK's auth header: never on a command line, in a log, in
an error message or in a file (`docker login` would write them to ~/.docker/config.json).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import docker

from shipyard.errors import ShipyardError, ToolError
from shipyard.release.destinations import PublishTarget


class RegistryError(ShipyardError, exit_code=7):
    """A push failed or its credentials are missing; the message names the fix, never a secret."""


@dataclass(frozen=True)
class PushResult:
    local: str  # ember:1.7.0-cpu-runtime
    remote: str  # 127.0.0.1:5000/ember:1.7.0-cpu-runtime
    digest: str  # sha256:… of the manifest the registry now serves under that tag


def remote_ref(ref: str, target: PublishTarget) -> str:
    """Where `ref` goes in `target`'s registry: its host (and path), then the image's name and tag."""
    registry = target.url.split("://", 1)[-1].rstrip("/")
    name = ref.split("/")[-1]  # a local namespace (shipyard/…) does not travel
    return f"{registry}/{name}"


def credentials(target: PublishTarget) -> dict[str, str] | None:
    """{username, password} from the variables the target names; None when it names none."""
    if not (target.username_env or target.password_env):
        return None
    missing = [name for name in (target.username_env, target.password_env) if name and not os.environ.get(name)]
    if missing:
        raise RegistryError(f"release.yaml: publish.{target.name}: set {' and '.join(missing)} to the registry's "
                            f"credentials before pushing (the values are read from the environment only)")
    return {"username": os.environ.get(target.username_env or "", ""),
            "password": os.environ.get(target.password_env or "", "")}


def push_image(ref: str, target: PublishTarget, *, client: docker.DockerClient | None = None) -> PushResult:
    """Push the local image `ref` to `target` (a publish entry of kind docker); returns the digest
    the registry answered with. Idempotent: pushing the same image again changes nothing."""
    if target.kind != "docker":
        raise RegistryError(f"release.yaml: publish.{target.name}: kind is {target.kind!r}; images go to a "
                            "target of kind docker")
    client = client or docker.from_env(timeout=3600)
    auth = credentials(target)
    secret_values = [v for v in (auth or {}).values() if v]
    remote = remote_ref(ref, target)
    repository, tag = remote.rsplit(":", 1)
    try:
        client.images.get(ref).tag(repository, tag)
        digest = None
        for event in client.images.push(repository, tag=tag, auth_config=auth, stream=True, decode=True):
            if "error" in event:
                raise RegistryError(f"push {remote} failed: {_masked(str(event['error']), secret_values)}")
            aux = event.get("aux") or {}
            if aux.get("Digest"):
                digest = aux["Digest"]
    except docker.errors.ImageNotFound as exc:
        raise RegistryError(f"no local image {ref}; build it first: shipyard image build") from exc
    except docker.errors.APIError as exc:
        raise ToolError(f"push {remote}: {_masked(str(exc.explanation or exc), secret_values)}") from None
    finally:
        try:  # the registry-qualified tag was only the push's handle
            client.images.remove(remote, noprune=True)
        except docker.errors.APIError:
            pass
    if digest is None:
        raise RegistryError(f"push {remote}: the registry answered with no digest")
    return PushResult(ref, remote, digest)


def _masked(text: str, secrets: list[str]) -> str:
    for value in secrets:
        text = text.replace(value, "***")
    return text
