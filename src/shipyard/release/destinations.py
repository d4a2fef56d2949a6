"""Where a release goes, as release.yaml describes it: publish targets and channels, conda
channel settings, Docker images, signed provenance."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any, Literal, get_args
from urllib.parse import urlparse

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from shipyard.errors import names_a_secret
from shipyard.plumbing.identifiers import IMAGE_REPOSITORY
from shipyard.release.fields import (
    ENV_NAME,
    NAME,
    Frozen,
    PythonVersion,
    named_entries,
)
from shipyard.release.place_urls import checked_image, checked_place, place_problem

# The URL schemes each kind of publish target speaks ('' is a bare host:port, as registries are named).
URL_SCHEMES_BY_TARGET: dict[str, tuple[str, ...]] = {
    "devpi": ("http", "https"), "pypi": ("http", "https"), "static": ("http", "https"), "conda": ("http", "https"),
    "docker": ("", "http", "https"), "s3": ("http", "https"),
}
_URL_EXAMPLES = {"devpi": "https://devpi.example.org/", "pypi": "https://upload.pypi.org/legacy/",
                 "static": "https://example.org/whl/", "conda": "https://example.org/conda/",
                 "docker": "127.0.0.1:5000", "s3": "https://download.example.org/whl/"}
# The simple index (PEP 691 / PEP 503) and the trusted-publishing host of the upload URLs a
# `pypi` target may leave at that: PyPI's and TestPyPI's.
KNOWN_INDEXES: dict[str, tuple[str, str]] = {
    "upload.pypi.org": ("https://pypi.org/simple/", "https://pypi.org"),
    "pypi.org": ("https://pypi.org/simple/", "https://pypi.org"),
    "test.pypi.org": ("https://test.pypi.org/simple/", "https://test.pypi.org"),
}
# A host name, an IPv4 address, or an IPv6 address in brackets.
_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$"
                   r"|^\[[0-9A-Fa-f:.]+\]$")


def _proxy_problem(proxy: str) -> str | None:
    """What is wrong with a target's `proxy` ("message; fix"), or None; never repeats the value (it
    may carry a password)."""
    parsed = urlparse(proxy)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        return "proxy must be an http:// or https:// URL of the proxy (e.g. http://proxy.example.org:3128)"
    if parsed.username or parsed.password:
        return ("proxy must not carry credentials (release.yaml is committed); give a proxy that needs none, "
                "or set HTTPS_PROXY in the job's environment from a secret and remove proxy here")
    return None


def _publish_url_problem(url: str, kind: str | None) -> str | None:
    """What is wrong with `url` as a `kind` target's URL ("message; fix"), or None. Never repeats the
    URL: the part before '@', or the query, may be a credential."""
    example = _URL_EXAMPLES.get(kind or "", "https://example.org/")
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    credentials = place_problem(url)
    if credentials:
        return credentials
    authority = rest.partition("/")[0]
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


# An IAM role's ARN (an s3 target's role_arn, or the value of its role_arn_env).
ROLE_ARN = r"^arn:[a-z0-9-]+:iam:[a-z0-9-]*:[0-9]*:role/[\w+=,.@/-]+$"
# An s3 target whose bucket holds a conda channel (layout: conda): the one route that is no kind.
S3_CONDA_ROUTE = "s3-conda"


class PublishTarget(Frozen):
    """Where artifacts go. Credentials are named by environment variable, never inlined.

    `devpi` is a devpi server (url: its root; one index per channel and variant under the user
    named by username_env, made visible by one switch); `pypi` any index that speaks the upload
    API twine uses (url: the upload URL, e.g. https://upload.pypi.org/legacy/; index_url: its
    simple index), which gets the default variant's wheels under the plain version; `static` a
    PyTorch-layout tree (`<path>/<channel>/<tag>/<project>/`) that a web server serves at url;
    `conda` a static channel (`<path>/<channel>/<subdir>/`) served at url with conda's
    /t/<token>/; `docker` a registry (url: https://host[:port] or host[:port]); `s3` the static
    tree's layout in an S3 bucket (`<prefix><channel>/<tag>/<project>/`, publish/s3_tree.py) that
    users read at url (a CDN or the bucket's website)."""

    name: str
    kind: Literal["devpi", "pypi", "static", "conda", "docker", "s3"]
    url: str
    path: str | None = None  # static and conda: the folder the web server serves, relative to release.yaml
    # devpi and pypi: the variant whose wheels are also published under the plain version (PyPI refuses +cpu).
    default_variant: str | None = None
    # pypi: the simple index users install from (PEP 691 JSON, or PEP 503 HTML); PyPI's and TestPyPI's
    # are known from url.
    index_url: str | None = None
    # pypi: mint a short-lived upload token through GitHub's OIDC token instead of reading a secret.
    trusted_publishing: bool = False
    # pypi with trusted_publishing: where /_/oidc/audience and /_/oidc/mint-token are (PyPI's and
    # TestPyPI's are known from url).
    oidc_url: str | None = None
    # s3: the bucket, the key prefix under it (`whl/`), and the S3-compatible endpoint (default:
    # AWS's, in region). Its credentials: username_env and password_env name the variables of the
    # access key id and secret access key, else boto3's own chain (AWS_ACCESS_KEY_ID, a web-identity
    # role from the job's OIDC token).
    bucket: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
    prefix: str = Field(default="", pattern=r"^([A-Za-z0-9._-]+/)*$")
    endpoint_url: str | None = None
    region: str | None = Field(default=None, pattern=r"^[a-z0-9-]+$")
    # s3: what the bucket holds under the prefix: the static tree's wheels, or a conda channel.
    layout: Literal["wheels", "conda"] | None = None
    # s3: the role a GitHub job assumes with its OIDC token (AssumeRoleWithWebIdentity at the store's
    # STS, audience sts.amazonaws.com), instead of an access key: no long-lived secret.
    role_arn: str | None = Field(default=None, pattern=ROLE_ARN)
    # s3: the name of the environment variable holding that role's ARN instead (the generated publish
    # job sets it from the repository variable of that name), so release.yaml names no account.
    role_arn_env: str | None = Field(default=None, pattern=ENV_NAME)
    # The PEM bundle of the CA that signed the server's certificate, relative to release.yaml
    # (default: the system trust store); any kind that talks to a server (publish/connection.py).
    # A docker url is https://host[:port], or host[:port]: https, and plain HTTP on a loopback host.
    ca_file: str | None = None
    # The proxy every request to this target goes through (http://host:port), instead of the
    # standard HTTPS_PROXY / HTTP_PROXY / NO_PROXY variables, which apply otherwise.
    proxy: str | None = None
    # The channels this target publishes to (empty: every one). An index without channels (pypi)
    # must name the ones that should reach it, so a nightly never lands on PyPI.
    channels: tuple[str, ...] = ()
    username_env: str | None = Field(default=None, pattern=ENV_NAME)
    password_env: str | None = Field(default=None, pattern=ENV_NAME)
    token_env: str | None = Field(default=None, pattern=ENV_NAME)

    def takes(self, channel: str) -> bool:
        """Whether a publish or promotion to `channel` goes to this target."""
        return not self.channels or channel in self.channels

    @model_validator(mode="after")
    def _fields_fit_kind(self) -> PublishTarget:
        if self.kind == "s3":
            self._s3_fields()
        elif (self.bucket or self.prefix or self.endpoint_url or self.region or self.layout or self.role_arn
              or self.role_arn_env):
            raise ValueError("bucket, prefix, endpoint_url, region, layout, role_arn and role_arn_env belong to an s3 "
                             "target; remove them here")
        if self.kind in ("static", "conda") and not self.path:
            raise ValueError(f"a {self.kind} target writes files that a web server serves; set path to that "
                             f"folder, relative to release.yaml (e.g. dist/site/{self.kind})")
        if self.kind not in ("static", "conda") and self.path:
            raise ValueError(f"a {self.kind} target is a server shipyard talks to; remove path")
        if self.default_variant and self.kind not in ("devpi", "pypi"):
            raise ValueError("default_variant (the PyPI flavour) belongs to a devpi or pypi target; remove it here")
        if self.kind == "devpi" and not (self.username_env and self.password_env):
            raise ValueError("a devpi target needs username_env and password_env: the names of the environment "
                             "variables holding the devpi user and password")
        if self.kind != "pypi" and (self.index_url or self.trusted_publishing or self.oidc_url):
            raise ValueError("index_url, trusted_publishing and oidc_url belong to a pypi target; remove them here")
        if self.kind == "static" and (self.ca_file or self.proxy):
            raise ValueError("ca_file and proxy belong to a target shipyard reaches over the network; a static "
                             "target writes a folder and reads it back from disk: remove them here")
        if self.proxy and (problem := _proxy_problem(self.proxy)):
            raise ValueError(problem)
        if self.kind == "pypi":
            self._pypi_fields()
        if self.kind == "conda" and not self.token_env:
            raise ValueError("a conda target needs token_env: the name of the environment variable holding the "
                             "channel token its web server checks (/t/<token>/)")
        return self

    def _pypi_fields(self) -> None:
        if self.index_url is None and self.known_index is None:
            # The kind that was devpi's until #29 lands here too: say both ways out.
            raise ValueError("a pypi target speaks the upload API; set index_url to its simple index (e.g. "
                             "https://pypi.example.org/simple/); a devpi server with staging indexes is kind: devpi "
                             "(named kind: pypi before)")
        if not self.default_variant:
            raise ValueError("a pypi target takes the wheels of one variant under the plain version (PyPI refuses "
                             "local versions such as +cpu); set default_variant (e.g. cpu)")
        if not self.channels:
            # Taking every channel would send nightly development versions to PyPI, where no
            # file name can ever be taken back.
            raise ValueError("a pypi target is one index without channels, so it names the channels that reach "
                             "it; set channels (e.g. channels: [release]), else every nightly would be uploaded "
                             "there")
        if self.trusted_publishing:
            if self.username_env or self.password_env or self.token_env:
                raise ValueError("trusted_publishing mints its own token; remove username_env, password_env and "
                                 "token_env")
            if self.oidc_url is None and self.known_index is None:
                raise ValueError("trusted_publishing needs oidc_url (where /_/oidc/audience and /_/oidc/mint-token "
                                 "are) for an index other than pypi.org or test.pypi.org")
        else:
            if self.oidc_url:
                raise ValueError("oidc_url belongs to trusted_publishing: true; remove it or set that")
            if not (self.username_env and self.password_env):
                raise ValueError("a pypi target needs username_env and password_env (for an API token: a variable "
                                 "holding __token__ and one holding the token), or trusted_publishing: true")

    @property
    def known_index(self) -> tuple[str, str] | None:
        """(simple index, trusted-publishing host) when url is PyPI's or TestPyPI's upload URL."""
        return KNOWN_INDEXES.get((urlparse(self.url).hostname or "").lower())

    @property
    def simple_url(self) -> str:
        """A pypi target's simple index, ending in '/'."""
        url = self.index_url or (self.known_index or ("", ""))[0]
        return url if url.endswith("/") else url + "/"

    @property
    def mint_base(self) -> str:
        """Where a pypi target's /_/oidc/ endpoints are."""
        return (self.oidc_url or (self.known_index or ("", ""))[1]).rstrip("/")

    def _s3_fields(self) -> None:
        if not self.bucket:
            raise ValueError("an s3 target needs bucket: the S3 bucket the tree is written to (and prefix, the key "
                             "prefix under it, e.g. whl/)")
        if self.endpoint_url and (problem := _publish_url_problem(self.endpoint_url, "s3")):
            raise ValueError(f"endpoint_url: {problem}")
        if self.role_arn and self.role_arn_env:
            raise ValueError("an s3 target names its role once: role_arn (the ARN) or role_arn_env (the variable "
                             "holding it); remove one")
        if self.assumes_role and (self.username_env or self.password_env):
            raise ValueError("an s3 target takes its credentials from role_arn (the job's OIDC token) or from "
                             "username_env and password_env (an access key), not both; remove one")
        if bool(self.username_env) != bool(self.password_env):
            raise ValueError("an s3 target names both username_env and password_env (the variables of the access key "
                             "id and the secret access key), or neither (boto3's own credential chain)")
        if self.token_env:
            raise ValueError("an s3 target takes no token_env; name the access key's variables in username_env and "
                             "password_env, or neither")

    @property
    def assumes_role(self) -> bool:
        """Whether this s3 target trades the job's OIDC token for a role's credentials (role_arn or
        role_arn_env)."""
        return bool(self.role_arn or self.role_arn_env)

    @property
    def route(self) -> str:
        """The kind of place this target is, as KINDS' publish_targets and the publish backends name
        it: its kind, or for an s3 bucket holding a conda channel `s3-conda`."""
        return S3_CONDA_ROUTE if self.kind == "s3" and self.layout == "conda" else self.kind

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

    @field_validator("index_url", "oidc_url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        problem = None if url is None else _publish_url_problem(url, "static")
        if problem:
            raise ValueError(problem.replace("a static target", "it"))
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
        problem = place_problem(channel, "a channel URL")
        if problem:
            raise ValueError(problem)
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


_IMAGE_REF = re.compile(r"^[A-Za-z0-9./:_@-]+$")


class ImageVariant(Frozen):
    """One variant's images: their size budgets (MB, as `docker image inspect` counts them, base
    included) and the base image CI builds FROM."""

    name: str
    runtime_budget_mb: float = Field(gt=0)
    devel_budget_mb: float = Field(gt=0)
    base_image: Annotated[str | None, AfterValidator(checked_image)] = Field(default=None, pattern=_IMAGE_REF.pattern)


class ImageSettings(Frozen):
    """The ready-to-train Docker images (`shipyard image build`): one runtime and one devel
    image per listed variant, holding `components` for one Python."""

    repository: str
    python: PythonVersion
    platform: str
    components: tuple[str, ...] = Field(min_length=1)
    channel: Literal["nightly", "test", "release"]
    # What CI builds FROM (a registry is reachable there); a variant may name its own.
    base_image: Annotated[str, AfterValidator(checked_image)] = Field(pattern=_IMAGE_REF.pattern)
    # The official image the Python prefix is copied from on CI, and where it lives in it.
    python_image: Annotated[str, AfterValidator(checked_image)] = Field(pattern=_IMAGE_REF.pattern)
    python_prefix: str = "/usr/local"
    # The repository the images are built from: the OCI `source` label.
    source: Annotated[str, AfterValidator(checked_place)] = Field(pattern=r"^https?://\S+$")
    variants: Annotated[dict[str, ImageVariant], BeforeValidator(named_entries("variants"))] = Field(min_length=1)

    @field_validator("repository")
    @classmethod
    def _repository_is_a_name(cls, value: str) -> str:
        if not IMAGE_REPOSITORY.fullmatch(value):  # [registry[:port]/]name[/name…], no tag
            raise ValueError("not an image repository name; write lowercase words such as 'ember' or "
                             "'registry.example.com/ember', without a tag")
        return value

    def base_for(self, variant: str) -> str:
        return self.variants[variant].base_image or self.base_image


class WheelVariants(Frozen):
    """PEP 825 wheel variants (`shipyard variants`): every CPU and CUDA wheel is also published as a
    variant of one package, its properties in `namespace`, which the provider plugin `plugin_api`
    (installed from the `provider` distribution) reports for a machine."""

    namespace: str = Field(pattern=r"^[a-z0-9_]+$")
    provider: str = Field(pattern=r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
    plugin_api: str = Field(pattern=r"^[A-Za-z_][\w.]*(:[A-Za-z_][\w.]*)?$")


class SupplyChain(Frozen):
    """Signed provenance (shipyard.supply): where the Ed25519 signing key comes from, never the
    key itself, and the builder id the provenance names."""

    # A PEM (PKCS#8) private key file, relative to release.yaml, or an environment variable holding
    # the PEM text (a CI secret). The variable wins when it is set.
    signing_key_file: str | None = None
    signing_key_env: str | None = Field(default=None, pattern=ENV_NAME)
    # Signed into every provenance statement: a place, so checked like one (no credentials).
    builder_id: Annotated[str, AfterValidator(checked_place)] = Field(min_length=3)

    @model_validator(mode="after")
    def _names_a_key(self) -> SupplyChain:
        if not (self.signing_key_file or self.signing_key_env):
            raise ValueError("supply_chain needs signing_key_file (a PEM file, relative to release.yaml) or "
                             "signing_key_env (the name of the environment variable holding the PEM key)")
        if self.signing_key_file and "PRIVATE KEY" in self.signing_key_file:
            raise ValueError("signing_key_file holds a key, not a path; name the file the key is in")
        return self


def registry_base(url: str) -> tuple[str, str, str]:
    """(the API's scheme://host[:port], host[:port], the namespace its repositories are under) for a
    target url: `https://ghcr.io/acme` → ("https://ghcr.io", "ghcr.io", "acme")."""
    scheme, _, rest = url.rpartition("://")
    host, _, namespace = rest.strip("/").partition("/")
    if not scheme:
        scheme = "http" if _loopback(host) else "https"
    return f"{scheme}://{host}", host, namespace


def _loopback(host: str) -> bool:
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 or host.startswith("[") else host
    name = name.strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


# Every kind of place a target is (PublishTarget.route): its kinds, and the conda channel in a bucket.
ROUTES = frozenset((*get_args(PublishTarget.model_fields["kind"].annotation), S3_CONDA_ROUTE))
