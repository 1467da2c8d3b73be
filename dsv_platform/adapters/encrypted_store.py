"""An ObjectStore that encrypts every object it writes under the object's own key (crypto-erasure).

Manifests stay deterministic: an object is still addressed by the SHA-256 of
its PLAINTEXT. What is stored is ``nonce || AES-256-GCM(plaintext)`` with the
plaintext digest as associated data, in a separate ``sealed`` store (the plain
store rooted at ``<root>/encrypted``), under its ciphertext digest; the key
store maps the plaintext digest to its key and to that ciphertext object.

The nonce is derived from the key and the digest (HMAC-SHA256): a key encrypts
exactly one plaintext, so the derived nonce is never reused with another
message, and writers racing on one object produce identical ciphertext.

Reads decrypt (GCM authenticates the ciphertext and the digest it is bound to)
and the base class re-hashes the plaintext. A destroyed key raises
:class:`ObjectErasedError` (the reader answers REDACTED). Objects that were
never encrypted are read from the inner plain store, so one reader serves both.

Staged parts stay plaintext in the inner store's staging namespace until
``promote`` encrypts them; ``abandon`` removes them (the publisher abandons
every attempt it finishes). Encryption is in memory: one object at a time.
"""

from __future__ import annotations

import hashlib
import hmac
import io
from collections.abc import Iterator
from typing import TYPE_CHECKING, BinaryIO

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from dsv_platform.adapters.key_store import KeyStore
from dsv_platform.adapters.object_store import ObjectInfo, ObjectStore, StagedObject, StagingAttempt, check_digest
from dsv_platform.core.errors import ObjectErasedError, ObjectNotFoundError, ObjectStoreError, ObjectVerificationError

if TYPE_CHECKING:
    import pyarrow.fs as pafs


NONCE_BYTES = 12
TAG_BYTES = 16
SEALED_SUFFIX = "encrypted"


def nonce_for(key: bytes, digest: str) -> bytes:
    return hmac.new(key, b"dsv-object-nonce:" + digest.encode(), hashlib.sha256).digest()[:NONCE_BYTES]


def seal(key: bytes, digest: str, plaintext: bytes) -> bytes:
    """``nonce || AES-GCM(plaintext)`` bound to ``digest``."""
    nonce = nonce_for(key, digest)
    return nonce + AESGCM(key).encrypt(nonce, plaintext, digest.encode())


def unseal(key: bytes, digest: str, sealed: bytes) -> bytes:
    """The plaintext; InvalidTag if the key, the digest or the ciphertext is wrong."""
    return AESGCM(key).decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], digest.encode())


