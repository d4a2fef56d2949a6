"""Where a release goes, as release.yaml describes it: publish targets and channels, conda
channel settings, Docker images, signed provenance."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from shipyard.errors import names_a_secret
from shipyard.release.fields import (
    ENV_NAME,
    NAME,
    Frozen,
    PythonVersion,
    named_entries,
)

# The URL schemes each kind of publish target speaks ('' is a bare host:port, as registries are named).
URL_SCHEMES_BY_TARGET: dict[str, tuple[str, ...]] = {
    "pypi": ("http", "https"), "static": ("http", "https"), "conda": ("http", "https"),
    "docker": ("", "http", "https"),
}
_URL_EXAMPLES = {"pypi": "https://pypi.example.org/", "static": "https://example.org/whl/",
                 "conda": "https://example.org/conda/", "docker": "127.0.0.1:5000"}
# A host name, an IPv4 address, or an IPv6 address in brackets.
_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$"
                   r"|^\[[0-9A-Fa-f:.]+\]$")


def _publish_url_problem(url: str, kind: str | None) -> str | None:
    """What is wrong with `url` as a `kind` target's URL ("message; fix"), or None. Never repeats the
    URL: the part before '@', or the query, may be a credential."""
    example = _URL_EXAMPLES.get(kind or "", "https://example.org/")
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    authority = rest.partition("/")[0]
    if "@" in authority:
        return ("the URL carries credentials (user:password@); remove them and name the environment variables "
                "that hold them with username_env and password_env")
    if "?" in url or "#" in url:
        return ("the URL carries a query or fragment (?… or #…), which may hold a token; remove it and name the "
                "environment variable that holds a token with token_env")
    parts = re.fullmatch(r"(?P<host>\[[^\]]*\]|[^:\[\]]*)(:(?P<port>\d{1,5}))?", authority)
    if (re.search(r"\s", url) or parts is None or not _HOST.match(parts["host"])
            or (parts["port"] and not 0 < int(parts["port"]) < 65536)):
        return f"not a URL; write one like {example}"
    allowed = URL_SCHEMES_BY_TARGET.get(kind or "")
    if allowed is not None and scheme.lower() not in allowed:
        speaks = " or ".join(f"{s}://" if s else "host:port" for s in allowed)
        given = f"{scheme}://" if scheme else "a URL without a scheme"
        return f"a {kind} target speaks {speaks}, not {given}; write e.g. {example}"
    return None


# Which manifest package types each kind of publish target takes.
PACKAGE_TYPES_BY_TARGET: dict[str, tuple[str, ...]] = {
    "pypi": ("wheel",), "static": ("wheel",), "conda": ("conda",), "docker": ("docker",),
}


class PublishTarget(Frozen):
    """Where artifacts go. Credentials are named by environment variable, never inlined.

    `pypi` is a devpi server (url: its root; one index per channel and variant under the user
    named by username_env); `static` a PyTorch-layout tree (`<path>/<channel>/<tag>/<project>/`)
    that a web server serves at url; `conda` a static channel (`<path>/<channel>/<subdir>/`) served
    at url with conda's /t/<token>/; `docker` a registry (url: host:port)."""

    name: str
    kind: Literal["pypi", "static", "conda", "docker"]
    url: str
    path: str | None = None  # static and conda: the folder the web server serves, relative to release.yaml
    # pypi: the variant whose wheels are also published under the plain version (PyPI refuses +cpu).
    default_variant: str | None = None
    username_env: str | None = Field(default=None, pattern=ENV_NAME)
    password_env: str | None = Field(default=None, pattern=ENV_NAME)
    token_env: str | None = Field(default=None, pattern=ENV_NAME)

    @model_validator(mode="after")
    def _fields_fit_kind(self) -> PublishTarget:
        if self.kind in ("static", "conda") and not self.path:
            raise ValueError(f"a {self.kind} target writes files that a web server serves; set path to that "
                             f"folder, relative to release.yaml (e.g. dist/site/{self.kind})")
        if self.kind not in ("static", "conda") and self.path:
            raise ValueError(f"a {self.kind} target is a server shipyard talks to; remove path")
        if self.default_variant and self.kind != "pypi":
            raise ValueError("default_variant (the PyPI flavour) belongs to a pypi target; remove it here")
        if self.kind == "pypi" and not (self.username_env and self.password_env):
            raise ValueError("a pypi target needs username_env and password_env: the names of the environment "
                             "variables holding the devpi user and password")
        if self.kind == "conda" and not self.token_env:
            raise ValueError("a conda target needs token_env: the name of the environment variable holding the "
                             "channel token its web server checks (/t/<token>/)")
        return self

    def credential_envs(self) -> tuple[str, ...]:
        """The environment variables this target's credentials come from."""
        return tuple(e for e in (self.username_env, self.password_env, self.token_env) if e)

    @model_validator(mode="before")
    @classmethod
    def _no_inline_secrets(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in data:
                word = str(key).lower().replace("-", "_")
                if word.endswith("_env") or not names_a_secret(word):
                    continue
                raise ValueError(
                    f"{key!r} holds a secret inline and release.yaml must never contain credentials; "
                    f"put it in an environment variable and name that variable with "
                    f"{'token_env' if 'token' in word else 'password_env'}")
        return data

    @field_validator("url")
    @classmethod
    def _url_fits_kind(cls, url: str, info: ValidationInfo) -> str:
        # `kind` is validated first; when it is wrong, only the URL's shape is checked here.
        problem = _publish_url_problem(url, info.data.get("kind"))
        if problem:
            raise ValueError(problem)
        return url


class ReleaseChannel(Frozen):
    """A channel artifacts are published to (nightly, test, release), in promotion order.
    gate: block refuses an artifact with a failing stable feature; mark publishes it, marked."""

    name: str = Field(pattern=NAME)
    gate: Literal["block", "mark"]


# A conda channel: a name on anaconda.org (conda-forge, pytorch) or a URL (https://, http://, file://).
_CHANNEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/label/[A-Za-z0-9._-]+)?$")
_CHANNEL_URL = re.compile(r"^(https?|file)://\S+$")


