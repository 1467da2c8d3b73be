"""Identity key pairs in a key folder: names, fingerprints, writing and loading private keys (docs/trust.md)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from dsv_platform.bootstrap import Platform
from dsv_platform.core.errors import AccessDeniedError, ConfigurationError, FileAccessError

_NAME = re.compile(r"^[a-z][a-z0-9_.-]{0,63}\Z")


def fingerprint(public_key: bytes) -> str:
    return f"ed25519:sha256:{hashlib.sha256(public_key).hexdigest()[:32]}"


def check_identity_name(name: str) -> str:
    if not _NAME.match(name):
        raise ConfigurationError(f"identity name {name!r}: use 1-64 of a-z 0-9 _ . - starting with a letter")
    return name


def key_path(platform: Platform, name: str) -> Path:
    return platform.settings.identity_key_dir / f"{check_identity_name(name)}.key"


def raw_public(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def write_new_key(path: Path) -> None:
    """A fresh private key at ``path`` (mode 0600), written aside then linked: never a half-written key, never an overwrite."""
    pem = Ed25519PrivateKey.generate().private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".key-")
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, pem)
            os.fsync(fd)
            os.close(fd)
            with contextlib.suppress(FileExistsError):  # another process created it first: theirs is the key
                os.link(tmp, path)
        finally:
            os.unlink(tmp)
    except OSError as exc:
        raise FileAccessError(f"identity key {path}: cannot write ({exc.strerror})") from exc


def load_private_key(platform: Platform, name: str) -> Ed25519PrivateKey:
    """The private key of ``name`` from the key folder; a missing or unreadable key is ACCESS_DENIED naming the file."""
    return _load(key_path(platform, name), name)


def _load(path: Path, name: str) -> Ed25519PrivateKey:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise AccessDeniedError(f"identity {name!r}: no private key at {path} (DSV_KEY_DIR); this process cannot act as {name!r}") from None
    except OSError as exc:
        raise FileAccessError(f"identity key {path}: cannot read ({exc.strerror})") from exc
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except ValueError as exc:
        raise AccessDeniedError(f"identity {name!r}: {path} is not a PEM Ed25519 private key") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise AccessDeniedError(f"identity {name!r}: {path} is not an Ed25519 private key")
    return key


def keygen(key_dir: Path, name: str) -> tuple[bytes, Path, bool]:
    """The holder's side: a key pair for ``name`` in its own ``key_dir`` (kept when present); the raw public key, the path, whether new.

    Nothing touches a registry: the holder hands the public key (and its fingerprint) to an operator, who registers it
    (``dsv identity create NAME --public-key FILE``). The private key never leaves ``key_dir``.
    """
    path = key_dir / f"{check_identity_name(name)}.key"
    created = not path.exists()
    if created:
        write_new_key(path)
    return raw_public(_load(path, name)), path, created


def parse_public_key(text: str, *, what: str) -> bytes:
    """A raw Ed25519 public key from ``<64 hex>`` or ``ed25519:<64 hex>`` (what ``dsv identity keygen`` prints); else a ConfigurationError naming ``what``."""
    value = text.strip().removeprefix("ed25519:")
    try:
        key = bytes.fromhex(value)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise ConfigurationError(f"{what}: not an Ed25519 public key (64 hex digits, optionally prefixed ed25519:): {text.strip()[:80]!r}")
    return key