class EncryptingObjectStore(ObjectStore):
    """Writes encrypted objects (per-object keys); reads encrypted and plain ones (see the module docstring)."""

    def __init__(self, inner: ObjectStore, sealed: ObjectStore, keys: KeyStore) -> None:
        self.inner = inner
        self.sealed_store = sealed
        self.keys = keys

    @property
    def location(self) -> str:
        return self.inner.location

    # -- objects --------------------------------------------------------
    def _put(self, stream: BinaryIO) -> str:
        plaintext = stream.read()
        digest = hashlib.sha256(plaintext).hexdigest()
        key = self.keys.create(digest)
        sealed_digest = self.sealed_store.put(seal(key, digest, plaintext))
        if unseal(key, digest, self.sealed_store.get(sealed_digest)) != plaintext:
            raise ObjectVerificationError(f"object {digest}: the encrypted copy does not decrypt to what was written")
        self.keys.bind(digest, sealed_digest)
        return digest

    def is_encrypted(self, digest: str) -> bool:
        """True for an object stored encrypted (erased ones included)."""
        return self.keys.is_erased(digest) or self.keys.sealed(check_digest(digest)) is not None

    def _open_raw(self, digest: str) -> BinaryIO:
        key = self.keys.key(digest)  # raises ObjectErasedError for an erased object
        sealed_digest = self.keys.sealed(digest)
        if key is None or sealed_digest is None:
            return self.inner._open_raw(digest)
        try:
            data = self.sealed_store.get(sealed_digest)
        except ObjectVerificationError as exc:
            raise ObjectVerificationError(f"object {digest}: its ciphertext {sealed_digest} is corrupt") from exc
        try:
            return io.BytesIO(unseal(key, digest, data))
        except InvalidTag as exc:
            raise ObjectVerificationError(f"object {digest}: ciphertext {sealed_digest} does not authenticate under its key") from exc

    def exists(self, digest: str) -> bool:
        if self.keys.is_erased(digest):
            return False
        sealed_digest = self.keys.sealed(digest)
        if sealed_digest is not None and self.keys.key(digest) is not None:
            return self.sealed_store.exists(sealed_digest)
        return self.inner.exists(digest)

    def size(self, digest: str) -> int:
        sealed_digest = self.keys.sealed(digest)
        if sealed_digest is not None and not self.keys.is_erased(digest):
            return self.sealed_store.size(sealed_digest) - NONCE_BYTES - TAG_BYTES
        return self.inner.size(digest)

    def erase(self, digest: str) -> str | None:
        """Crypto-erase an encrypted object (destroy its key); return its ciphertext digest, or None if it was never encrypted."""
        sealed_digest = self.keys.sealed(digest)
        if sealed_digest is None and not self.keys.is_erased(digest):
            return None
        self.keys.destroy(digest)
        return sealed_digest

    def delete(self, digest: str) -> bool:
        """Remove an object: an encrypted one is crypto-erased and its ciphertext deleted; a plain one is deleted."""
        sealed_digest = self.keys.sealed(digest)
        existed = False
        if sealed_digest is not None:
            existed = self.keys.destroy(digest)
            self.sealed_store.delete(sealed_digest)
        return self.inner.delete(digest) or existed

    def iter_objects(self) -> Iterator[ObjectInfo]:
        found: dict[str, int] = {info.digest: info.size for info in self.inner.iter_objects()}
        for digest in self.keys.digests():
            sealed_digest = self.keys.sealed(digest)
            if sealed_digest is not None and self.sealed_store.exists(sealed_digest):
                found[digest] = self.sealed_store.size(sealed_digest) - NONCE_BYTES - TAG_BYTES
        for digest in sorted(found):
            yield ObjectInfo(digest, found[digest])

    def uri(self, digest: str) -> str:
        sealed_digest = self.keys.sealed(digest)
        return self.sealed_store.uri(sealed_digest) if sealed_digest else self.inner.uri(digest)

    def arrow_filesystem(self) -> pafs.FileSystem:
        return self.inner.arrow_filesystem()

    def arrow_path(self, digest: str) -> str:
        if self.is_encrypted(digest):
            raise ObjectStoreError(f"object {digest} is encrypted: read it with get()/open(), not through a pyarrow path")
        return self.inner.arrow_path(digest)

    # -- staging: plaintext in the inner store until promoted ------------
    def _stage(self, attempt_id: str, name: str, stream: BinaryIO) -> str:
        return self.inner.stage(attempt_id, name, stream)

    def open_staged(self, attempt_id: str, name: str) -> BinaryIO:
        return self.inner.open_staged(attempt_id, name)

    def list_staged(self, attempt_id: str) -> list[StagedObject]:
        return self.inner.list_staged(attempt_id)

    def delete_staged(self, attempt_id: str, name: str) -> bool:
        return self.inner.delete_staged(attempt_id, name)

    def promote(self, attempt_id: str, name: str) -> str:
        with self.inner.open_staged(attempt_id, name) as stream:
            return self._put(stream)

    def abandon(self, attempt_id: str) -> int:
        return self.inner.abandon(attempt_id)

    def list_staging(self) -> list[StagingAttempt]:
        return self.inner.list_staging()


__all__ = ["EncryptingObjectStore", "ObjectErasedError", "ObjectNotFoundError", "seal", "unseal"]
