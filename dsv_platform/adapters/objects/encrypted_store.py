"""An ObjectStore that encrypts every object it writes under the object's own key (crypto-erasure).

Objects stay addressed by the SHA-256 of their PLAINTEXT, so manifests stay deterministic;
destroying an object's key (privacy's ``erase``) makes every copy noise, while GC's
``delete`` is a plain, re-creatable removal. Staged parts are encrypted too. Objects are
written in fixed-size AES-GCM segments (envelope v2) and streamed both ways; v1 objects stay readable.

Details: docs/storage.md
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import os
import secrets
import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, BinaryIO, cast

from cryptography.exceptions import InvalidTag

from dsv_platform.adapters.objects import envelope
from dsv_platform.adapters.objects.envelope import HEAD_BYTES, SEGMENT_SIZE, V1_OVERHEAD
from dsv_platform.adapters.objects.key_store import KeyStore
from dsv_platform.adapters.objects.object_store import (
    CHUNK_SIZE,
    ChunkReader,
    ObjectInfo,
    ObjectStore,
    StagedObject,
    StagingAttempt,
    VerifyingReader,
    check_digest,
)
from dsv_platform.core.errors import ObjectErasedError, ObjectNotFoundError, ObjectStoreError, ObjectVerificationError

if TYPE_CHECKING:
    import pyarrow.fs as pafs


STAGED_MAGIC = b"DSV-SEALED-PART-1\n"
SEALED_SUFFIX = "encrypted"
_SPOOL_DIGEST = "0" * 64  # what a spool's throwaway key is bound to


def _chunks(stream: BinaryIO, size: int = CHUNK_SIZE) -> Iterator[bytes]:
    while chunk := stream.read(size):
        yield chunk


def _buffered(raw: io.RawIOBase) -> BinaryIO:
    return cast(BinaryIO, io.BufferedReader(raw, CHUNK_SIZE))


def open_envelope(key: bytes, digest: str, raw: BinaryIO, where: str) -> BinaryIO:
    """The plaintext of the envelope that ``raw`` streams: v2 decrypted one segment at a time, v1 (written before v2) whole."""
    try:
        head = envelope.read_exactly(raw, HEAD_BYTES)
        if not envelope.is_v1(key, digest, head):
            return cast(BinaryIO, ChunkReader(envelope.open_segments(key, digest, raw, head, where), on_close=raw.close))
        sealed = head + raw.read()
    except BaseException:
        raw.close()
        raise
    raw.close()
    try:
        return io.BytesIO(envelope.unseal(key, digest, sealed))
    except InvalidTag as exc:
        raise ObjectVerificationError(f"{where} does not authenticate under its key") from exc


def verified_envelope(key: bytes, digest: str, raw: BinaryIO, where: str) -> Iterator[bytes]:
    """The envelope bytes ``raw`` streams, passed on unchanged once each segment decrypts; at the end the plaintext must hash to ``digest``."""
    seen: list[bytes] = []

    class _Tee(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
            data = raw.read(len(buffer))
            buffer[: len(data)] = data
            seen.append(data)
            return len(data)

    h = hashlib.sha256()
    with open_envelope(key, digest, cast(BinaryIO, _Tee()), where) as plain:
        while chunk := plain.read(CHUNK_SIZE):
            h.update(chunk)
            yield b"".join(seen)
            seen.clear()
    if h.hexdigest() != digest:
        raise ObjectVerificationError(f"{where} decrypts to bytes that hash to {h.hexdigest()}")
    yield b"".join(seen)


class EncryptingObjectStore(ObjectStore):
    """Writes encrypted objects (per-object keys); reads encrypted and plain ones (see the module docstring)."""

    def __init__(
        self, inner: ObjectStore, sealed: ObjectStore, keys: KeyStore, *, segment_size: int = SEGMENT_SIZE, spool_dir: str | os.PathLike[str] | None = None
    ) -> None:
        self.inner = inner
        self.sealed_store = sealed
        self.keys = keys
        self.segment_size = segment_size
        self.spool_dir = None if spool_dir is None else os.fspath(spool_dir)
        """Where a stream that cannot be read twice is spooled, sealed under a throwaway key (None: the system's temporary folder)."""

    @property
    def location(self) -> str:
        return self.inner.location

    # -- objects --------------------------------------------------------
    @contextlib.contextmanager
    def _plaintext(self, stream: BinaryIO) -> Iterator[tuple[str, Callable[[], Iterable[bytes]]]]:
        """The digest of what remains in ``stream``, and a second pass over those bytes.

        A seekable stream is read twice; any other is spooled to a temporary file, sealed
        under a throwaway key that only this process holds, so no plaintext reaches the disk.
        """
        if getattr(stream, "seekable", lambda: False)():
            start = stream.tell()
            h = hashlib.sha256()
            for chunk in _chunks(stream, self.segment_size):
                h.update(chunk)
            digest = h.hexdigest()

            def again() -> Iterator[bytes]:  # re-hashed: raises before the last segment is sealed if the source changed
                stream.seek(start)
                second = hashlib.sha256()
                for chunk in _chunks(stream, self.segment_size):
                    second.update(chunk)
                    yield chunk
                if second.hexdigest() != digest:
                    raise ObjectStoreError(f"the source changed while it was stored (it hashed to {digest}, then to {second.hexdigest()}): nothing was stored")

            yield digest, again
            return
        key, h = secrets.token_bytes(32), hashlib.sha256()

        def hashed() -> Iterator[bytes]:
            for chunk in _chunks(stream, self.segment_size):
                h.update(chunk)
                yield chunk

        if self.spool_dir is not None:
            os.makedirs(self.spool_dir, mode=0o700, exist_ok=True)
        with tempfile.TemporaryFile(dir=self.spool_dir, prefix="dsv-spool-") as spool:
            for piece in envelope.seal_segments(key, _SPOOL_DIGEST, hashed(), self.segment_size):
                spool.write(piece)

            def unspool() -> Iterable[bytes]:
                spool.seek(0)
                return envelope.open_segments(key, _SPOOL_DIGEST, spool, spool.read(HEAD_BYTES), "spooled stream")

            yield h.hexdigest(), unspool

    def _put(self, stream: BinaryIO) -> str:
        with self._plaintext(stream) as (digest, chunks):
            key = self.keys.create(digest)
            # each segment is decrypted again before it is written: what is stored must read back
            sealed_digest = self.sealed_store.put_chunks(envelope.seal_segments(key, digest, chunks(), self.segment_size, check=True))
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
        # Not re-hashed on the way: GCM authenticates every segment, and open() re-hashes the plaintext.
        raw = self.sealed_store.open(sealed_digest, verify=False)
        return open_envelope(key, digest, raw, f"object {digest} (ciphertext {sealed_digest})")

    def exists(self, digest: str) -> bool:
        if self.keys.is_erased(digest):
            return False
        sealed_digest = self.keys.sealed(digest)
        if sealed_digest is not None and self.keys.key(digest) is not None:
            return self.sealed_store.exists(sealed_digest)
        return self.inner.exists(digest)

    def _sealed_size(self, digest: str, key: bytes, sealed_digest: str, stored: int) -> int:
        """The plaintext size of a ciphertext of ``stored`` bytes, from its envelope's header (one small read)."""
        head = self.sealed_store.read_head(sealed_digest, HEAD_BYTES)
        parsed = None if envelope.is_v1(key, digest, head) else envelope.parse_header(head)
        return max(0, stored - V1_OVERHEAD) if parsed is None else envelope.v2_plaintext_size(stored, parsed[0])

    def size(self, digest: str) -> int:
        sealed_digest = self.keys.sealed(digest)
        if sealed_digest is not None and not self.keys.is_erased(digest):
            key = self.keys.key(digest)
            if key is not None:
                return self._sealed_size(digest, key, sealed_digest, self.sealed_store.size(sealed_digest))
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
        stored = {info.digest: info.size for info in self.sealed_store.iter_objects()}
        for digest in self.keys.digests():
            sealed_digest = self.keys.sealed(digest)
            if sealed_digest is None or sealed_digest not in stored:
                continue
            try:
                key = self.keys.key(digest)
            except ObjectErasedError:  # erased since the listing
                continue
            if key is not None:
                found[digest] = self._sealed_size(digest, key, sealed_digest, stored[sealed_digest])
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
        with self._plaintext(stream) as (digest, chunks):
            key = self.keys.create(digest)  # ObjectErasedError for content a privacy deletion erased
            sealed = envelope.seal_segments(key, digest, chunks(), self.segment_size)
            with ChunkReader(itertools.chain([STAGED_MAGIC + digest.encode()], sealed)) as body:
                self.inner.stage(attempt_id, name, cast(BinaryIO, body))
        return digest

    def staged_digest(self, attempt_id: str, name: str) -> str | None:
        """The plaintext digest a sealed staged part names (its key's), None for a part staged in the clear."""
        with self.inner.open_staged(attempt_id, name) as stream:
            head = envelope.read_exactly(stream, len(STAGED_MAGIC) + 64)
        return head[len(STAGED_MAGIC) :].decode("ascii", "replace") if head.startswith(STAGED_MAGIC) else None

    def _open_part(self, attempt_id: str, name: str) -> tuple[BinaryIO, bytes | None, str]:
        """The inner staged stream after its header, and the key of a sealed part; for a clear part, a stream of all its bytes and None."""
        raw = self.inner.open_staged(attempt_id, name)
        where = f"staged part {name!r} of attempt {attempt_id}"
        try:
            head = envelope.read_exactly(raw, len(STAGED_MAGIC) + 64)
            if not head.startswith(STAGED_MAGIC):  # staged in the clear (before staging was encrypted)
                return _buffered(ChunkReader(itertools.chain([head], _chunks(raw)), on_close=raw.close)), None, where
            digest = check_digest(head[len(STAGED_MAGIC) :].decode("ascii", "replace"))
            key = self.keys.key(digest)  # raises ObjectErasedError once erased
            if key is None:
                raise ObjectVerificationError(f"{where}: no key for {digest}")
        except BaseException:
            raw.close()
            raise
        return raw, key, digest

    def open_staged(self, attempt_id: str, name: str) -> BinaryIO:
        raw, key, digest = self._open_part(attempt_id, name)
        if key is None:
            return raw
        where = f"staged part {name!r} of attempt {attempt_id}"
        return _buffered(VerifyingReader(open_envelope(key, digest, raw, where), digest, where))

    def list_staged(self, attempt_id: str) -> list[StagedObject]:
        return self.inner.list_staged(attempt_id)

    def delete_staged(self, attempt_id: str, name: str) -> bool:
        return self.inner.delete_staged(attempt_id, name)

    def promote(self, attempt_id: str, name: str) -> str:
        """Copy a sealed part's envelope into the sealed store as it is (same key, same ciphertext), checked segment by segment on the way."""
        raw, key, digest = self._open_part(attempt_id, name)
        with raw:
            if key is None:
                return self._put(raw)
            sealed_digest = self.sealed_store.put_chunks(verified_envelope(key, digest, raw, f"staged part {name!r} of attempt {attempt_id}"))
        self.keys.bind(digest, sealed_digest)
        return digest

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


__all__ = ["STAGED_MAGIC", "EncryptingObjectStore", "ObjectErasedError", "ObjectNotFoundError", "open_envelope", "verified_envelope"]
