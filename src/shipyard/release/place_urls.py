"""The places release.yaml names (publish URLs, conda channels, the provenance's builder id, the
images' source and base images) carry no credentials: no user:password@, no ?query or #fragment,
no path segment shaped like a token (conda's /t/<token>/, ghp_…, pypi-…, glpat-…, a JWT).

What a user types there is printed by commands, written into image labels and signed into
provenance, so a credential in it would be published. Each model's validator calls
`place_problem` (or `image_problem` for a Docker image reference); the message never repeats
the value, and says where credentials go instead.
"""

from __future__ import annotations

import re

from shipyard.redaction import SECRET_SHAPES, userinfo_end

# Where a credential goes instead, in release.yaml's own words (docs/publishing.md, Credentials).
WHERE_CREDENTIALS_GO = ("a publish target names the environment variables holding them with username_env, "
                        "password_env or token_env; other places must be readable without a login")

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_DIGEST_SUFFIX = re.compile(r"@[a-z0-9]+:[0-9a-fA-F]{32,}$")


def place_problem(text: str, what: str = "the URL") -> str | None:
    """What makes `text` (a URL, or a host[:port][/path] as registries are named) carry a
    credential, as "message; fix" about `what` ('the URL', 'a channel URL'), or None. Never
    quotes `text`."""
    if userinfo_end(text):
        return f"{what} carries credentials (user:password@); remove them: {WHERE_CREDENTIALS_GO}"
    rest = _SCHEME.sub("", text)
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    host, colon, port = authority.rpartition(":") if authority.count(":") == 1 else (authority, "", "")
    if colon and not re.fullmatch(r"\d*", port):
        # RFC 3986 ends the authority at the first '/': `http://admin:pa/ss@host/` has the port
        # `pa`, which a user meant as half a password. Say so without the part after ':'.
        return (f"{what} carries credentials (its host:port is not a host and a port: a user:password?); remove "
                f"them: {WHERE_CREDENTIALS_GO}")
    if "?" in text or "#" in text:
        return (f"{what} carries a query or fragment (?… or #…), which may hold a token; remove it: "
                f"{WHERE_CREDENTIALS_GO}")
    path = rest[len(authority):]
    if re.search(r"/t/[^/]+(/|$)", path):
        return f"{what} carries credentials (a conda token, /t/<token>/); remove it: {WHERE_CREDENTIALS_GO}"
    if any(SECRET_SHAPES.search(segment) for segment in path.split("/")):
        return f"{what} carries credentials (a part of its path looks like a token); remove it: {WHERE_CREDENTIALS_GO}"
    return None


def image_problem(reference: str) -> str | None:
    """`place_problem` for a Docker image reference ([registry[:port]/]name[:tag][@digest]):
    its digest's '@' is not a login."""
    what = "the image reference"
    name = _DIGEST_SUFFIX.sub("", reference)
    if "@" in name:
        return f"{what} carries credentials (user:password@); remove them: {WHERE_CREDENTIALS_GO}"
    if "/" not in name:
        # `name:tag` names an image on the default registry: its ':' is the tag's.
        return place_problem(f"registry.invalid/{name}", what)
    return place_problem(name, what)


def checked_place(text: str) -> str:
    """A pydantic after-validator: `text`, or ValueError saying how it carries a credential."""
    problem = place_problem(text, "it")
    if problem:
        raise ValueError(problem)
    return text


def checked_image(reference: str | None) -> str | None:
    """A pydantic after-validator for an image reference (None passes)."""
    problem = None if reference is None else image_problem(reference)
    if problem:
        raise ValueError(problem)
    return reference
