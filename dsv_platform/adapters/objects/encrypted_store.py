"""An ObjectStore that encrypts every object it writes under the object's own key (crypto-erasure).

Objects stay addressed by the SHA-256 of their PLAINTEXT, so manifests stay deterministic;
destroying an object's key (privacy's ``erase``) makes every copy noise, while GC's
``delete`` is a plain, re-creatable removal. Staged parts are encrypted too.

Details: docs/storage.md
"""

from __future__ import annotations

import hashlib
import hmac
import io
from collections.abc import Iterator
from typing import TYPE_CHECKING, BinaryIO

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from dsv_platform.adapters.objects.key_store import KeyStore
from dsv_platform.adapters.objects.object_store import ObjectInfo, ObjectStore, StagedObject, StagingAttempt, check_digest
from dsv_platform.core.errors import ObjectErasedError, ObjectNotFoundError, ObjectStoreError, ObjectVerificationError

if TYPE_CHECKING:
    import pyarrow.fs as pafs


NONCE_BYTES = 12
TAG_BYTES = 16
STAGED_MAGIC = b"DSV-SEALED-PART-1\n"
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
        if sealed_digest is None and not self.keys.is_erased(digest) and self.keys.key(digest) is None:
            return None  # never encrypted (a key without a ciphertext is a staged part's: destroyed too)
        self.keys.destroy(digest)
        return sealed_digest

    def delete(self, digest: str) -> bool:
        """Plain, re-creatable delete (GC): remove the ciphertext, then the key and its binding; NO tombstone.

        A later ``put`` of the same bytes stores them again. Use :meth:`erase` for privacy
        (the key is destroyed and a tombstone refuses the bytes forever). An erased digest
        keeps its tombstone. The ciphertext goes first: a crash in between leaves a key
        without ciphertext (the object is absent; a later ``put`` reuses the key).
        """
        sealed_digest = self.keys.sealed(digest)
        existed = False
        if sealed_digest is not None:
            existed = self.sealed_store.delete(sealed_digest)
            self.keys.forget(digest)
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

    # -- staging: sealed under the key of the part's plaintext digest ----
    def _stage(self, attempt_id: str, name: str, stream: BinaryIO) -> str:
        plaintext = stream.read()
        digest = hashlib.sha256(plaintext).hexdigest()
        key = self.keys.create(digest)  # ObjectErasedError for content a privacy deletion erased
        self.inner.stage(attempt_id, name, STAGED_MAGIC + digest.encode() + seal(key, digest, plaintext))
        return digest

    def staged_digest(self, attempt_id: str, name: str) -> str | None:
        """The plaintext digest a sealed staged part names (its key's), None for a part staged in the clear."""
        with self.inner.open_staged(attempt_id, name) as stream:
            head = stream.read(len(STAGED_MAGIC) + 64)
        return head[len(STAGED_MAGIC) :].decode("ascii", "replace") if head.startswith(STAGED_MAGIC) else None

    def open_staged(self, attempt_id: str, name: str) -> BinaryIO:
        data = self.inner.get_staged(attempt_id, name)
        if not data.startswith(STAGED_MAGIC):
            return io.BytesIO(data)  # staged in the clear (before staging was encrypted)
        start = len(STAGED_MAGIC) + 64
        digest = check_digest(data[len(STAGED_MAGIC) : start].decode("ascii", "replace"))
        key = self.keys.key(digest)  # raises ObjectErasedError once erased
        if key is None:
            raise ObjectVerificationError(f"staged part {name!r} of attempt {attempt_id}: no key for {digest}")
        try:
            return io.BytesIO(unseal(key, digest, data[start:]))
        except InvalidTag as exc:
            raise ObjectVerificationError(f"staged part {name!r} of attempt {attempt_id} does not authenticate under its key") from exc

    def list_staged(self, attempt_id: str) -> list[StagedObject]:
        return self.inner.list_staged(attempt_id)

    def delete_staged(self, attempt_id: str, name: str) -> bool:
        return self.inner.delete_staged(attempt_id, name)

    def promote(self, attempt_id: str, name: str) -> str:
        with self.open_staged(attempt_id, name) as stream:
            return self._put(stream)

    def abandon(self, attempt_id: str) -> int:
        """Remove an attempt, and the keys of its parts that were never promoted (no ciphertext bound): nothing else uses them."""
        unbound = []
        for part in self.inner.list_staged(attempt_id):
            digest = self.staged_digest(attempt_id, part.name)
            if digest is not None and self.keys.sealed(digest) is None and not self.keys.is_erased(digest):
                unbound.append(digest)
        count = self.inner.abandon(attempt_id)
        for digest in unbound:  # after the parts: a crash in between leaves a key the next scan reports, never a part without its key
            self.keys.forget(digest)
        return count

    def list_staging(self) -> list[StagingAttempt]:
        return self.inner.list_staging()


__all__ = ["EncryptingObjectStore", "ObjectErasedError", "ObjectNotFoundError", "seal", "unseal"]
