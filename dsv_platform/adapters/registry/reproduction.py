"""Reproduction records in the registry: who audited what, when, what matched and the outcome.

One row per audit, rehearsal or integrity scan of one manifest
(``details.procedure`` says which). Every function runs inside the caller's
transaction.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from dsv_platform.adapters.registry import queries as q
from dsv_platform.adapters.registry import schema as s
from dsv_platform.core import canonical_json
from dsv_platform.core.publication.records import Realization
from dsv_platform.core.publication.states import RealizationState


@dataclass(frozen=True)
class ReproductionRecord:
    id: int
    ref: str
    manifest_hash: str
    actor: str
    at: datetime
    outcome: str
    details: Mapping[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "ref": self.ref,
            "manifest_hash": self.manifest_hash,
            "actor": self.actor,
            "at": self.at.isoformat(),
            "outcome": self.outcome,
            "details": dict(self.details),
        }


def add_record(conn: Connection, *, ref: str, manifest_hash: str, actor: str, outcome: str, details: Mapping[str, Any], now: datetime) -> int:
    result = conn.execute(
        insert(s.reproduction_records).values(
            ref=ref, manifest_hash=manifest_hash, actor=actor, at=now, outcome=outcome, details_json=canonical_json.dumps(dict(details)).decode()
        )
    )
    return q.inserted_id(result)


def list_records(conn: Connection, *, manifest_hash: str | None = None, procedure: str | None = None, limit: int | None = None) -> list[ReproductionRecord]:
    """Records newest first (of one manifest, of one procedure)."""
    t = s.reproduction_records
    stmt = select(t).order_by(t.c.id.desc())
    if manifest_hash is not None:
        stmt = stmt.where(t.c.manifest_hash == manifest_hash)
    out = []
    for row in conn.execute(stmt):
        m = row._mapping
        details = json.loads(m["details_json"] or "{}")
        if procedure is not None and details.get("procedure") != procedure:
            continue
        out.append(ReproductionRecord(m["id"], m["ref"], m["manifest_hash"], m["actor"], m["at"], m["outcome"], details))
        if limit is not None and len(out) >= limit:
            break
    return out


def realizations_in(conn: Connection, states: frozenset[RealizationState]) -> list[Realization]:
    """Every realization in one of ``states``, oldest first (the integrity scan's population)."""
    t = s.realizations
    rows = conn.execute(select(t).where(t.c.state.in_(sorted(x.value for x in states))).order_by(t.c.id))
    return [q.realization_from_row(r) for r in rows]


def consumption_summary(conn: Connection) -> dict[str, dict[str, Any]]:
    """Per manifest hash (``""`` for reads that never resolved): distinct readers, reads, failed reads by kind."""
    t = s.consumption_records
    out: dict[str, dict[str, Any]] = {}
    for row in conn.execute(select(t.c.manifest_hash, t.c.actor, t.c.ok, t.c.failure_kind)):
        entry = out.setdefault(row.manifest_hash or "", {"readers": set(), "reads": 0, "failed": {}})
        entry["readers"].add(row.actor)
        entry["reads"] += 1
        if not row.ok:
            entry["failed"][row.failure_kind or "UNKNOWN"] = entry["failed"].get(row.failure_kind or "UNKNOWN", 0) + 1
    return {k: {"readers": sorted(v["readers"]), "reads": v["reads"], "failed": dict(sorted(v["failed"].items()))} for k, v in out.items()}
