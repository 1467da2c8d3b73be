"""Content-addressed, write-once object store: the interface and the logic every backend shares.

An object's key is the SHA-256 of its bytes, so a stored object can never change under a
reader: every put and every read re-hashes, and a key is never overwritten.
Staged parts belong to one build attempt until ``promote`` copies them into their address.

Details: docs/storage.md
"""

from __future__ import annotations

import abc
import contextlib
import hashlib
import io
import os
import re
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, BinaryIO, NamedTuple, cast

from dsv_platform.core.errors import (
    ObjectNotFoundError,
    ObjectStoreError,
    ObjectVerificationError,
)

if TYPE_CHECKING:
    import pyarrow.fs as pafs


CHUNK_SIZE = 8 * 1024 * 1024
OBJECTS_PREFIX = "objects/sha256/"
STAGING_PREFIX = "staging/"

Source = bytes | bytearray | memoryview | str | os.PathLike[str] | BinaryIO
"""What ``put`` and ``stage`` accept: bytes, a file path (``str`` is always a path), or a binary stream."""

_DIGEST = re.compile(r"[0-9a-f]{64}")
_ATTEMPT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class ObjectInfo(NamedTuple):
    digest: str
    size: int


@dataclass(frozen=True)
class StagedObject:
    name: str
    size: int
    last_modified: datetime


@dataclass(frozen=True)
class StagingAttempt:
    attempt_id: str
    last_modified: datetime
    object_count: int
    total_size: int


def is_digest(text: str) -> bool:
    """``text`` is a lowercase hex SHA-256 digest."""
    return _DIGEST.fullmatch(text) is not None


def check_digest(digest: str) -> str:
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise ObjectStoreError(f"not a lowercase hex SHA-256 digest: {digest!r}")
    return digest


def check_attempt(attempt_id: str) -> str:
    if not isinstance(attempt_id, str) or not _ATTEMPT.fullmatch(attempt_id):
        raise ObjectStoreError(f"bad staging attempt id {attempt_id!r}: use 1-128 of [A-Za-z0-9._-], not starting with '.', '_' or '-'")
    return attempt_id


def check_name(name: str) -> str:
    parts = name.split("/") if isinstance(name, str) else []
    if not parts or any(p in ("", ".", "..") for p in parts) or "\\" in name or "\x00" in name:
        raise ObjectStoreError(f"bad staged object name {name!r}: use a relative POSIX path without '.', '..' or empty parts")
    return name


def object_key(digest: str) -> str:
    """The object's key relative to the store root: ``objects/sha256/ab/cdef...``."""
    check_digest(digest)
    return f"{OBJECTS_PREFIX}{digest[:2]}/{digest[2:]}"


def digest_of_key(key: str) -> str | None:
    """The digest a relative key ``objects/sha256/ab/cdef...`` stands for, or None for other keys."""
    if not key.startswith(OBJECTS_PREFIX):
        return None
    shard, _, rest = key[len(OBJECTS_PREFIX) :].partition("/")
    digest = shard + rest
    return digest if len(shard) == 2 and _DIGEST.fullmatch(digest) else None


def hash_stream(stream: BinaryIO, sink: Callable[[bytes], object] | None = None) -> tuple[str, int]:
    """SHA-256 hex digest and length of what remains in ``stream``, read in chunks; each chunk goes to ``sink``."""
    h = hashlib.sha256()
    size = 0
    while chunk := stream.read(CHUNK_SIZE):
        h.update(chunk)
        size += len(chunk)
        if sink is not None:
            sink(chunk)
    return h.hexdigest(), size


def mismatch(digest: str, actual: str, where: str) -> ObjectVerificationError:
    return ObjectVerificationError(f"object {digest} at {where} hashes to {actual}: its bytes are corrupt")


