"""Identities, grants, the audit log and realization builders in the registry (tables: schema_trust.py).

:class:`TrustRecords` runs in the registry's transactions (same engine and clock).
Audit appends are serialized: SQLite writers hold the write lock (``BEGIN IMMEDIATE``),
PostgreSQL takes a transaction advisory lock; the sequence number is the primary key,
so two appends can never share one. A grant change and its audit entry commit together.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, select
from sqlalchemy.engine import Connection

from dsv_platform.adapters.registry import schema_trust as st
from dsv_platform.adapters.registry.audit_seal import entry_of, export_document, seal_entry, verify_log, write_checkpoint
from dsv_platform.adapters.registry.certificates import GRANT, KEY, certify, grant_statement, key_statement, verified_grants, verified_key
from dsv_platform.adapters.registry.launches import Launch, SignedBuild, build_problem, builder_row, claim_nonce, launch_of, record_launch
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.adapters.registry.signed_events import policy_of
from dsv_platform.adapters.registry.transactions import RegistryTransactions
from dsv_platform.core import canonical_json
from dsv_platform.core.publication.records import Realization
from dsv_platform.core.trust.trust import GENESIS_HASH, Grant, audit_entry_hash, parse_role

_PG_AUDIT_LOCK_ID = 0x64737661  # "dsva"
STRICT_PROPERTY = "strict"
"""Registry property: ``1`` once any process of a strict home has opened the registry; never unset (docs/trust.md)."""
BOOTSTRAP_PROPERTY = "bootstrap"
"""Registry property: the identity the registry's one bootstrap minted."""


@dataclass(frozen=True)
class IdentityRecord:
    name: str
    public_key: str
    fingerprint: str
    created_by: str
    created_at: datetime


def scope_key(grant: Grant) -> str:
    return canonical_json.sha256_hex([grant.identity, grant.role.value, grant.definition, grant.source, grant.purpose])


def _grant(row: Any) -> Grant:
    return Grant(
        identity=row.identity,
        role=parse_role(row.role),
        definition=row.definition,
        source=row.source,
        purpose=row.purpose,
        columns=tuple(json.loads(row.columns_json)),
    )


def append_audit(conn: Connection, *, now: datetime, identity: str, action: str, target: str, reason: str | None, detail: Mapping[str, Any] | None) -> int:
    """Append one chained entry inside the caller's write transaction; returns its sequence number."""
    if conn.dialect.name == "postgresql":
        conn.execute(select(func.pg_advisory_xact_lock(_PG_AUDIT_LOCK_ID)))
    t = st.audit_log
    last = conn.execute(select(t.c.seq, t.c.entry_hash).order_by(t.c.seq.desc()).limit(1)).first()
    seq, prev = (1, GENESIS_HASH) if last is None else (int(last.seq) + 1, str(last.entry_hash))
    fields = {"seq": seq, "at": now.isoformat(), "identity": identity, "action": action, "target": target, "reason": reason, "detail": dict(detail or {})}
    entry_hash = audit_entry_hash(prev, fields)
    conn.execute(
        insert(t).values(
            seq=seq,
            at=now,
            identity=identity,
            action=action,
            target=target,
            reason=reason,
            detail_json=canonical_json.dumps(fields["detail"]).decode(),
            prev_hash=prev,
            entry_hash=entry_hash,
        )
    )
    seal_entry(conn, seq, entry_hash, action, now)  # signed by the acting identity; a checkpoint when due (audit_seal.py)
    return seq


def _certify(conn: Connection, kind: str, subject: str, statement: bytes, now: datetime) -> None:
    """The engine's signer (the proven operator) certifies a key or a grant it writes, in this transaction."""
    signer = policy_of(conn.engine).signer
    if signer is not None:
        certify(conn, kind, subject, statement, by=signer.identity, public_key=signer.public_key, sign=signer.sign, now=now)


def _change_grant(conn: Connection, grant: Grant, key: str, *, add: bool, by: str, reason: str | None, now: datetime) -> bool:
    """Add or remove ``grant`` with its audit entry inside the caller's transaction; False when nothing changed."""
    t = st.grants
    exists = conn.execute(select(t.c.id).where(t.c.scope_key == key)).first() is not None
    if exists == add:
        return False
    if add:
        conn.execute(
            insert(t).values(
                scope_key=key,
                identity=grant.identity,
                role=grant.role.value,
                definition=grant.definition,
                source=grant.source,
                purpose=grant.purpose,
                columns_json=canonical_json.dumps(list(grant.columns)).decode(),
                created_by=by,
                created_at=now,
            )
        )
        _certify(conn, GRANT, key, grant_statement(conn.execute(select(t).where(t.c.scope_key == key)).one()), now)
    else:
        conn.execute(delete(t).where(t.c.scope_key == key))
    action = "grant.add" if add else "grant.remove"
    append_audit(conn, now=now, identity=by, action=action, target=f"identity:{grant.identity}", reason=reason, detail=grant.to_document())
    return True


