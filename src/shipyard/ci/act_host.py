"""What of this host a local workflow run carries into every container it starts, and nothing more.

Downloads from here may pass a TLS proxy whose CA only the host's trust store holds (corporate
networks are the same), and pip may be pointed at indexes the host reaches. So each container,
runner and job container alike, gets read-only:
- the host's CA bundle, at CONTAINER_CA, with the variables pip, requests, uv, curl and git read;
- the host's pip configuration merged into one file (`PIP_CONFIG_FILE`), its `cert` pointed at
  CONTAINER_CA, and the index variables (PIP_*, UV_*) of the host's environment;
- the local files and folders those settings name (file:// indexes, find-links, constraints), at
  the same paths;
- this host's Pythons (pyenv builds) at CONTAINER_PYTHONS, for actions/setup-python's stand-in only:
  nothing puts them on PATH unless a step asks for one.
No pyenv root, no apt state, no caches, no home folder.
"""

from __future__ import annotations

import configparser
import os
import shlex
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from shipyard.host.toolchains.discover import pyenv_root

CONTAINER_HOST_DIR = "/opt/shipyard-host"
CONTAINER_CA = f"{CONTAINER_HOST_DIR}/ca-certificates.crt"
CONTAINER_PIP_CONF = f"{CONTAINER_HOST_DIR}/pip.conf"
CONTAINER_SOURCE = f"{CONTAINER_HOST_DIR}/source.bundle"
CONTAINER_PYTHONS = "/opt/shipyard-pythons"
DEFAULT_CA = Path("/etc/ssl/certs/ca-certificates.crt")

# Variables that name the CA bundle for one tool or another; each gets CONTAINER_CA.
CA_VARIABLES = ("SSL_CERT_FILE", "PIP_CERT", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO",
                "NODE_EXTRA_CA_CERTS")
# Index settings of pip and uv carried over from the host's environment as they are.
INDEX_VARIABLES = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_TRUSTED_HOST",
                   "PIP_DEFAULT_TIMEOUT", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX",
                   "UV_FIND_LINKS", "UV_PYTHON_INSTALL_MIRROR", "UV_HTTP_TIMEOUT")
# pip's configuration files, lowest priority first (pip's own order on Linux).
PIP_CONFIG_FILES = (Path("/etc/xdg/pip/pip.conf"), Path("/etc/pip.conf"), Path.home() / ".pip" / "pip.conf",
                    Path.home() / ".config" / "pip" / "pip.conf")


@dataclass(frozen=True)
class HostShare:
    """The files staged for the containers, the read-only mounts and the environment they get."""

    staged: Path  # mounted at CONTAINER_HOST_DIR
    mounts: tuple[tuple[str, str], ...]  # (host path, container path), all read-only
    env: Mapping[str, str]

    def container_options(self) -> str:
        """act's --container-options: the read-only mounts, for every container of the run."""
        return " ".join(f"-v {shlex.quote(f'{src}:{dest}:ro')}" for src, dest in self.mounts)


def host_ca_bundle(environ: Mapping[str, str] = os.environ) -> Path:
    """The bundle this host's tools trust: $SSL_CERT_FILE when set, else Debian's."""
    return Path(environ.get("SSL_CERT_FILE") or DEFAULT_CA)


def merged_pip_config(files: tuple[Path, ...] = PIP_CONFIG_FILES, environ: Mapping[str, str] = os.environ) -> str:
    """The host's pip configuration as one file, `cert` pointing at the container's bundle."""
    config = configparser.ConfigParser(interpolation=None)
    extra = environ.get("PIP_CONFIG_FILE")
    config.read([*files, *([Path(extra)] if extra and extra != os.devnull else [])])
    for section in config.sections():
        if config.has_option(section, "cert"):
            config.set(section, "cert", CONTAINER_CA)
    if not config.has_section("global"):
        config.add_section("global")
    config.set("global", "cert", CONTAINER_CA)
    lines = []
    for section in config.sections():
        lines.append(f"[{section}]")
        lines.extend(f"{key} = {value}" for key, value in config.items(section))
        lines.append("")
    return "\n".join(lines)


def _local_paths(values: list[str]) -> list[Path]:
    """The existing local files and folders named by index settings (file:// URLs or plain paths)."""
    out = []
    for value in values:
        for item in value.split():
            parsed = urlparse(item)
            path = Path(parsed.path) if parsed.scheme == "file" else Path(item) if not parsed.scheme else None
            if path is not None and path.is_absolute() and path.exists():
                out.append(path)
    return out


def share_host(staged: Path, environ: Mapping[str, str] = os.environ,
               pip_files: tuple[Path, ...] = PIP_CONFIG_FILES) -> HostShare:
    """Stage the host's CA bundle and pip configuration in `staged`, and say what every
    container mounts and sees."""
    staged.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(host_ca_bundle(environ), staged / "ca-certificates.crt")
    pip_conf = merged_pip_config(pip_files, environ)
    (staged / "pip.conf").write_text(pip_conf)
    env = {name: CONTAINER_CA for name in CA_VARIABLES}
    env["PIP_CONFIG_FILE"] = CONTAINER_PIP_CONF
    env.update({name: environ[name] for name in INDEX_VARIABLES if environ.get(name)})
    config = configparser.ConfigParser(interpolation=None)
    config.read_string(pip_conf)
    # Every local path the settings name (file:// indexes, find-links, constraint files), except the
    # bundle, which the containers get at CONTAINER_CA.
    named = [value for section in config.sections() for key, value in config.items(section) if key != "cert"]
    named += [environ[name] for name in INDEX_VARIABLES if environ.get(name)]
    mounts = [(str(staged), CONTAINER_HOST_DIR)]
    mounts += [(str(folder), str(folder)) for folder in dict.fromkeys(_local_paths(named))]
    pythons = pyenv_root() / "versions"
    if pythons.is_dir():
        mounts.append((str(pythons.resolve()), CONTAINER_PYTHONS))
    return HostShare(staged, tuple(mounts), env)
