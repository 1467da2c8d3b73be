"""The registry's append-mostly records: lineage and consumption, retention roots, reproduction records,
privacy records and redaction generations.

:class:`RegistryBookkeeping` is a base of :class:`~dsv_platform.adapters.registry.registry.Registry`;
its methods delegate to the sibling modules (lineage.py, retention.py, reproduction.py, privacy.py)
inside the registry's transactions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import insert
from sqlalchemy.engine import Connection

from dsv_platform.adapters.registry import lineage, read_health, reproduction, retention
from dsv_platform.adapters.registry import queries as q
from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry.privacy import PrivacyRecords
from dsv_platform.adapters.registry.transactions import RegistryTransactions
from dsv_platform.core import canonical_json
from dsv_platform.core.publication.records import Realization
from dsv_platform.core.publication.states import RealizationState

LineageEdge = tuple[str, str, str, str, str, Mapping[str, Any]]


class RegistryBookkeeping(RegistryTransactions):
    """Lineage, consumption, retention, reproduction and privacy records, and redaction generations."""

    # ------------------------------------------------------------ lineage and consumption

    def record_lineage(self, edges: Iterable[LineageEdge], *, actor: str) -> int:
        """Append lineage edges ``(src_kind, src_id, dst_kind, dst_id, relation, attributes)``; returns how many.

        The actor is kept in the edge's attributes as ``recorded_by``.
        """
        rows = [
            {
                "src_kind": src_kind,
                "src_id": src_id,
                "dst_kind": dst_kind,
                "dst_id": dst_id,
                "relation": relation,
                "attributes_json": canonical_json.dumps({**attributes, "recorded_by": actor}).decode(),
            }
            for src_kind, src_id, dst_kind, dst_id, relation, attributes in edges
        ]
        if rows:
            with self._write() as conn:
                conn.execute(insert(s.lineage_edges).values(recorded_at=self._now()), rows)
        return len(rows)

    def record_consumption(
        self, ref: str, *, actor: str, realization: Realization | None, failure: str | None, detail: Mapping[str, Any] | None = None
    ) -> None:
        """Record that ``actor`` read ``ref`` (``failure`` None) or failed to (``failure`` a FailureKind name)."""
        with self._write() as conn:
            conn.execute(
                insert(s.consumption_records).values(
                    actor=actor,
                    ref=ref,
                    realization_id=None if realization is None else realization.id,
                    manifest_hash=None if realization is None else realization.manifest_hash,
                    ok=failure is None,
                    failure_kind=failure,
                    at=self._now(),
                    detail_json=canonical_json.dumps(dict(detail or {})).decode(),
                )
            )

    def lineage_edges(self, *, node: tuple[str, str] | None = None) -> list[Any]:
        """Recorded lineage edges (all, or those touching ``(kind, id)``), oldest first (lineage.py)."""
        with self._read() as conn:
            return lineage.load_edges(conn, node=node)

    # ------------------------------------------------------------ retention roots (retention.py)

    def add_retention_root(self, kind: str, ref: str, reason: str, owner: str, expires_at: datetime | None = None) -> int:
        """Record a GC root (model version, legal hold, report, experiment, alias, rollback window); idempotent; returns its id."""
        return self._retrying(
            lambda conn: retention.add_root(conn, kind=kind, ref=ref, reason=reason, owner=owner, expires_at=expires_at, now=self._now())
        )

    def list_retention_roots(self, active_at: datetime | None = None, *, kind: str | None = None) -> list[Any]:
        """Every retention root, or only those active (not released, not expired) at ``active_at``."""
        with self._read() as conn:
            return retention.list_roots(conn, active_at=active_at, kind=kind)

    def release_retention_root(self, root_id: int, actor: str, reason: str) -> Any:
        """Release a root (idempotent); the release is kept as a lineage edge with actor and reason."""
        return self._retrying(lambda conn: retention.release_root(conn, root_id, actor=actor, reason=reason, now=self._now()))

    def state_watermark(self) -> dict[str, Any]:
        """Fingerprint of the registry state a GC plan depends on (retention.state_watermark)."""
        with self._read() as conn:
            return retention.state_watermark(conn)

    # ------------------------------------------------------------ reproduction records (reproduction.py)

    def record_reproduction(self, ref: str, manifest_hash: str, *, actor: str, outcome: str, details: Mapping[str, Any]) -> int:
        """Append one reproduction record (audit, rehearsal or integrity scan); returns its id."""
        with self._write() as conn:
            return reproduction.add_record(conn, ref=ref, manifest_hash=manifest_hash, actor=actor, outcome=outcome, details=details, now=self._now())

    def reproduction_records(self, *, manifest_hash: str | None = None, procedure: str | None = None, limit: int | None = None) -> list[Any]:
        """Reproduction records, newest first."""
        with self._read() as conn:
            return reproduction.list_records(conn, manifest_hash=manifest_hash, procedure=procedure, limit=limit)

    def realizations_in(self, states: frozenset[RealizationState]) -> list[Realization]:
        """Every realization in one of ``states``, oldest first."""
        with self._read() as conn:
            return reproduction.realizations_in(conn, states)

    def consumption_summary(self) -> dict[str, dict[str, Any]]:
        """Per manifest hash: distinct readers, reads and failed reads by kind (consumption records)."""
        with self._read() as conn:
            return reproduction.consumption_summary(conn)

    def record_read(self, measure: read_health.ReadMeasure, *, consumer: str, purpose: str | None, realization: Realization) -> None:
        """Append one read's health (read_health.py): time to first byte, bytes, rows, seconds, missing and corrupt objects."""
        with self._write() as conn:
            read_health.record_read(
                conn, measure, consumer=consumer, purpose=purpose, ref=realization.ref, realization_id=realization.id,
                manifest_hash=realization.manifest_hash or "", now=self._now(),
            )  # fmt: skip

    def read_health_summary(self, manifest_hashes: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
        """Per manifest hash (of ``manifest_hashes``, default all): consumers, reads, p50/max time to first byte, throughput,
        missing and corrupt objects."""
        with self._read() as conn:
            return read_health.health_summary(conn, None if manifest_hashes is None else set(manifest_hashes))

    # ------------------------------------------------------------ privacy records and redaction generations

    @property
    def privacy(self) -> PrivacyRecords:
        """Subject index, deletion requests and outcomes (privacy.py)."""
        return PrivacyRecords(self)

    def redaction_generation(self) -> int:
        """The current redaction generation (0 before any deletion)."""
        with self._read() as conn:
            return q.current_generation(conn)

    def raise_redaction_generation(self, subject_key_hash: str, *, reason: str, actor: str) -> int:
        """Record a deletion and return the new, strictly greater generation."""

        def work(conn: Connection) -> int:
            generation = q.current_generation(conn) + 1
            conn.execute(
                insert(s.redaction_generations).values(generation=generation, subject_key_hash=subject_key_hash, reason=reason, actor=actor, at=self._now())
            )
            return generation

        return self._retrying(work)
