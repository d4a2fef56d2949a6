"""Credentials come from the environment variables release.yaml names, and from nowhere else but
trusted publishing (a pypi target with `trusted_publishing: true`), whose upload token is minted in
this process through GitHub's OIDC token (publish/trusted_publishing.py) and kept in memory.

A minted token lives minutes (PyPI's: 15), and a release that pushes images first, or uploads
large wheels, outlives it. So the exchange runs at the start only as a check that it works (a
broken trust relation stops the run before any server changes; that token is dropped), then
again right before the target's first upload, and once more when an upload is refused with
401/403 (`renewal_for`).

Every variable of every target taking part is read before anything is uploaded, so a missing one
stops the run before it changes any server. Values live in `Credentials` (whose repr hides them)
and leave it only into request headers; each is handed to redaction.py the moment it is
read, which removes it from any text shipyard shows.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from shipyard.errors import MissingCredential, public_url
from shipyard.plumbing.retry import RetryPolicy
from shipyard.redaction import keep_hidden, redact
from shipyard.release.destinations import ROLE_ARN, PublishTarget


@dataclass(frozen=True)
class Credentials:
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    # An s3 target's role (role_arn, or its role_arn_env's value): no secret, the trust policy guards it.
    role_arn: str | None = None

    def __post_init__(self) -> None:
        keep_hidden(self.password, self.token)

    @property
    def secrets(self) -> tuple[str, ...]:
        return tuple(s for s in (self.password, self.token) if s)

    def basic_auth(self) -> tuple[str, str]:
        return (self.username or "", self.password or "")


def read_credentials(target: PublishTarget, environ: Mapping[str, str] | None = None) -> Credentials:
    """The target's credentials; MissingCredential (naming the target, key and variable, never a value)."""
    env = os.environ if environ is None else environ
    values: dict[str, str | None] = {}
    for key in ("username_env", "password_env", "token_env"):
        name = getattr(target, key)
        if name is None:
            values[key] = None
            continue
        value = env.get(name, "")
        if not value:
            raise MissingCredential(
                f"release.yaml: publish.{target.name}.{key}: the environment variable {name} is not set; "
                f"export {name} with the {key.removesuffix('_env')} for {public_url(target.url)} before publishing "
                f"(nothing was uploaded)")
        values[key] = value
    return Credentials(values["username_env"], values["password_env"], values["token_env"],
                       target.role_arn or _role_from(target, env))


def _role_from(target: PublishTarget, env: Mapping[str, str]) -> str | None:
    """The ARN in the variable an s3 target's role_arn_env names, checked as release.yaml's role_arn is."""
    name = target.role_arn_env
    if name is None:
        return None
    value = env.get(name, "").strip()
    where = f"release.yaml: publish.{target.name}.role_arn_env"
    if not value:
        raise MissingCredential(f"{where}: the environment variable {name} is not set; export {name} with the ARN of "
                                f"the role to assume (on GitHub: the repository variable {name}) before publishing "
                                f"(nothing was uploaded)")
    if not re.match(ROLE_ARN, value):
        raise MissingCredential(f"{where}: the environment variable {name} holds no role ARN; set it to one like "
                                f"arn:aws:iam::<account>:role/<name> (nothing was uploaded)")
    return value


def credentials_for(target: PublishTarget, policy: RetryPolicy) -> Credentials:
    """The target's credentials: minted by trusted publishing, or read from its variables."""
    if target.trusted_publishing:  # only a pypi target may say it
        return _minted(target, policy)
    return read_credentials(target)


def renewal_for(target: PublishTarget, policy: RetryPolicy) -> Callable[[], Credentials] | None:
    """How the target gets fresh credentials when its token is short-lived (trusted publishing):
    a new exchange per call. None for credentials that do not expire during a run."""
    if not target.trusted_publishing:
        return None
    return lambda: _minted(target, policy)


def _minted(target: PublishTarget, policy: RetryPolicy) -> Credentials:
    from shipyard.publish.trusted_publishing import mint_upload_token

    return Credentials("__token__", mint_upload_token(target, policy))


def scrub(text: str, credentials: Iterable[Credentials]) -> str:
    """`text` as redaction.py shows it (`credentials`' secrets are known to it already):
    kept as a name because the publish backends take a scrubber in their context."""
    for creds in credentials:
        keep_hidden(*creds.secrets)
    return redact(text)