class VerifyingReader(io.RawIOBase):
    """A read-only stream that hashes what passes through and raises at end of stream on a mismatch.

    Verification happens only when the reader reaches the end; a reader that
    stops early has read unverified bytes.
    """

    def __init__(self, raw: BinaryIO, digest: str, where: str) -> None:
        super().__init__()
        self._raw = raw
        self._digest = digest
        self._where = where
        self._hash = hashlib.sha256()
        self._checked = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self._raw.read(len(buffer))
        n = len(data)
        if n:
            buffer[:n] = data
            self._hash.update(data)
        elif len(buffer) and not self._checked:
            self._checked = True
            actual = self._hash.hexdigest()
            if actual != self._digest:
                raise mismatch(self._digest, actual, self._where)
        return n

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            super().close()


class ChunkReader(io.RawIOBase):
    """A read-only, non-seekable stream over an iterator of byte chunks (a chunk is handed on without a copy when it fits)."""

    def __init__(self, chunks: Iterable[bytes], on_close: Callable[[], object] | None = None) -> None:
        super().__init__()
        self._chunks = iter(chunks)
        self._chunk = b""
        self._pos = 0
        self._on_close = on_close

    def readable(self) -> bool:
        return True

    def _fill(self) -> bool:
        while self._pos >= len(self._chunk):
            chunk = next(self._chunks, None)
            if chunk is None:
                return False
            self._chunk, self._pos = bytes(chunk), 0
        return True

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            return self.readall()
        if size == 0 or not self._fill():
            return b""
        if self._pos == 0 and len(self._chunk) <= size:
            out, self._chunk = self._chunk, b""
            return out
        out = self._chunk[self._pos : self._pos + size]
        self._pos += len(out)
        return out

    def readall(self) -> bytes:
        parts = [self._chunk[self._pos :], *self._chunks]
        self._chunk, self._pos = b"", 0
        return b"".join(parts)

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            try:
                if self._on_close is not None:
                    self._on_close()
            finally:
                super().close()


def _open_source(source: Source) -> BinaryIO:
    if isinstance(source, bytes | bytearray | memoryview):
        return io.BytesIO(source)
    if isinstance(source, str | os.PathLike):
        try:
            return open(source, "rb")
        except OSError as exc:
            raise ObjectStoreError(f"cannot read {os.fspath(source)!r}: {exc}") from exc
    return source