def _conda_channel(channel: str) -> str:
    if _CHANNEL_URL.match(channel):
        authority = channel.split("//", 1)[1].split("/", 1)[0]
        if "@" in authority or "?" in channel or re.search(r"/t/[^/]+/", channel):
            raise ValueError("a channel URL carries credentials (user:password@, a /t/<token>/ or a ?query); remove "
                             "them, conda channels named here must be readable without a login")
    elif not _CHANNEL_NAME.match(channel):
        raise ValueError("not a conda channel; write a channel name such as conda-forge, or a URL (https://…, "
                         "file:///…)")
    return channel


class CondaSettings(Frozen):
    """Where conda packages get their dependencies: channels in priority order, what `shipyard
    conda build` solves from by default. Where none can be reached, shipyard's bootstrap channel
    stands in for them on request (`--bootstrap-channel`)."""

    channels: tuple[Annotated[str, AfterValidator(_conda_channel)], ...] = Field(min_length=1)

    @field_validator("channels")
    @classmethod
    def _channels_once(cls, channels: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(channels)) != len(channels):
            raise ValueError("a channel appears twice; list each once")
        return channels


# A Docker image reference without a tag or digest: [registry[:port]/]name[/name…].
_IMAGE_REPOSITORY = re.compile(r"^([a-z0-9.-]+(:\d+)?/)?[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*$")
_IMAGE_REF = re.compile(r"^[A-Za-z0-9./:_@-]+$")


class ImageVariant(Frozen):
    """One variant's images: their size budgets (MB, as `docker image inspect` counts them, base
    included) and the base image CI builds FROM."""

    name: str
    runtime_budget_mb: float = Field(gt=0)
    devel_budget_mb: float = Field(gt=0)
    base_image: str | None = Field(default=None, pattern=_IMAGE_REF.pattern)


class ImageSettings(Frozen):
    """The ready-to-train Docker images (`shipyard image build`): one runtime and one devel
    image per listed variant, holding `components` for one Python."""

    repository: str
    python: PythonVersion
    platform: str
    components: tuple[str, ...] = Field(min_length=1)
    channel: Literal["nightly", "test", "release"]
    # What CI builds FROM (a registry is reachable there); a variant may name its own.
    base_image: str = Field(pattern=_IMAGE_REF.pattern)
    # The official image the Python prefix is copied from on CI, and where it lives in it.
    python_image: str = Field(pattern=_IMAGE_REF.pattern)
    python_prefix: str = "/usr/local"
    # The repository the images are built from: the OCI `source` label.
    source: str = Field(pattern=r"^https?://\S+$")
    variants: Annotated[dict[str, ImageVariant], BeforeValidator(named_entries("variants"))] = Field(min_length=1)

    @field_validator("repository")
    @classmethod
    def _repository_is_a_name(cls, value: str) -> str:
        if not _IMAGE_REPOSITORY.match(value):
            raise ValueError("not an image repository name; write lowercase words such as 'ember' or "
                             "'registry.example.com/ember', without a tag")
        return value

    def base_for(self, variant: str) -> str:
        return self.variants[variant].base_image or self.base_image


class SupplyChain(Frozen):
    """Signed provenance (shipyard.supply): where the Ed25519 signing key comes from, never the
    key itself, and the builder id the provenance names."""

    # A PEM (PKCS#8) private key file, relative to release.yaml, or an environment variable holding
    # the PEM text (a CI secret). The variable wins when it is set.
    signing_key_file: str | None = None
    signing_key_env: str | None = Field(default=None, pattern=ENV_NAME)
    builder_id: str = Field(min_length=3)

    @model_validator(mode="after")
    def _names_a_key(self) -> SupplyChain:
        if not (self.signing_key_file or self.signing_key_env):
            raise ValueError("supply_chain needs signing_key_file (a PEM file, relative to release.yaml) or "
                             "signing_key_env (the name of the environment variable holding the PEM key)")
        if self.signing_key_file and "PRIVATE KEY" in self.signing_key_file:
            raise ValueError("signing_key_file holds a key, not a path; name the file the key is in")
        return self
