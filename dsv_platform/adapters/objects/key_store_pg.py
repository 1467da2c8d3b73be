"""The per-object key store in a PostgreSQL database of its own (``DSV_KEY_STORE=postgresql+psycopg2://...``).

The local key store's contract (:class:`~dsv_platform.adapters.objects.key_store.KeyStore`) for production: keys on
their own connection, apart from the object store, the warehouse, the registry and the home's shared volume.
Writes of one digest are serialized by an advisory lock; crypto-erasure DELETEs the key's row, leaves a tombstone
and VACUUMs the keys table (the key outlives that only in the database's WAL and backups).

Details: docs/storage.md
"""

from __future__ import annotations

import datetime as dt
import secrets
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import BigInteger, Column, Integer, LargeBinary, MetaData, String, Table, Text, delete, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.engine import Connection, Engine

from dsv_platform.adapters.objects.key_store import KEY_BYTES, KeyBinding, KeyStore, check_import
from dsv_platform.adapters.objects.object_store import check_digest
from dsv_platform.adapters.registry.engine import create_postgres_engine
from dsv_platform.adapters.registry.schema import UtcDateTime
from dsv_platform.core.errors import ObjectConflictError, ObjectErasedError, ObjectStoreError, mask_url

SETTING = "DSV_KEY_STORE"
_LOCK_CLASS = 0x64736B73  # "dsks"
_SCHEMA_LOCK = 0