class ObjectStore(abc.ABC):
    """A content-addressed, write-once object store with per-attempt staging (see the module docstring)."""

    @property
    @abc.abstractmethod
    def location(self) -> str:
        """The store root: a folder path or ``s3://bucket/prefix``."""

    # -- objects --------------------------------------------------------
    def put(self, source: Source) -> str:
        """Store bytes, a file (``str`` or path-like) or a binary stream; return its digest."""
        if isinstance(source, bytes | bytearray | memoryview | str | os.PathLike):
            with _open_source(source) as stream:
                return self._put(stream)
        return self._put(source)

    def put_file(self, path: str | os.PathLike[str]) -> str:
        """Store a file without reading it whole into memory; return its digest."""
        return self.put(path)

    def put_chunks(self, chunks: Iterable[bytes]) -> str:
        """Store the concatenation of byte chunks (e.g. a generator) without joining them; return its digest."""
        with ChunkReader(chunks) as stream:
            return self._put(cast(BinaryIO, stream))

    def get_file(self, digest: str, path: str | os.PathLike[str], *, verify: bool = True) -> int:
        """Write the object into ``path`` one chunk at a time; return its size.

        The bytes go to a temporary name beside ``path`` that replaces it only once the whole
        object has been read (and, with ``verify``, re-hashed): a failed read leaves no partial file.
        """
        target = os.fspath(path)
        partial = f"{target}.part-{uuid.uuid4().hex[:12]}"
        size = 0
        try:
            with self.open(digest, verify=verify) as stream, open(partial, "wb") as out:
                while chunk := stream.read(CHUNK_SIZE):
                    out.write(chunk)
                    size += len(chunk)
            os.replace(partial, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(partial)
            raise
        return size

    def get(self, digest: str, *, verify: bool = True) -> bytes:
        """The object's bytes, re-hashed unless ``verify`` is False."""
        with self.open(digest, verify=verify) as stream:
            out = io.BytesIO()
            while chunk := stream.read(CHUNK_SIZE):
                out.write(chunk)
            return out.getvalue()

    def open(self, digest: str, *, verify: bool = True) -> BinaryIO:
        """A streaming reader; with ``verify`` it raises at end of stream if the bytes do not hash to ``digest``."""
        raw = self._open_raw(check_digest(digest))
        if not verify:
            return raw
        return cast(BinaryIO, io.BufferedReader(VerifyingReader(raw, digest, self.uri(digest)), CHUNK_SIZE))

    def read_head(self, digest: str, n: int) -> bytes:
        """The object's first ``n`` bytes (fewer if it is shorter), unverified."""
        with self._open_raw(check_digest(digest)) as raw:
            return raw.read(n)

    def verify(self, digest: str) -> int:
        """Re-hash the stored object; return its size or raise ObjectVerificationError / ObjectNotFoundError."""
        with self._open_raw(check_digest(digest)) as raw:
            actual, size = hash_stream(raw)
        if actual != digest:
            raise mismatch(digest, actual, self.uri(digest))
        return size

    @abc.abstractmethod
    def _put(self, stream: BinaryIO) -> str: ...

    @abc.abstractmethod
    def _open_raw(self, digest: str) -> BinaryIO: ...

    @abc.abstractmethod
    def exists(self, digest: str) -> bool: ...

    @abc.abstractmethod
    def size(self, digest: str) -> int: ...

    @abc.abstractmethod
    def delete(self, digest: str) -> bool:
        """Remove an object (garbage collection only); True if it existed."""

    @abc.abstractmethod
    def iter_objects(self) -> Iterator[ObjectInfo]:
        """Every stored object as ``(digest, size)``, in digest order."""

    @abc.abstractmethod
    def uri(self, digest: str) -> str:
        """``file:///...`` or ``s3://bucket/key`` of the object."""

    @abc.abstractmethod
    def arrow_filesystem(self) -> pafs.FileSystem:
        """A pyarrow filesystem from which ``arrow_path(digest)`` can be read (e.g. by pyarrow.parquet)."""

    @abc.abstractmethod
    def arrow_path(self, digest: str) -> str: ...

    # -- staging --------------------------------------------------------
    def stage(self, attempt_id: str, name: str, source: Source) -> str:
        """Write (or rewrite) a part in an attempt's staging namespace; return the part's digest."""
        check_attempt(attempt_id)
        check_name(name)
        if isinstance(source, bytes | bytearray | memoryview | str | os.PathLike):
            with _open_source(source) as stream:
                return self._stage(attempt_id, name, stream)
        return self._stage(attempt_id, name, source)

    def get_staged(self, attempt_id: str, name: str) -> bytes:
        with self.open_staged(attempt_id, name) as stream:
            return stream.read()

    @abc.abstractmethod
    def _stage(self, attempt_id: str, name: str, stream: BinaryIO) -> str: ...

    @abc.abstractmethod
    def open_staged(self, attempt_id: str, name: str) -> BinaryIO: ...

    @abc.abstractmethod
    def list_staged(self, attempt_id: str) -> list[StagedObject]:
        """The attempt's parts, sorted by name (empty if the attempt has none)."""

    @abc.abstractmethod
    def delete_staged(self, attempt_id: str, name: str) -> bool: ...

    @abc.abstractmethod
    def promote(self, attempt_id: str, name: str) -> str:
        """Copy a staged part to its content address (same rules as ``put``); return its digest."""

    @abc.abstractmethod
    def abandon(self, attempt_id: str) -> int:
        """Delete an attempt's staging namespace; return how many parts were removed."""

    @abc.abstractmethod
    def list_staging(self) -> list[StagingAttempt]:
        """Every attempt with staged parts, sorted by id, with its latest modification time (UTC)."""


__all__ = [
    "CHUNK_SIZE",
    "ChunkReader",
    "ObjectInfo",
    "ObjectNotFoundError",
    "ObjectStore",
    "Source",
    "StagedObject",
    "StagingAttempt",
    "check_digest",
    "digest_of_key",
    "hash_stream",
    "object_key",
]
