"""What of this host a local workflow run carries into every container it starts, and nothing more.

Downloads from here may pass a TLS proxy whose CA only the host's trust store holds (corporate
networks are the same), and pip may be pointed at indexes and constraints the host uses. So the
bare images (act_images.py) hold, at CONTAINER_HOST_DIR:
- the host's CA bundle (CONTAINER_CA), with the variables pip, requests, uv, curl and git read
  pointing at it (the run's env file);
- the host's pip configuration merged into one file (PIP_CONFIG_FILE), `cert` pointed at
  CONTAINER_CA and constraint files copied beside it;
and the run's env file carries the index variables (PIP_*, UV_*) of the host's environment.
Settings that name the host's local folders (a file:// index, find-links) are left out: those
folders are this host's, not a registry a runner reaches. act gives a workflow's own job
containers (`container:`) no mounts, which is why this lives in the images rather than in mounts.
The one mount is this host's Pythons, read-only, in runner containers, for setup-python's stand-in.
No pyenv root, no apt state, no caches, no home folder.
"""

from __future__ import annotations

import configparser
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from shipyard.host.toolchains.discover import pyenv_root
from shipyard.plumbing.hashing import sha256_of

CONTAINER_HOST_DIR = "/opt/shipyard-host"
CONTAINER_CA = f"{CONTAINER_HOST_DIR}/ca-certificates.crt"
CONTAINER_PIP_CONF = f"{CONTAINER_HOST_DIR}/pip.conf"
CONTAINER_PYTHONS = "/opt/shipyard-pythons"
DEFAULT_CA = Path("/etc/ssl/certs/ca-certificates.crt")

# Variables that name the CA bundle for one tool or another; each gets CONTAINER_CA.
CA_VARIABLES = ("SSL_CERT_FILE", "PIP_CERT", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO",
                "NODE_EXTRA_CA_CERTS")
# Index settings of pip and uv carried over from the host's environment (URLs only).
INDEX_VARIABLES = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_TRUSTED_HOST",
                   "PIP_DEFAULT_TIMEOUT", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX",
                   "UV_FIND_LINKS", "UV_PYTHON_INSTALL_MIRROR", "UV_HTTP_TIMEOUT")
# pip's configuration files, lowest priority first (pip's own order on Linux).
PIP_CONFIG_FILES = (Path("/etc/xdg/pip/pip.conf"), Path("/etc/pip.conf"), Path.home() / ".pip" / "pip.conf",
                    Path.home() / ".config" / "pip" / "pip.conf")
_LOCATIONS = ("index-url", "extra-index-url", "find-links")  # values that name where packages are
_FILES = ("constraint", "requirement")  # values that name a file pip reads


@dataclass(frozen=True)
class HostShare:
    """The files staged for the images (copied to CONTAINER_HOST_DIR), the environment every
    step gets, and what was left out (said in the run's output)."""

    staged: Path
    env: Mapping[str, str]
    left_out: tuple[str, ...]

    def digest_inputs(self) -> dict[str, str]:
        """The staged files by name and sha256: what the images' bytes depend on."""
        return {path.name: sha256_of(path) for path in sorted(self.staged.iterdir()) if path.is_file()}


def host_ca_bundle(environ: Mapping[str, str] = os.environ) -> Path:
    """The bundle this host's tools trust: $SSL_CERT_FILE when set, else Debian's."""
    return Path(environ.get("SSL_CERT_FILE") or DEFAULT_CA)


def _is_remote(value: str) -> bool:
    return urlparse(value).scheme in ("http", "https")


def _pip_config(files: tuple[Path, ...], environ: Mapping[str, str]) -> configparser.ConfigParser:
    config = configparser.ConfigParser(interpolation=None)
    extra = environ.get("PIP_CONFIG_FILE")
    config.read([*files, *([Path(extra)] if extra and extra != os.devnull else [])])
    return config


def stage_share(staged: Path, environ: Mapping[str, str] = os.environ,
                pip_files: tuple[Path, ...] = PIP_CONFIG_FILES) -> HostShare:
    """Stage the host's CA bundle and pip configuration in `staged` (a fresh folder) and say
    which environment every step gets."""
    if staged.exists():
        shutil.rmtree(staged)
    staged.mkdir(parents=True)
    shutil.copyfile(host_ca_bundle(environ), staged / "ca-certificates.crt")
    config = _pip_config(pip_files, environ)
    left_out: list[str] = []
    lines: list[str] = []
    private: dict[str, str] = {}
    for section in config.sections():
        lines.append(f"[{section}]")
        for key, value in config.items(section):
            if key == "cert":
                continue
            if key in _LOCATIONS:
                kept = [item for item in value.split() if _is_remote(item)]
                # An index URL with credentials goes to the 0600 env file, never into an image layer.
                secret = [item for item in kept if urlparse(item).password or urlparse(item).username]
                if secret:
                    env_name = "PIP_" + key.upper().replace("-", "_")
                    private[env_name] = " ".join([*filter(None, [private.get(env_name)]), *secret])
                    kept = [item for item in kept if item not in secret]
                left_out += [f"pip {key} {item} (a folder of this host)" for item in value.split()
                             if not _is_remote(item)]
                if not kept:
                    continue
                value = " ".join(kept)
            elif key in _FILES and Path(value).is_file():
                name = f"{key}-{Path(value).name}"
                shutil.copyfile(value, staged / name)
                value = f"{CONTAINER_HOST_DIR}/{name}"
            lines.append(f"{key} = {value}")
        if section == "global":
            lines.append(f"cert = {CONTAINER_CA}")
        lines.append("")
    if not config.has_section("global"):
        lines += ["[global]", f"cert = {CONTAINER_CA}", ""]
    (staged / "pip.conf").write_text("\n".join(lines))
    env = {name: CONTAINER_CA for name in CA_VARIABLES}
    env["PIP_CONFIG_FILE"] = CONTAINER_PIP_CONF
    env.update(private)
    for name in INDEX_VARIABLES:
        value = environ.get(name) or ""
        if value and (name.endswith("TIMEOUT") or name == "PIP_TRUSTED_HOST" or all(map(_is_remote, value.split()))):
            env[name] = value
        elif value:
            left_out.append(f"{name} (names a folder of this host)")
    return HostShare(staged, env, tuple(left_out))


def pythons_mount() -> tuple[str, str] | None:
    """(this host's Python builds, CONTAINER_PYTHONS), mounted read-only into runner containers
    for setup-python's stand-in; None when there are none."""
    versions = pyenv_root() / "versions"
    return (str(versions.resolve()), CONTAINER_PYTHONS) if versions.is_dir() else None
