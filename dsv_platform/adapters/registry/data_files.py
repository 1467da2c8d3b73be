"""The digests of the canonical data files the platform wrote (migration 16), signed by the writing identity (#24 item 8).

:class:`DataFileLedger` is the canonical tables' ``FileLedger``: each commit's new files are recorded with their
SHA-256 and size, signed like state events by the engine's signer (signed_events.TrustPolicy). A table's first
recording is audited (``canonical.seal``, target ``table:<name>``): from then on every live file of the table must
have a digest, and a table whose rows were deleted is still known as sealed. :meth:`DataFileLedger.digests` checks
each row's signature (UNTRUSTED naming the file otherwise). Details: docs/trust.md ("Canonical data files").
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from dsv_platform.adapters.iceberg.iceberg_files import FileDigest
from dsv_platform.adapters.registry import schema_trust as st
from dsv_platform.adapters.registry.certificates import chain, verified_key, verifies
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.adapters.registry.signed_events import policy_of
from dsv_platform.adapters.registry.transactions import RegistryTransactions
from dsv_platform.core import canonical_json
from dsv_platform.core.errors import UntrustedError
from dsv_platform.core.trust import events as ev
from dsv_platform.core.trust.dsse import keyid_of

SEAL_ACTION = "canonical.seal"
STATEMENT_TYPE = "https://dsv-platform.dev/canonical-data-file/v1"


def statement(table: str, path: str, sha256: str, size: int, snapshot_id: str) -> bytes:
    """What the writing identity signs for one data file it wrote."""
    return canonical_json.dumps({"_type": STATEMENT_TYPE, "table": table, "path": path, "sha256": sha256, "size": size, "snapshot_id": snapshot_id})


@dataclass(frozen=True)
class RecordedDigest:
    path: str
    sha256: str
    size: int
    snapshot_id: str
    signer: str | None


def _sealed(conn: Connection, table: str) -> bool:
    a, d = st.audit_log, st.data_file_digests
    if conn.execute(select(d.c.id).where(d.c.table_name == table).limit(1)).first() is not None:
        return True
    return conn.execute(select(a.c.seq).where(a.c.target == f"table:{table}", a.c.action == SEAL_ACTION).limit(1)).first() is not None


class DataFileLedger(RegistryTransactions):
    """``DataFileLedger.of(registry)``: the ``FileLedger`` of the platform's canonical tables."""

    prove: Callable[[], object] | None = None
    """Proves the acting identity, which enlists its signer (the platform's ``actor``): called before recording when no signer
    is enlisted yet, so no digest is written unsigned because nothing had asked who acts (a new process's first load)."""

    @classmethod
    def of(cls, registry: Registry, *, prove: Callable[[], object] | None = None) -> DataFileLedger:
        ledger = cls(registry.engine, clock=registry._clock)
        ledger.prove = prove
        return ledger

    def known_paths(self, table: str) -> set[str] | None:
        d = st.data_file_digests
        with self._read() as conn:
            paths = {str(p) for p in conn.execute(select(d.c.path).where(d.c.table_name == table)).scalars()}
            return paths if paths or _sealed(conn, table) else None

    def ready(self) -> None:
        """Prove the acting identity through :attr:`prove` when no signer is enlisted yet (the tables call this before a commit)."""
        if policy_of(self.engine).signer is None and self.prove is not None:
            self.prove()

    def record(self, table: str, digests: Sequence[FileDigest], *, backfilled: int) -> None:
        """Record ``digests``, signed by the acting identity (:meth:`ready` proves it); a table's first recording is audited."""
        from dsv_platform.adapters.registry.trust import append_audit  # here: trust.py imports registry.py, as this module does

        self.ready()
        def work(conn: Connection) -> None:
            signer, now, first = policy_of(conn.engine).signer, self._now(), not _sealed(conn, table)
            for f in digests:
                sid = str(f.snapshot_id)
                row = {"table_name": table, "path": f.path, "sha256": f.sha256, "size": f.size, "snapshot_id": sid, "recorded_at": now}
                if signer is not None:
                    signature = signer.sign(ev.signed_bytes(statement(table, f.path, f.sha256, f.size, sid))).hex()
                    row |= {"signer": signer.identity, "keyid": keyid_of(signer.public_key), "signature": signature}
                conn.execute(insert(st.data_file_digests).values(**row))
            if first and signer is not None:
                detail = {"files": len(digests), "backfilled": backfilled}
                append_audit(conn, now=now, identity=signer.identity, action=SEAL_ACTION, target=f"table:{table}", reason=None, detail=detail)

        self._retrying(work)

    def digests(self, table: str) -> tuple[bool, dict[str, RecordedDigest]]:
        """Whether ``table`` is sealed, and its recorded digests by path, each signature checked (UntrustedError naming the file)."""
        d = st.data_file_digests
        with self._read() as conn:
            rows = conn.execute(select(d).where(d.c.table_name == table).order_by(d.c.id)).all()
            sealed = bool(rows) or _sealed(conn, table)
            root = policy_of(self.engine).root
            checks, out = chain(conn, root), dict[str, RecordedDigest]()
            first_signed = next((int(r.id) for r in rows if r.signer is not None), None)  # from then on the table's digests are signed
            for r in rows:
                ref = f"{table}: data file {r.path}"
                if r.signer is None and first_signed is not None and int(r.id) > first_signed:
                    raise UntrustedError(f"{ref}: its recorded digest is not signed, though this table's are (a digest row was added)", ref=table,
                                         detail={"table": table, "path": r.path})  # fmt: skip
                if r.signer is not None:
                    key = verified_key(conn, r.signer, root, ref=ref, checks=checks)
                    signed = statement(table, r.path, r.sha256, int(r.size), r.snapshot_id)
                    if key is None or keyid_of(key) != r.keyid or not verifies(key, bytes.fromhex(r.signature), ev.signed_bytes(signed)):
                        raise UntrustedError(f"{ref}: its recorded digest is not what {r.signer!r} signed (the digest row was changed)", ref=table,
                                             detail={"table": table, "path": r.path, "statement": hashlib.sha256(signed).hexdigest()})  # fmt: skip
                seen = out.get(r.path)
                if seen is not None and (seen.sha256, seen.size) != (r.sha256, int(r.size)):
                    raise UntrustedError(f"{ref}: two different digests are recorded for it (a digest row was added)", ref=table,
                                         detail={"table": table, "path": r.path})  # fmt: skip
                out[r.path] = RecordedDigest(r.path, r.sha256, int(r.size), r.snapshot_id, r.signer)
        return sealed, out
