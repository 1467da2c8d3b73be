"""The per-object key store that makes crypto-erasure possible.

Every subject-bearing object is encrypted under its own 256-bit key (see
:mod:`encrypted_store`). Destroying that key is the erasure: the ciphertext may
stay in the object store and in every backup of it, and is noise without the key.

Details: docs/storage.md
"""

from __future__ import annotations

import abc
import json
import os
import secrets
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from dsv_platform.adapters.objects.object_store import check_digest, is_digest
from dsv_platform.core.errors import ObjectConflictError, ObjectErasedError, ObjectStoreError, RedactionNotReconciledError

KEY_BYTES = 32
KeyBinding = tuple[str, str | None, datetime | None]
"""(digest, ciphertext digest or None, when its key or binding was made, if known)."""


class KeyStore(abc.ABC):
    """Per-object keys, their erasure, the redaction-generation watermark, and the (keyed) subject hash of each deletion applied."""

    @abc.abstractmethod
    def create(self, digest: str) -> bytes:
        """The object's key, made now if absent (idempotent, safe under concurrent writers); refuses an erased digest."""

    @abc.abstractmethod
    def key(self, digest: str) -> bytes | None:
        """The object's key; None if the object was never encrypted; ObjectErasedError if it was erased."""

    @abc.abstractmethod
    def bind(self, digest: str, sealed_digest: str) -> None:
        """Record which ciphertext object holds ``digest``."""

    @abc.abstractmethod
    def sealed(self, digest: str) -> str | None: ...

    @abc.abstractmethod
    def destroy(self, digest: str) -> bool:
        """Crypto-erase: destroy the key and leave a tombstone; True if a key was destroyed now."""

    @abc.abstractmethod
    def forget(self, digest: str) -> bool:
        """Plain deletion (GC): remove the key and its ciphertext binding, leave NO tombstone; the digest may be stored again.

        True if a key was removed. An erased digest keeps its tombstone (erasure is privacy's, never undone here).
        """

    @abc.abstractmethod
    def is_erased(self, digest: str) -> bool: ...

    @abc.abstractmethod
    def digests(self) -> Iterator[str]:
        """Every digest that has a live key, sorted."""

    @abc.abstractmethod
    def generation(self) -> int:
        """The redaction generation this key store has applied (0 if never)."""

    @abc.abstractmethod
    def set_generation(self, generation: int) -> None:
        """Advance the watermark; lowering it is refused."""

    @abc.abstractmethod
    def salt(self) -> bytes:
        """The secret salt of subject-key hashes (created once)."""

    @abc.abstractmethod
    def record_deletion(self, generation: int, request_id: str, subject_key_hash: str) -> None:
        """Keep the (keyed) subject hash of the deletion at ``generation``, so a registry restored from before it is reconciled (idempotent)."""

    @abc.abstractmethod
    def deletions(self) -> list[tuple[int, str, str]]:
        """Every recorded deletion as (generation, request id, subject hash), by generation."""

    @abc.abstractmethod
    def erased(self) -> list[str]:
        """Every digest with an erasure tombstone, sorted."""

    @abc.abstractmethod
    def stored_salt(self) -> bytes | None:
        """The salt if it was made, without making it (a read that never writes: `dsv keys copy`'s source)."""

    @abc.abstractmethod
    def import_entry(
        self, digest: str, *, key: bytes | None = None, sealed: str | None = None, erased: bool = False, made: datetime | None = None
    ) -> bool:
        """Write one digest's entry copied from another key store (`dsv keys copy`); True if anything was written now.

        ``made``: when the source made the entry (its ``bindings`` time), kept as this entry's time so the integrity scan's
        safety window counts from the entry's creation, not from the copy. Idempotent: what this store already holds
        identically is kept. Fail closed: a different key or binding already here, or a key for a digest erased on either
        side, is ObjectConflictError (or ObjectErasedError) and nothing of it is written.
        """

    @abc.abstractmethod
    def import_salt(self, salt: bytes) -> bool:
        """Take another store's salt (subject hashes depend on it); True if written now, a no-op when identical.

        A different salt that may have been used here is ObjectConflictError.
        """

    def bindings(self) -> list[KeyBinding]:
        """Every entry with a live key or a ciphertext binding, sorted by digest (the integrity scan's view)."""
        return [(d, self.sealed(d), None) for d in self.digests()]

    def close(self) -> None:  # noqa: B027 (a hook: the local store holds nothing open)
        """Release what the store holds open (a database connection pool)."""

    def require_generation(self, registry_generation: int) -> None:
        """Refuse reads when this store and the registry disagree on the redaction generation (a restored backup)."""
        mine = self.generation()
        if mine < registry_generation:
            raise RedactionNotReconciledError(
                f"the key store has applied redaction generation {mine} but the registry is at {registry_generation}: "
                "an older key/object store backup was restored; run `dsv privacy reconcile` before reading"
            )
        if mine > registry_generation:
            raise RedactionNotReconciledError(
                f"the registry is at redaction generation {registry_generation} but the key store has applied {mine}: "
                "an older registry backup was restored; run `dsv privacy reconcile` before reading"
            )


