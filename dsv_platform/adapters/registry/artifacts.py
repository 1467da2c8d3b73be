"""Artifact and model runs in the registry (INTENT -> COMPLETE | FAILED), and activities attached to lineage nodes.

A run row is written before the producer opens any input, so a crash leaves an
INTENT row (never counted as produced); completion records the manifest hash
and the stored files. Activities (e.g. a reproduction record) are append-only.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, and_, insert, or_, select, update
from sqlalchemy.engine import Connection

from dsv_platform.adapters.registry import queries as q
from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry.privacy import Transactions
from dsv_platform.core import canonical_json
from dsv_platform.core.errors import IllegalTransitionError, NotFoundError
from dsv_platform.core.reproduction.artifact_manifest import footer_hash

log = logging.getLogger(__name__)

INTENT, COMPLETE, FAILED = "INTENT", "COMPLETE", "FAILED"
ARTIFACT, MODEL_RUN = "artifact", "model_run"


@dataclass(frozen=True)
class RunRecord:
    """One production run: what was intended, and (when COMPLETE) its manifest hash and files ``{name: object digest}``."""

    id: int
    kind: str
    name: str
    state: str
    producer: str
    intent: Mapping[str, Any]
    manifest_hash: str | None
    manifest: Mapping[str, Any] | None
    files: Mapping[str, str]
    error: str | None
    actor: str
    started_at: datetime
    finished_at: datetime | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "name": self.name,
            "state": self.state,
            "producer": self.producer,
            "manifest_hash": self.manifest_hash,
            "files": dict(self.files),
            "error": self.error,
            "actor": self.actor,
            "started_at": self.started_at.isoformat(),
            "finished_at": None if self.finished_at is None else self.finished_at.isoformat(),
        }


@dataclass(frozen=True)
class Activity:
    """A record attached to a lineage node (``artifact:<hash>``, ``model_run:<hash>``), e.g. a reproduction."""

    id: int
    node: str
    kind: str
    record: Mapping[str, Any]
    actor: str
    recorded_at: datetime

    def as_dict(self) -> dict[str, Any]:
        at = self.recorded_at.isoformat()
        return {"id": self.id, "node": self.node, "kind": self.kind, "actor": self.actor, "recorded_at": at, "record": dict(self.record)}


def _run(row: Row[Any]) -> RunRecord:
    m = row._mapping
    files = json.loads(m["files_json"] or "{}")
    manifest = None if m["manifest_json"] is None else json.loads(m["manifest_json"])
    return RunRecord(
        m["id"], m["kind"], m["name"], m["state"], m["producer"], json.loads(m["intent_json"]), m["manifest_hash"],
        manifest, files, m["error"], m["actor"], m["started_at"], m["finished_at"],
    )  # fmt: skip


class RunRecords:
    """The registry's production runs and lineage activities (built on the registry's transactions)."""

    def __init__(self, registry: Transactions) -> None:
        self.registry = registry

    def start(self, kind: str, name: str, *, producer: str, intent: Mapping[str, Any], actor: str, at: datetime | None = None) -> int:
        """Write the INTENT row; returns its id."""
        values = {
            "kind": kind,
            "name": name,
            "state": INTENT,
            "producer": producer,
            "intent_json": canonical_json.dumps(dict(intent)).decode(),
            "actor": actor,
        }
        with self.registry._write() as conn:
            return q.inserted_id(conn.execute(insert(s.production_runs).values(started_at=at or self.registry._now(), **values)))

    def _finish(self, run_id: int, values: Mapping[str, Any]) -> RunRecord:
        t = s.production_runs
        with self.registry._write() as conn:
            done = conn.execute(update(t).where(and_(t.c.id == run_id, t.c.state == INTENT)).values(**values))
            row = conn.execute(select(t).where(t.c.id == run_id)).first()
        if row is None:
            raise NotFoundError(f"no production run #{run_id}", detail={"run_id": run_id})
        if done.rowcount != 1:
            raise IllegalTransitionError(f"production run #{run_id} is {row.state}, not INTENT: it cannot finish again")
        return _run(row)

    def complete(self, run_id: int, *, manifest_hash: str, manifest: Mapping[str, Any], files: Mapping[str, str], at: datetime | None = None) -> RunRecord:
        """INTENT -> COMPLETE with the manifest (document and hash) and the stored files."""
        values = {
            "state": COMPLETE,
            "manifest_hash": manifest_hash,
            "manifest_json": canonical_json.dumps(dict(manifest)).decode(),
            "files_json": canonical_json.dumps(dict(files)).decode(),
            "finished_at": at or self.registry._now(),
        }
        return self._finish(run_id, values)

    def fail(self, run_id: int, *, error: str, at: datetime | None = None) -> RunRecord:
        """INTENT -> FAILED with the error (one line)."""
        return self._finish(run_id, {"state": FAILED, "error": error[:4000], "finished_at": at or self.registry._now()})

    def fail_during(self, run_id: int, exc: BaseException, *, at: datetime | None = None) -> None:
        """INTENT -> FAILED with ``exc`` while ``exc`` propagates: a failure to mark the run is logged, never raised over ``exc`` (the run stays as it was)."""
        try:
            self.fail(run_id, error=f"{type(exc).__name__}: {exc}", at=at)
        except Exception as marking:  # the producer's or trainer's error is the one to raise
            log.warning("production run #%s not marked FAILED (%s: %s)", run_id, type(marking).__name__, marking)

    def get(self, run_id: int) -> RunRecord:
        with self.registry._read() as conn:
            row = conn.execute(select(s.production_runs).where(s.production_runs.c.id == run_id)).first()
        if row is None:
            raise NotFoundError(f"no production run #{run_id}", detail={"run_id": run_id})
        return _run(row)

    def runs(self, *, kind: str | None = None, name: str | None = None, hash_prefix: str | None = None) -> list[RunRecord]:
        """Runs newest first: of one kind, of one name, or whose manifest hash starts with ``hash_prefix``."""
        t = s.production_runs
        stmt = select(t).order_by(t.c.id.desc())
        if kind is not None:
            stmt = stmt.where(t.c.kind == kind)
        if name is not None:
            stmt = stmt.where(t.c.name == name)
        if hash_prefix is not None:
            stmt = stmt.where(t.c.manifest_hash.like(f"{hash_prefix}%"))
        with self.registry._read() as conn:
            return [_run(r) for r in conn.execute(stmt)]

    def locate(self, kind: str, name_or_hash: str) -> RunRecord:
        """The COMPLETE run a full manifest hash, a footer (a prefix of >= 12 hex) or a name (its newest complete run) names."""
        text = name_or_hash.strip()
        digest = footer_hash(text)
        if digest is not None and text.lower().removeprefix("manifest").strip().removeprefix("sha256:") == digest:
            found = [r for r in self.runs(kind=kind, hash_prefix=digest) if r.state == COMPLETE]
            hashes = sorted({r.manifest_hash for r in found if r.manifest_hash})
            if len(hashes) > 1:
                raise NotFoundError(f"{kind} hash {digest} is ambiguous: {len(hashes)} manifests start with it; give more digits", ref=text)
            if not hashes:
                raise NotFoundError(f"no {kind} manifest {digest}: not reproducible by construction", ref=text)
            return found[0]
        named = self.runs(kind=kind, name=text)
        complete = [r for r in named if r.state == COMPLETE]
        if complete:
            return complete[0]
        states = ", ".join(f"run #{r.id} {r.state}" for r in named)
        raise NotFoundError(f"no complete {kind} {text!r}" + (f" ({states})" if states else ""), ref=text)

    def complete_runs(self, kind: str) -> list[RunRecord]:
        """Every COMPLETE run of ``kind``, oldest first (what GC reads)."""
        t = s.production_runs
        with self.registry._read() as conn:
            return [_run(r) for r in conn.execute(select(t).where(t.c.kind == kind, t.c.state == COMPLETE).order_by(t.c.id))]

    # ------------------------------------------------------------ activities

    def add_activity(self, node: tuple[str, str], kind: str, record: Mapping[str, Any], *, actor: str, at: datetime | None = None) -> int:
        values = {"node_kind": node[0], "node_id": node[1], "kind": kind, "record_json": canonical_json.dumps(dict(record)).decode(), "actor": actor}
        with self.registry._write() as conn:
            return q.inserted_id(conn.execute(insert(s.lineage_activities).values(recorded_at=at or self.registry._now(), **values)))

    def activities(self, nodes: Iterable[tuple[str, str]]) -> list[Activity]:
        """Activities attached to any of ``nodes``, oldest first."""
        wanted = sorted(set(nodes))
        if not wanted:
            return []
        t = s.lineage_activities
        out: list[Activity] = []
        with self.registry._read() as conn:
            for i in range(0, len(wanted), 200):
                batch = wanted[i : i + 200]
                cond = or_(*(and_(t.c.node_kind == k, t.c.node_id == n) for k, n in batch))
                for r in conn.execute(select(t).where(cond).order_by(t.c.id)):
                    out.append(Activity(r.id, f"{r.node_kind}:{r.node_id}", r.kind, json.loads(r.record_json), r.actor, r.recorded_at))
        return sorted(out, key=lambda a: a.id)


def record_for_hash(conn: Connection, manifest_hash: str) -> RunRecord | None:
    """The COMPLETE run with this manifest hash, if any (inside the caller's transaction)."""
    t = s.production_runs
    row = conn.execute(select(t).where(t.c.manifest_hash == manifest_hash, t.c.state == COMPLETE).order_by(t.c.id.desc())).first()
    return None if row is None else _run(row)


__all__ = ["ARTIFACT", "COMPLETE", "FAILED", "INTENT", "MODEL_RUN", "Activity", "RunRecord", "RunRecords", "record_for_hash"]
