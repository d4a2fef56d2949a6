"""The Ed25519 key that signs provenance: made by `shipyard keygen`, found where release.yaml's
`supply_chain` says (a PEM file, or an environment variable holding the PEM text), never printed."""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from securesystemslib.signer import CryptoSigner, SSlibKey

from shipyard.errors import KEYGEN_FIX, InputError, SigningKeyError
from shipyard.plumbing.input_files import folder_problem, read_input_bytes
from shipyard.release.destinations import SupplyChain


def _key_bytes(path: Path, missing_fix: str) -> bytes:
    try:
        return read_input_bytes(path, limit="key", missing_fix=missing_fix)
    except InputError as exc:
        raise SigningKeyError(str(path), exc.issue.message, exc.issue.fix) from None


def public_key_path(private_key: Path) -> Path:
    return private_key.with_name(private_key.name.removesuffix(".pem") + ".pub.pem")


def generate_key(private_key: Path, *, overwrite: bool = False) -> tuple[Path, Path, bool]:
    """Write an Ed25519 key pair (PKCS#8 PEM, mode 0600; public key beside it, `.pub.pem`).
    Returns (private, public, made): an existing key is kept unless `overwrite`."""
    public = public_key_path(private_key)
    for path in (private_key, public):
        problem = "is a directory, not a file" if path.is_dir() else folder_problem(path.parent)
        if problem == "is a file, not a folder":
            problem = f"{path.parent} {problem}"
        if problem:
            raise SigningKeyError(str(path), problem, "pass --out with a key file's path (its folder is made when "
                                                      "missing), or fix supply_chain.signing_key_file")
    if private_key.exists() and not overwrite:
        if not public.exists():
            existing = _read_private(_key_bytes(private_key, KEYGEN_FIX), str(private_key))
            public.write_bytes(_public_pem(existing.public_key()))
        return private_key, public, False
    key = Ed25519PrivateKey.generate()
    private_key.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(private_key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()))
    public.write_bytes(_public_pem(key.public_key()))
    return private_key, public, True


def _public_pem(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def _pem_text(pem: bytes, where: str, fix: str = KEYGEN_FIX) -> bytes:
    """`pem` once it is ASCII text, as PEM is: the loaders skip a NUL or other bytes around the
    block, so a damaged or binary file would be taken as a key."""
    bad = next((at for at, byte in enumerate(pem) if not (32 <= byte < 127 or byte in (9, 10, 13))), None)
    if bad is not None:  # its offset only: the bytes are the key's
        raise SigningKeyError(where, f"is not PEM text (a byte that is not printable ASCII at offset {bad})", fix)
    return pem


def _read_private(pem: bytes, where: str) -> Ed25519PrivateKey:
    pem = _pem_text(pem, where)
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:  # never quote the bytes: they are the key
        raise SigningKeyError(where, f"not an unencrypted PEM private key ({type(exc).__name__})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningKeyError(where, f"a {type(key).__name__.removeprefix('_')}, not an Ed25519 key")
    return key


def signer_from_pem(pem: bytes, where: str) -> CryptoSigner:
    """A signer for an Ed25519 PEM private key; `where` names it in errors (never the key)."""
    return CryptoSigner(_read_private(pem, where))


def load_signer(settings: SupplyChain, root: Path) -> tuple[CryptoSigner, str]:
    """The signer release.yaml names, and where its key came from (a path or `$NAME`, never the key)."""
    # The variable first: on CI it carries the release key, whatever a checkout holds.
    if settings.signing_key_env and os.environ.get(settings.signing_key_env):
        where = f"${settings.signing_key_env}"
        return signer_from_pem(os.environ[settings.signing_key_env].encode(), where), where
    if settings.signing_key_file and (root / settings.signing_key_file).is_file():
        path = root / settings.signing_key_file
        return signer_from_pem(_key_bytes(path, KEYGEN_FIX), str(path)), str(path)
    named = " or ".join(x for x in (f"the file {settings.signing_key_file}" if settings.signing_key_file else "",
                                    f"${settings.signing_key_env}" if settings.signing_key_env else "") if x)
    fix = (f"run `shipyard keygen` (writes {settings.signing_key_file})" if settings.signing_key_file
           else f"export {settings.signing_key_env} with the PEM private key")
    raise SigningKeyError(str(root / "release.yaml"), f"no signing key in {named}", fix, key="supply_chain")


def load_public_key(path: Path) -> SSlibKey:
    """A public key (PEM, as `shipyard keygen` writes it) to verify signatures with."""
    fix = "pass the .pub.pem that `shipyard keygen` wrote beside the signing key"
    try:
        key = serialization.load_pem_public_key(_pem_text(_key_bytes(path, fix), str(path), fix))
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise SigningKeyError(str(path), f"not a PEM public key ({type(exc).__name__})", fix) from None
    if not isinstance(key, Ed25519PublicKey):
        raise SigningKeyError(str(path), f"a {type(key).__name__.removeprefix('_')}, not an Ed25519 public key", fix)
    return SSlibKey.from_crypto(key)