def check_import(digest: str, key: bytes | None, sealed: str | None, erased: bool, where: object) -> None:
    """An entry to import is well formed: a key of KEY_BYTES non-zero bytes, never with an erasure; a ciphertext digest."""
    check_digest(digest)
    if sealed is not None:
        check_digest(sealed)
    if key is not None and (erased or len(key) != KEY_BYTES or key == bytes(len(key))):
        why = "erased" if erased else f"{len(key)} bytes" if len(key) != KEY_BYTES else "a destroyed (zero) key"
        raise ObjectStoreError(f"refusing to import a key for {digest} into the key store {where}: {why}")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalKeyStore(KeyStore):
    """Key files in a local folder (see the module docstring)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        for sub in ("keys", "erased", "tmp"):
            (self.root / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.root, 0o700)

    def _key_path(self, digest: str, suffix: str) -> Path:
        check_digest(digest)
        return self.root / "keys" / digest[:2] / f"{digest[2:]}{suffix}"

    def _tombstone(self, digest: str) -> Path:
        check_digest(digest)
        return self.root / "erased" / digest[:2] / digest[2:]

    def _tmp(self, data: bytes) -> Path:
        fd, name = tempfile.mkstemp(dir=self.root / "tmp")
        with open(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(name, 0o600)
        return Path(name)

    def _replace(self, path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.replace(self._tmp(data), path)
        _fsync_dir(path.parent)

    def _create_if_absent(self, path: Path, data: bytes) -> bytes:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self._tmp(data)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return path.read_bytes()
        finally:
            tmp.unlink(missing_ok=True)
        _fsync_dir(path.parent)
        return data

    def create(self, digest: str) -> bytes:
        if self.is_erased(digest):
            raise ObjectErasedError(f"object {digest} was crypto-erased; its bytes may not be stored again")
        key = self._create_if_absent(self._key_path(digest, ".key"), secrets.token_bytes(KEY_BYTES))
        if len(key) != KEY_BYTES:
            raise ObjectStoreError(f"key file of {digest} in {self.root} is damaged ({len(key)} bytes, expected {KEY_BYTES})")
        return key

    def key(self, digest: str) -> bytes | None:
        path = self._key_path(digest, ".key")
        try:
            key = path.read_bytes()
        except FileNotFoundError:
            if self.is_erased(digest):
                raise ObjectErasedError(f"object {digest} was crypto-erased (its key in {self.root} is destroyed)") from None
            return None
        if self.is_erased(digest) or key == bytes(len(key)):
            raise ObjectErasedError(f"object {digest} was crypto-erased (its key in {self.root} is destroyed)")
        return key

    def bind(self, digest: str, sealed_digest: str) -> None:
        check_digest(sealed_digest)
        path = self._key_path(digest, ".sealed")
        if path.exists() and path.read_text() == sealed_digest:
            return
        self._replace(path, sealed_digest.encode())

    def sealed(self, digest: str) -> str | None:
        try:
            return self._key_path(digest, ".sealed").read_text() or None
        except FileNotFoundError:
            return None

    def destroy(self, digest: str) -> bool:
        path = self._key_path(digest, ".key")
        destroyed = False
        if path.exists():
            os.chmod(path, 0o600)
            with open(path, "r+b") as out:
                out.write(bytes(KEY_BYTES))
                out.flush()
                os.fsync(out.fileno())
            path.unlink()
            _fsync_dir(path.parent)
            destroyed = True
        tomb = self._tombstone(digest)
        if not tomb.exists():
            self._replace(tomb, b"")
        return destroyed

    def forget(self, digest: str) -> bool:
        removed = False
        for suffix in (".key", ".sealed"):  # the key first: a crash in between leaves a binding without a key, read as a plain object
            path = self._key_path(digest, suffix)
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            removed = removed or suffix == ".key"
            _fsync_dir(path.parent)
        return removed

    def is_erased(self, digest: str) -> bool:
        return self._tombstone(digest).exists()

    def digests(self) -> Iterator[str]:
        for path in sorted((self.root / "keys").glob("*/*.key")):
            yield path.parent.name + path.name[: -len(".key")]

    def erased(self) -> list[str]:
        return sorted(p.parent.name + p.name for p in (self.root / "erased").glob("*/*") if is_digest(p.parent.name + p.name))

    def stored_salt(self) -> bytes | None:
        try:
            return (self.root / "salt").read_bytes()
        except FileNotFoundError:
            return None

    def import_entry(
        self, digest: str, *, key: bytes | None = None, sealed: str | None = None, erased: bool = False, made: datetime | None = None
    ) -> bool:
        check_import(digest, key, sealed, erased, self.root)
        key_path, held = self._key_path(digest, ".key"), self.sealed(digest)
        if erased and key_path.exists():
            raise ObjectConflictError(f"object {digest} is erased in the source but has a key in the key store {self.root}: refused")
        if key is not None and self.is_erased(digest):
            raise ObjectErasedError(f"object {digest} was crypto-erased in the key store {self.root}: its key is not imported")
        if sealed is not None and held not in (None, sealed):
            raise ObjectConflictError(f"object {digest} is bound to ciphertext {held} in the key store {self.root}, not {sealed}: refused")
        if key is not None and key_path.exists() and key_path.read_bytes() != key:
            raise ObjectConflictError(f"object {digest} has a different key in the key store {self.root}: refused")
        wrote = False
        if erased and not self.is_erased(digest):
            self._replace(self._tombstone(digest), b"")
            wrote = True
        if key is not None and not key_path.exists():
            if self._create_if_absent(key_path, key) != key:  # a concurrent writer: nothing here may differ
                raise ObjectConflictError(f"object {digest} has a different key in the key store {self.root}: refused")
            wrote = True
        if sealed is not None and held is None:
            self._replace(self._key_path(digest, ".sealed"), sealed.encode())
            wrote = True
        if wrote and made is not None:  # bindings() reads an entry's time from its files' modification times
            for path in self.root.glob(f"keys/{digest[:2]}/{digest[2:]}.*"):
                os.utime(path, (made.timestamp(), made.timestamp()))
        return wrote

    def import_salt(self, salt: bytes) -> bool:
        if len(salt) != KEY_BYTES:
            raise ObjectStoreError(f"refusing to import a salt of {len(salt)} bytes into the key store {self.root} (expected {KEY_BYTES})")
        held = self.stored_salt()
        if held is None:
            held = self._create_if_absent(self.root / "salt", salt)
            if held == salt:
                return True
        if held != salt:
            raise ObjectConflictError(f"the key store {self.root} already has a different salt (its subject hashes depend on it): refused")
        return False

    def bindings(self) -> list[KeyBinding]:
        """Live keys and every binding file (an erased key's too), each with its file's modification time."""
        times: dict[str, datetime] = {}
        for path in sorted(self.root.glob("keys/*/*")):
            digest = path.parent.name + path.name.split(".", 1)[0]
            times[digest] = min(times.get(digest, datetime.max.replace(tzinfo=UTC)), datetime.fromtimestamp(path.stat().st_mtime, UTC))
        return [(d, self.sealed(d), times.get(d)) for d in sorted(set(self.digests()) | set(times)) if is_digest(d)]

    def generation(self) -> int:
        try:
            return int((self.root / "generation").read_text().strip() or 0)
        except FileNotFoundError:
            return 0

    def set_generation(self, generation: int) -> None:
        current = self.generation()
        if generation < current:
            raise ObjectStoreError(f"refusing to lower the key store's redaction generation from {current} to {generation}")
        if generation != current:
            self._replace(self.root / "generation", f"{generation}\n".encode())

    def salt(self) -> bytes:
        return self._create_if_absent(self.root / "salt", secrets.token_bytes(KEY_BYTES))

    def record_deletion(self, generation: int, request_id: str, subject_key_hash: str) -> None:
        doc = json.dumps({"generation": generation, "request_id": request_id, "subject_key_hash": subject_key_hash}, sort_keys=True)
        self._create_if_absent(self.root / "deletions" / f"{generation:012d}.json", doc.encode())

    def deletions(self) -> list[tuple[int, str, str]]:
        out = []
        for path in sorted((self.root / "deletions").glob("*.json")):
            try:
                doc = json.loads(path.read_text())
                out.append((int(doc["generation"]), str(doc["request_id"]), str(doc["subject_key_hash"])))
            except (ValueError, KeyError, TypeError) as exc:
                raise ObjectStoreError(f"deletion record {path} in the key store is damaged ({exc}); restore it from a backup of the key store") from exc
        return out


__all__ = ["KEY_BYTES", "KeyBinding", "KeyStore", "LocalKeyStore", "check_import"]
