"""OIDC trusted publishing to PyPI from a GitHub Actions job: no long-lived secret at all.

The job (with `id-token: write`) asks GitHub for an identity token for PyPI's audience, PyPI
exchanges it for a short-lived upload token bound to this repository and workflow, and the token
goes into the target's credential variables for the later `shipyard publish` step (which masks
credentials in what it prints). It is written to $GITHUB_ENV only, the runner's own file for
that, and never printed.
"""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

from shipyard.errors import ShipyardError, UsageError
from shipyard.release.validate import Spec


def _json(request: urllib.request.Request | str) -> dict:  # type: ignore[type-arg]
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - https URLs built here
        return json.loads(response.read())


def export_trusted_publishing_token(spec: Spec, target_name: str) -> None:
    from shipyard.ci.workflow import trusted_publishing

    target = spec.release.publish.get(target_name)
    if target is None or not trusted_publishing(target):
        raise UsageError(f"--target {target_name}: not a publish target of release.yaml that takes trusted "
                         f"publishing (a pypi target on pypi.org or test.pypi.org)")
    request_url = os.environ.get("ACTIONS_ID_TOKEN_REQUEST_URL")
    request_token = os.environ.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN")
    github_env = os.environ.get("GITHUB_ENV")
    if not (request_url and request_token and github_env):
        raise ShipyardError("no GitHub OIDC token here: trusted publishing runs in a GitHub Actions job with "
                            "`permissions: id-token: write` (the generated publish job has it)")
    host = urlparse(target.url).hostname or "pypi.org"
    index = "https://test.pypi.org" if host == "test.pypi.org" else "https://pypi.org"
    audience = _json(f"{index}/_/oidc/audience")["audience"]
    oidc = _json(urllib.request.Request(f"{request_url}&audience={audience}",
                                        headers={"Authorization": f"bearer {request_token}"}))["value"]
    minted = _json(urllib.request.Request(f"{index}/_/oidc/mint-token", data=json.dumps({"token": oidc}).encode(),
                                          headers={"Content-Type": "application/json"}, method="POST"))
    token = minted.get("token")
    if not token:
        raise ShipyardError(f"{index} refused the OIDC token ({minted.get('message', 'no message')}); register this "
                            f"repository and workflow as a trusted publisher of the project on {index}")
    with Path(github_env).open("a", encoding="utf-8") as fh:
        fh.write(f"{target.username_env}=__token__\n{target.password_env}={token}\n")