class TrustRecords(RegistryTransactions):
    """Trust records of one registry: ``TrustRecords.of(registry)``."""

    @classmethod
    def of(cls, registry: Registry) -> TrustRecords:
        return cls(registry.engine, clock=registry._clock)

    # ------------------------------------------------------------ identities

    def get_identity(self, name: str) -> IdentityRecord | None:
        t = st.identities
        with self._read() as conn:
            row = conn.execute(select(t).where(t.c.name == name)).first()
        return None if row is None else IdentityRecord(row.name, row.public_key, row.fingerprint, row.created_by, row.created_at)

    def identities(self) -> list[IdentityRecord]:
        t = st.identities
        with self._read() as conn:
            rows = conn.execute(select(t).order_by(t.c.name)).all()
        return [IdentityRecord(r.name, r.public_key, r.fingerprint, r.created_by, r.created_at) for r in rows]

    def add_identity(self, name: str, public_key: str, fingerprint: str, *, created_by: str) -> tuple[IdentityRecord, bool]:
        """Record ``name``'s public key; returns the stored record and whether it was created (an existing one is kept)."""

        def work(conn: Connection) -> bool:
            t = st.identities
            if conn.execute(select(t.c.name).where(t.c.name == name)).first() is not None:
                return False
            conn.execute(insert(t).values(name=name, public_key=public_key, fingerprint=fingerprint, created_by=created_by, created_at=self._now()))
            _certify(conn, KEY, name, key_statement(name, public_key), self._now())
            return True

        created = self._retrying(work)
        record = self.get_identity(name)
        assert record is not None
        return record, created

    def bootstrap_identity(self, name: str, public_key: str, fingerprint: str, *, by: str, grants: Sequence[Grant] = (), reason: str | None = None) -> bool:
        """Record the registry's first identity with its ``grants`` (audited), only while it has none and is not strict; whether it did.

        One write transaction: a second process bootstrapping at the same time finds the identity with every grant, or nothing.

        The bootstrap is recorded once, as the registry property ``bootstrap``: a second home on the same registry bootstraps nobody.
        """

        def work(conn: Connection) -> bool:
            if conn.dialect.name == "postgresql":
                conn.execute(select(func.pg_advisory_xact_lock(_PG_AUDIT_LOCK_ID)))
            t, p = st.identities, st.registry_properties
            if conn.execute(select(t.c.name).limit(1)).first() is not None:
                return False
            if conn.execute(select(p.c.value).where(p.c.name == STRICT_PROPERTY)).scalar() == "1":
                return False
            now = self._now()
            conn.execute(insert(t).values(name=name, public_key=public_key, fingerprint=fingerprint, created_by=by, created_at=now))
            conn.execute(insert(p).values(name=BOOTSTRAP_PROPERTY, value=name, recorded_by=by, recorded_at=now))
            for grant in grants:
                _change_grant(conn, grant, scope_key(grant), add=True, by=by, reason=reason, now=now)
            return True

        return self._retrying(work)

    def verified_key(self, name: str) -> bytes | None:
        """``name``'s public key, certified up to the pinned trust root (certificates.py); None when not registered."""
        with self._read() as conn:
            return verified_key(conn, name, policy_of(self.engine).root)

    def verified_grants(self, name: str, *, only: Callable[[Grant], bool] | None = None) -> list[Grant]:
        """``name``'s grants (``only`` those it keeps), each certified up to the pinned trust root, else UntrustedError naming the grant."""
        with self._read() as conn:
            return verified_grants(conn, name, policy_of(self.engine).root, only=only)

    def has_certificates(self) -> bool:
        """Whether any key or grant was ever certified (False: a registry from before certificates)."""
        with self._read() as conn:
            return conn.execute(select(st.certificates.c.id).limit(1)).first() is not None

    def certify_all(self, *, by: str) -> int:
        """Certify every key and grant that has no valid certificate, as the engine's signer ``by`` (``dsv trust certify``)."""
        root = policy_of(self.engine).root

        def work(conn: Connection) -> int:
            done = 0
            for row in conn.execute(select(st.identities)).all():
                if root is None or bytes.fromhex(row.public_key) != root:
                    _certify(conn, KEY, row.name, key_statement(row.name, row.public_key), self._now())
                    done += 1
            for row in conn.execute(select(st.grants)).all():
                _certify(conn, GRANT, row.scope_key, grant_statement(row), self._now())
                done += 1
            append_audit(conn, now=self._now(), identity=by, action="trust.certify", target="registry", reason=None, detail={"certified": done})
            return done

        return self._retrying(work)

    # ------------------------------------------------------------ registry properties

    def registry_property(self, name: str) -> str | None:
        """A property of the registry itself (``strict``, ``bootstrap``), or None when never recorded."""
        t = st.registry_properties
        with self._read() as conn:
            value = conn.execute(select(t.c.value).where(t.c.name == name)).scalar()
        return None if value is None else str(value)

    def record_property(self, name: str, value: str, *, by: str) -> str:
        """Record ``name`` once; returns the stored value (an existing one is kept: the table is append-only)."""

        def work(conn: Connection) -> str:
            t = st.registry_properties
            stored = conn.execute(select(t.c.value).where(t.c.name == name)).scalar()
            if stored is not None:
                return str(stored)
            conn.execute(insert(t).values(name=name, value=value, recorded_by=by, recorded_at=self._now()))
            return value

        return self._retrying(work)

    # ------------------------------------------------------------ grants

    def grants(self, identity: str | None = None) -> list[Grant]:
        t = st.grants
        stmt = select(t).order_by(t.c.identity, t.c.role, t.c.id)
        if identity is not None:
            stmt = stmt.where(t.c.identity == identity)
        with self._read() as conn:
            return [_grant(r) for r in conn.execute(stmt)]

    def change_grant(self, grant: Grant, *, add: bool, by: str, reason: str | None = None) -> bool:
        """Add or remove ``grant`` and audit it in one transaction; False (nothing audited) when nothing changed."""
        key = scope_key(grant)

        def work(conn: Connection) -> bool:
            return _change_grant(conn, grant, key, add=add, by=by, reason=reason, now=self._now())

        return self._retrying(work)

    # ------------------------------------------------------------ audit log

    def audit(self, *, identity: str, action: str, target: str, reason: str | None = None, detail: Mapping[str, Any] | None = None) -> int:
        return self._retrying(lambda conn: append_audit(conn, now=self._now(), identity=identity, action=action, target=target, reason=reason, detail=detail))

    def audit_entries(self, *, since: datetime | None = None, target: str | None = None) -> list[dict[str, Any]]:
        """Entries in sequence order; ``target`` matches exactly or as a prefix before ``@``/``:``."""
        t = st.audit_log
        stmt = select(t).order_by(t.c.seq)
        if since is not None:
            stmt = stmt.where(t.c.at >= since)
        if target is not None:
            stmt = stmt.where((t.c.target == target) | t.c.target.startswith(target + "@") | t.c.target.startswith(target + ":"))
        with self._read() as conn:
            return [entry_of(r) for r in conn.execute(stmt)]

    def audit_head(self) -> tuple[int, str] | None:
        """The newest entry's (seq, entry hash), or None for an empty log (what a publication's statement signs)."""
        t = st.audit_log
        with self._read() as conn:
            row = conn.execute(select(t.c.seq, t.c.entry_hash).order_by(t.c.seq.desc()).limit(1)).first()
        return None if row is None else (int(row.seq), str(row.entry_hash))

    def audit_hash_at(self, seq: int) -> str | None:
        """Entry ``seq``'s hash as the log holds it now; None when it holds no such entry."""
        t = st.audit_log
        with self._read() as conn:
            found = conn.execute(select(t.c.entry_hash).where(t.c.seq == seq)).scalar()
        return None if found is None else str(found)

    def verify_audit(self) -> dict[str, Any]:
        """The whole log checked: chain, signatures, checkpoints (AuditChainError / AuditTamperedError naming the entry)."""
        with self._read() as conn:
            return verify_log(conn)

    def checkpoint_and_export(self) -> dict[str, Any]:
        """A fresh checkpoint of the head (signed by the engine's signer), then the log as an export document."""

        def work(conn: Connection) -> dict[str, Any]:
            if conn.dialect.name == "postgresql":
                conn.execute(select(func.pg_advisory_xact_lock(_PG_AUDIT_LOCK_ID)))
            write_checkpoint(conn, self._now())
            return export_document(conn, self._now())

        return self._retrying(work)

    # ------------------------------------------------------------ builders

    def record_builder(self, realization_id: int, identity: str) -> None:
        """Who built ``realization_id`` (first writer wins: a rerun does not change the builder)."""
        t = st.realization_builders

        def work(conn: Connection) -> None:
            if conn.execute(select(t.c.identity).where(t.c.realization_id == realization_id)).first() is None:
                conn.execute(insert(t).values(realization_id=realization_id, identity=identity, recorded_at=self._now()))

        self._retrying(work)

    def record_launch(self, realization_id: int, launch: Launch) -> Launch:
        """The builder of a Dagster-built realization and its launch, in one transaction (launches.py); the launch as recorded."""
        return self._retrying(lambda conn: record_launch(conn, realization_id, launch, self._now()))

    def claim_nonce(self, nonce: str, *, run_id: str, identity: str) -> str | None:
        """Claim a launch request's nonce for ``run_id``; the run that claimed it before (a replay), else None."""
        return self._retrying(lambda conn: claim_nonce(conn, nonce, run_id, identity, self._now()))

    def launch_of(self, realization_id: int) -> Launch | None:
        with self._read() as conn:
            return launch_of(conn, realization_id)

    def builder_of(self, realization_id: int) -> str | None:
        with self._read() as conn:
            return builder_row(conn, realization_id)

    def build_problem(self, realization: Realization, signed: SignedBuild) -> tuple[str, str] | None:
        """The builder or launch field whose row disagrees with the signed statement, and why (launches.py); None when none does."""
        with self._read() as conn:
            return build_problem(conn, realization, signed)
