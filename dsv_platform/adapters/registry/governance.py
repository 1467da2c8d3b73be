"""Registry records of model governance after a privacy deletion (migration 20): obligations and the decisions closing them.

One obligation per (deletion request, model run trained on a realization the request redacted), with the
family's policy as configured when it was opened; at most one decision closes it, naming who decided and the
evidence. Both tables are append-only: an obligation is closed by its decision row, never by an update.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Column, ForeignKey, Integer, String, Table, Text, UniqueConstraint, func, insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from dsv_platform.adapters.registry import lineage
from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry.privacy import Transactions
from dsv_platform.core import canonical_json
from dsv_platform.core.errors import DsvError

model_obligations = Table(  # migration 20, append-only
    "model_obligations",
    s.metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("request_id", s.NAME, ForeignKey("privacy_requests.request_id"), nullable=False),
    Column("model_run", Text, nullable=False),  # the run manifest hash (lineage node model_run:<hash>)
    Column("family", s.NAME),  # the model name its run manifest records (None: not known)
    Column("realization", s.HASH, nullable=False),  # the redacted realization it was trained on
    Column("policy", String(40), nullable=False),
    Column("grace_days", Integer),
    Column("policy_source", Text, nullable=False),
    Column("opened_by", s.NAME, nullable=False),
    Column("opened_at", s.UtcDateTime, nullable=False),
    Column("due_at", s.UtcDateTime),
    UniqueConstraint("request_id", "model_run", name="uq_model_obligations_model"),
)

model_decisions = Table(  # migration 20, append-only: the one decision closing an obligation
    "model_decisions",
    s.metadata,
    Column("obligation_id", Integer, ForeignKey("model_obligations.id"), primary_key=True, autoincrement=False),
    Column("evidence", String(20), nullable=False),
    Column("retrained_run", Text),
    Column("evidence_json", Text, nullable=False),
    Column("reason", Text),
    Column("decided_by", s.NAME, nullable=False),
    Column("decided_at", s.UtcDateTime, nullable=False),
)


class ObligationClosedError(DsvError):
    """The obligation already has its closing decision (a decision is recorded once)."""


@dataclass(frozen=True)
class TrainedRun:
    run_hash: str
    family: str | None
    realization: str


@dataclass(frozen=True)
class Obligation:
    id: int
    request_id: str
    model_run: str
    family: str | None
    realization: str
    policy: str
    grace_days: int | None
    policy_source: str
    opened_by: str
    opened_at: datetime
    due_at: datetime | None
    decision: Mapping[str, Any] | None  # None: open

    def to_document(self) -> dict[str, Any]:
        return {
            "obligation_id": self.id,
            "request_id": self.request_id,
            "model_run": self.model_run,
            "family": self.family,
            "trained_on": self.realization,
            "policy": self.policy,
            "grace_days": self.grace_days,
            "policy_source": self.policy_source,
            "opened_by": self.opened_by,
            "opened_at": self.opened_at.isoformat(),
            "due_at": None if self.due_at is None else self.due_at.isoformat(),
            "decision": None if self.decision is None else dict(self.decision),
        }


def _decision(row: Any) -> dict[str, Any] | None:
    if row.evidence is None:
        return None
    return {
        "evidence": row.evidence, "retrained_run": row.retrained_run, "detail": json.loads(row.evidence_json),
        "reason": row.reason, "decided_by": row.decided_by, "decided_at": row.decided_at.isoformat(),
    }  # fmt: skip


class GovernanceRecords:
    """The model governance tables of one registry (``GovernanceRecords(registry)``)."""

    def __init__(self, registry: Transactions) -> None:
        self.registry = registry

    def now(self) -> datetime:
        """The registry's clock (what opened_at, due_at and decided_at are read against)."""
        return self.registry._now()

    def trained_runs(self, realizations: Iterable[str]) -> list[TrainedRun]:
        """Model runs trained on these realizations (``trained`` edges), each once, with the family its run manifest records."""
        found: dict[str, TrainedRun] = {}
        runs = s.production_runs
        with self.registry._read() as conn:
            for manifest_hash in sorted(set(realizations)):
                for e in lineage.load_edges(conn, node=("realization", manifest_hash)):
                    if e.relation != "trained" or e.dst_kind != "model_run" or e.src != ("realization", manifest_hash) or e.dst_id in found:
                        continue
                    family = e.attributes.get("model")
                    if family is None:  # an edge without the model's name: the name its run was recorded under
                        family = conn.execute(select(runs.c.name).where(runs.c.manifest_hash == e.dst_id, runs.c.kind == "model_run")).scalar()
                    found[e.dst_id] = TrainedRun(e.dst_id, None if family is None else str(family), manifest_hash)
        return [found[k] for k in sorted(found)]

    def open(self, request_id: str, rows: Sequence[Mapping[str, Any]], *, actor: str) -> list[Obligation]:
        """Record each row's obligation unless the request already has one for that model run; every obligation of the request."""
        now = self.registry._now()

        def work(conn: Connection) -> None:
            t = model_obligations
            known = set(conn.execute(select(t.c.model_run).where(t.c.request_id == request_id)).scalars())
            for r in rows:
                if r["model_run"] not in known:
                    due = None if r.get("grace_days") is None else now + timedelta(days=int(r["grace_days"]))
                    conn.execute(insert(t).values(**r, request_id=request_id, opened_by=actor, opened_at=now, due_at=due))

        self.registry._retrying(work)
        return self.obligations([request_id])

    def obligations(self, request_ids: Iterable[str]) -> list[Obligation]:
        """The obligations of these requests with their decisions, in the order opened."""
        t, d = model_obligations, model_decisions
        ids = sorted(set(request_ids))
        if not ids:
            return []
        stmt = select(t, d.c.evidence, d.c.retrained_run, d.c.evidence_json, d.c.reason, d.c.decided_by, d.c.decided_at)
        stmt = stmt.outerjoin(d, d.c.obligation_id == t.c.id).where(t.c.request_id.in_(ids)).order_by(t.c.id)
        with self.registry._read() as conn:
            rows = list(conn.execute(stmt))
        fields = ("id", "request_id", "model_run", "family", "realization", "policy", "grace_days", "policy_source", "opened_by", "opened_at", "due_at")
        return [Obligation(**{f: getattr(r, f) for f in fields}, decision=_decision(r)) for r in rows]

    def decide(self, obligation_id: int, *, evidence: str, retrained_run: str | None, detail: Mapping[str, Any], actor: str, reason: str | None) -> None:
        """Record the decision closing the obligation; ObligationClosedError if it already has one."""
        values = {
            "obligation_id": obligation_id, "evidence": evidence, "retrained_run": retrained_run, "reason": reason, "decided_by": actor,
            "evidence_json": canonical_json.dumps(dict(detail)).decode(), "decided_at": self.registry._now(),
        }  # fmt: skip
        try:
            with self.registry._write() as conn:
                conn.execute(insert(model_decisions).values(**values))
        except IntegrityError:
            raise ObligationClosedError(f"model obligation #{obligation_id} is already closed (a decision is recorded once)") from None

    def built_at_generation(self, created_at: datetime) -> int:
        """The redaction generation in force when a realization was begun at ``created_at`` (0: before any deletion)."""
        g = s.redaction_generations
        with self.registry._read() as conn:
            return int(conn.execute(select(func.max(g.c.generation)).where(g.c.at <= created_at)).scalar() or 0)

    def scanned_subject_column(self, manifest_hash: str) -> tuple[bool, str | None]:
        """Whether the subject index scanned the manifest, and the subject column it found (None: none, it cannot tell)."""
        t = s.subject_index_scans
        with self.registry._read() as conn:
            row = conn.execute(select(t.c.subject_column).where(t.c.manifest_hash == manifest_hash)).first()
        return (False, None) if row is None else (True, row.subject_column)

    def holds_subject(self, manifest_hash: str, subject_key_hash: str) -> bool:
        """The subject index lists the subject in the realization (any of its objects)."""
        t = s.subject_index
        with self.registry._read() as conn:
            stmt = select(t.c.id).where(t.c.manifest_hash == manifest_hash, t.c.subject_key_hash == subject_key_hash).limit(1)
            return conn.execute(stmt).first() is not None


__all__ = ["GovernanceRecords", "Obligation", "ObligationClosedError", "TrainedRun", "model_decisions", "model_obligations"]
