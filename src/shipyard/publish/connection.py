"""How shipyard reaches one publish target over HTTP: the certificates it trusts and the proxy
it goes through, the same for every kind (pypi, devpi, conda, docker).

- **Trust.** The target's `ca_file` (a PEM bundle, relative to release.yaml: a self-hosted index
  or registry behind a company CA), else the system trust store (requests' own default would be
  certifi's bundle, not the system's). Verification is never turned off.
- **Proxy.** The target's `proxy` (an http(s) URL), else the standard environment variables
  (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, NO_PROXY), as curl and pip read them: a runner behind a
  proxy publishes with nothing set in release.yaml.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import requests

from shipyard.errors import UsageError
from shipyard.plumbing.retry import RetryPolicy, bounded_session
from shipyard.release.destinations import PublishTarget


def target_trust(target: PublishTarget, root: Path) -> str | bool:
    """What requests verifies the target's certificate against: its ca_file, else the system store."""
    if target.ca_file:
        path = (root / target.ca_file).resolve()
        if not path.is_file():
            raise UsageError(f"release.yaml: publish.{target.name}.ca_file: no such file; give the PEM bundle of "
                             f"the CA that signed the server's certificate, relative to release.yaml "
                             f"(got {target.ca_file})")
        return str(path)
    return ssl.get_default_verify_paths().cafile or True


def target_session(target: PublishTarget, root: Path, policy: RetryPolicy,
                   session: requests.Session | None = None) -> requests.Session:
    """A session (or `session`, twine's) that talks to `target`: its trust and proxy, the policy's
    timeout, no retries of its own."""
    return bounded_session(policy, session, verify=target_trust(target, root), proxy=target.proxy)