_m = MetaData()
keys = Table(
    "dsv_object_keys",
    _m,
    Column("digest", String(64), primary_key=True),
    Column("key", LargeBinary, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
)
binds = Table(
    "dsv_key_bindings",
    _m,
    Column("digest", String(64), primary_key=True),
    Column("sealed", String(64), nullable=False),
    Column("bound_at", UtcDateTime, nullable=False),
)
tombstones = Table("dsv_key_tombstones", _m, Column("digest", String(64), primary_key=True), Column("erased_at", UtcDateTime, nullable=False))
state = Table(
    "dsv_key_store_state",
    _m,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("generation", BigInteger, nullable=False),
    Column("salt", LargeBinary, nullable=False),
)
deletions = Table(
    "dsv_key_deletions",
    _m,
    Column("generation", BigInteger, primary_key=True, autoincrement=False),
    Column("request_id", Text, nullable=False),
    Column("subject_key_hash", String(64), nullable=False),
    Column("recorded_at", UtcDateTime, nullable=False),
)


def _lock_key(digest: str) -> int:
    value = zlib.crc32(digest.encode())
    return value - (1 << 32) if value >= 1 << 31 else value


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class PostgresKeyStore(KeyStore):
    """Keys in PostgreSQL tables on a connection of their own (see the module docstring)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine: Engine = create_postgres_engine(url, setting=SETTING, what="key store")
        with self._tx(_SCHEMA_LOCK) as conn:
            _m.create_all(conn, checkfirst=True)
            conn.execute(insert(state).values(id=1, generation=0, salt=secrets.token_bytes(KEY_BYTES)).on_conflict_do_nothing())

    def __repr__(self) -> str:
        return f"PostgresKeyStore({mask_url(self.url)!r})"

    @property
    def location(self) -> str:
        return mask_url(self.url)

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def _tx(self, lock: str | int | None = None) -> Iterator[Connection]:
        with self.engine.begin() as conn:
            if lock is not None:
                conn.execute(select(func.pg_advisory_xact_lock(_LOCK_CLASS, lock if isinstance(lock, int) else _lock_key(lock))))
            yield conn

    @staticmethod
    def _erased(conn: Connection, digest: str) -> bool:
        return conn.execute(select(tombstones.c.digest).where(tombstones.c.digest == digest)).first() is not None

    def create(self, digest: str) -> bytes:
        check_digest(digest)
        with self._tx(digest) as conn:
            if self._erased(conn, digest):
                raise ObjectErasedError(f"object {digest} was crypto-erased; its bytes may not be stored again")
            conn.execute(insert(keys).values(digest=digest, key=secrets.token_bytes(KEY_BYTES), created_at=_now()).on_conflict_do_nothing())
            key = bytes(conn.execute(select(keys.c.key).where(keys.c.digest == digest)).scalar_one())
        if len(key) != KEY_BYTES:
            raise ObjectStoreError(f"key of {digest} in the key store {self.location} is damaged ({len(key)} bytes, expected {KEY_BYTES})")
        return key

    def key(self, digest: str) -> bytes | None:
        check_digest(digest)
        with self._tx() as conn:
            erased = self._erased(conn, digest)
            found = conn.execute(select(keys.c.key).where(keys.c.digest == digest)).scalar()
        if erased or (found is not None and bytes(found) == bytes(len(found))):
            raise ObjectErasedError(f"object {digest} was crypto-erased (its key in the key store {self.location} is destroyed)")
        return None if found is None else bytes(found)

    def bind(self, digest: str, sealed_digest: str) -> None:
        check_digest(digest)
        check_digest(sealed_digest)
        with self._tx() as conn:
            stmt = insert(binds).values(digest=digest, sealed=sealed_digest, bound_at=_now())
            conn.execute(stmt.on_conflict_do_update(index_elements=[binds.c.digest], set_={"sealed": stmt.excluded.sealed}))

    def sealed(self, digest: str) -> str | None:
        check_digest(digest)
        with self._tx() as conn:
            found = conn.execute(select(binds.c.sealed).where(binds.c.digest == digest)).scalar()
        return None if found is None else str(found)

    def destroy(self, digest: str) -> bool:
        check_digest(digest)
        with self._tx(digest) as conn:
            conn.execute(insert(tombstones).values(digest=digest, erased_at=_now()).on_conflict_do_nothing())
            destroyed = conn.execute(delete(keys).where(keys.c.digest == digest)).rowcount > 0
        if destroyed:  # prune the deleted row now rather than at autovacuum's leisure
            with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.exec_driver_sql(f"VACUUM {keys.name}")
        return destroyed

    def forget(self, digest: str) -> bool:
        check_digest(digest)
        with self._tx(digest) as conn:  # the key first, as the local store does: a binding without a key reads as a plain object
            removed = conn.execute(delete(keys).where(keys.c.digest == digest)).rowcount > 0
            conn.execute(delete(binds).where(binds.c.digest == digest))
        return removed

    def is_erased(self, digest: str) -> bool:
        check_digest(digest)
        with self._tx() as conn:
            return self._erased(conn, digest)

    def digests(self) -> Iterator[str]:
        with self._tx() as conn:
            found = list(conn.execute(select(keys.c.digest).order_by(keys.c.digest)).scalars())
        yield from found

    def bindings(self) -> list[KeyBinding]:
        with self._tx() as conn:
            made = {str(r.digest): r.created_at for r in conn.execute(select(keys.c.digest, keys.c.created_at))}
            bound = {str(r.digest): (str(r.sealed), r.bound_at) for r in conn.execute(select(binds))}
        out = []
        for digest in sorted(made.keys() | bound.keys()):
            sealed, at = bound.get(digest, (None, None))
            times = [t for t in (made.get(digest), at) if t is not None]
            out.append((digest, sealed, min(times) if times else None))
        return out

    def erased(self) -> list[str]:
        with self._tx() as conn:
            return [str(d) for d in conn.execute(select(tombstones.c.digest).order_by(tombstones.c.digest)).scalars()]

    def stored_salt(self) -> bytes | None:
        return self.salt()  # made with the state row when the store was first opened

    def import_entry(
        self, digest: str, *, key: bytes | None = None, sealed: str | None = None, erased: bool = False, made: dt.datetime | None = None
    ) -> bool:
        check_import(digest, key, sealed, erased, self.location)
        at = made or _now()
        with self._tx(digest) as conn:  # one transaction: a refused entry leaves nothing of it
            has_key = conn.execute(select(keys.c.key).where(keys.c.digest == digest)).scalar()
            held = conn.execute(select(binds.c.sealed).where(binds.c.digest == digest)).scalar()
            tomb = self._erased(conn, digest)
            if erased and has_key is not None:
                raise ObjectConflictError(f"object {digest} is erased in the source but has a key in the key store {self.location}: refused")
            if key is not None and tomb:
                raise ObjectErasedError(f"object {digest} was crypto-erased in the key store {self.location}: its key is not imported")
            if key is not None and has_key is not None and bytes(has_key) != key:
                raise ObjectConflictError(f"object {digest} has a different key in the key store {self.location}: refused")
            if sealed is not None and held not in (None, sealed):
                raise ObjectConflictError(f"object {digest} is bound to ciphertext {held} in the key store {self.location}, not {sealed}: refused")
            wrote = False
            if erased and not tomb:
                wrote = conn.execute(insert(tombstones).values(digest=digest, erased_at=at)).rowcount > 0
            if key is not None and has_key is None:
                wrote = conn.execute(insert(keys).values(digest=digest, key=key, created_at=at)).rowcount > 0 or wrote
            if sealed is not None and held is None:
                wrote = conn.execute(insert(binds).values(digest=digest, sealed=sealed, bound_at=at)).rowcount > 0 or wrote
        return wrote

    def import_salt(self, salt: bytes) -> bool:
        if len(salt) != KEY_BYTES:
            raise ObjectStoreError(f"refusing to import a salt of {len(salt)} bytes into the key store {self.location} (expected {KEY_BYTES})")
        with self._tx(_SCHEMA_LOCK) as conn:
            row = conn.execute(select(state.c.generation, state.c.salt).where(state.c.id == 1).with_for_update()).one()
            if bytes(row.salt) == salt:
                return False
            # The salt is made when the store is first opened: it may be replaced only while nothing here can depend on it.
            used = row.generation != 0 or any(conn.execute(select(t.c[0]).limit(1)).first() is not None for t in (keys, binds, tombstones, deletions))
            if used:
                raise ObjectConflictError(f"the key store {self.location} already has a different salt (its subject hashes depend on it): refused")
            conn.execute(update(state).where(state.c.id == 1).values(salt=salt))
        return True

    def generation(self) -> int:
        with self._tx() as conn:
            return int(conn.execute(select(state.c.generation).where(state.c.id == 1)).scalar_one())

    def set_generation(self, generation: int) -> None:
        with self._tx() as conn:
            current = int(conn.execute(select(state.c.generation).where(state.c.id == 1).with_for_update()).scalar_one())
            if generation < current:
                raise ObjectStoreError(f"refusing to lower the key store's redaction generation from {current} to {generation}")
            if generation != current:
                conn.execute(update(state).where(state.c.id == 1).values(generation=generation))

    def salt(self) -> bytes:
        with self._tx() as conn:
            return bytes(conn.execute(select(state.c.salt).where(state.c.id == 1)).scalar_one())

    def record_deletion(self, generation: int, request_id: str, subject_key_hash: str) -> None:
        with self._tx() as conn:
            values = {"generation": generation, "request_id": request_id, "subject_key_hash": subject_key_hash, "recorded_at": _now()}
            conn.execute(insert(deletions).values(**values).on_conflict_do_nothing())

    def deletions(self) -> list[tuple[int, str, str]]:
        with self._tx() as conn:
            rows = conn.execute(select(deletions.c.generation, deletions.c.request_id, deletions.c.subject_key_hash).order_by(deletions.c.generation))
            return [(int(r.generation), str(r.request_id), str(r.subject_key_hash)) for r in rows]


__all__ = ["PostgresKeyStore"]
