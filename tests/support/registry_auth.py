"""What a registry test needs around Debian's docker-registry: a CA the test makes (and a server
certificate for 127.0.0.1 and localhost it signs), and a token service for distribution's
`auth.token` bearer flow.

The token service is a stand-in written for the tests (Docker Hub's and GitHub's cannot run
here), shaped as the distribution token authentication specification says: GET
`<realm>?service=…&scope=repository:<name>:<actions>` with basic auth answers JSON with `token`
and `access_token`, a JWT (RS256) whose header carries the signing certificate in `x5c`, whose
claims are `iss`, `sub`, `aud` (the service), `exp`, `nbf`, `iat`, `jti` and `access` (the
granted repository actions). The registry trusts it through `rootcertbundle`, which holds that
certificate. It grants every asked action to the one user and password it knows, and refuses
anyone else with a 401.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID
from support.publish_servers import QuietHandler, loopback_server

REGISTRY_LEEWAY = 60  # seconds distribution accepts a token past its `exp` (and before its `nbf`)


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _write_key(key: rsa.RSAPrivateKey, path: Path) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                       serialization.NoEncryption()))


@dataclass(frozen=True)
class Tls:
    ca: Path  # the CA's certificate (what a target's ca_file names)
    certificate: Path  # the server's, for 127.0.0.1 and localhost, signed by the CA
    key: Path


def make_tls(folder: Path) -> Tls:
    """A CA and a server certificate for 127.0.0.1/localhost it signs, as PEM files in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key, server_key = _key(), _key()
    ca = (x509.CertificateBuilder().subject_name(_name("shipyard test CA")).issuer_name(_name("shipyard test CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    server = (x509.CertificateBuilder().subject_name(_name("127.0.0.1")).issuer_name(ca.subject)
              .public_key(server_key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
              .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                          x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                             critical=False)
              .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
              .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
              .sign(ca_key, hashes.SHA256()))
    tls = Tls(folder / "ca.crt", folder / "server.crt", folder / "server.key")
    tls.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    tls.certificate.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    _write_key(server_key, tls.key)
    return tls


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class TokenService:
    """The stand-in token service (see the module's docstring), listening on 127.0.0.1."""

    user: str
    password: str
    service: str
    issuer: str
    rootcertbundle: Path  # the signing certificate, which the registry's auth.token trusts
    realm: str = ""
    issued: list[str] = field(default_factory=list)  # every token handed out, for the tests' secret greps
    refused: int = 0
    # Seconds the registry accepts a token for (None: 300 s of `exp`); a test may change it between
    # publishes. Set, `exp` is moved back by the registry's leeway, so a token really expires then.
    lifetime: int | None = None

    def __post_init__(self) -> None:
        self._key = _key()
        now = datetime.datetime.now(datetime.UTC)
        cert = (x509.CertificateBuilder().subject_name(_name("shipyard test token signer"))
                .issuer_name(_name("shipyard test token signer")).public_key(self._key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .sign(self._key, hashes.SHA256()))
        self.rootcertbundle.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self._x5c = base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()

    def token(self, scopes: list[str], lifetime: int | None = None) -> str:
        """A JWT granting each `repository:<name>:<actions>` of `scopes`, signed RS256, x5c in its header,
        accepted for `lifetime` seconds (default: the service's `lifetime`)."""
        access = []
        for scope in scopes:
            kind, _, rest = scope.partition(":")
            name, _, actions = rest.rpartition(":")
            access.append({"type": kind, "name": name, "actions": [a for a in actions.split(",") if a]})
        now = int(time.time())
        header = {"typ": "JWT", "alg": "RS256", "x5c": [self._x5c]}
        lifetime = self.lifetime if lifetime is None else lifetime
        # distribution's token check adds a leeway of 60 s to `exp` (token.go, Leeway): a token that must
        # stop working after `lifetime` seconds states an `exp` that much earlier.
        exp = now + 300 if lifetime is None else now + lifetime - REGISTRY_LEEWAY
        claims = {"iss": self.issuer, "sub": self.user, "aud": self.service, "exp": exp, "nbf": now - 10,
                  "iat": now, "jti": secrets.token_hex(8), "access": access}
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        signature = self._key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        token = f"{signing_input}.{_b64(signature)}"
        self.issued.append(token)
        return token

    def authorized(self, header: str | None) -> bool:
        expected = "Basic " + base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        return header is not None and secrets.compare_digest(header, expected)


@contextmanager
def token_service(folder: Path, user: str, password: str, port: int) -> Iterator[TokenService]:
    """The stand-in token service on 127.0.0.1:`port` (plain HTTP on loopback), until the block ends."""
    folder.mkdir(parents=True, exist_ok=True)
    service = TokenService(user, password, "shipyard-test-registry", "shipyard-test-issuer",
                           folder / "token-signer.crt")

    class Handler(QuietHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            query = parse_qs(urlparse(self.path).query)
            if not service.authorized(self.headers.get("Authorization")) or query.get("service") != [service.service]:
                service.refused += 1
                self.send_json(401, {"errors": [{"code": "UNAUTHORIZED", "message": "wrong user or password"}]})
                return
            token = service.token(query.get("scope", []))
            self.send_json(200, {"token": token, "access_token": token, "expires_in": service.lifetime or 300})

    service.realm = f"http://127.0.0.1:{port}/token"
    with loopback_server(Handler, port):
        yield service
