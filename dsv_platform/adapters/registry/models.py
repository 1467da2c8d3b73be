"""The model registry in the registry (tables: schema_models.py): versions, approvals, aliases, deployments.

The rules are the datasets' (core/publication/approval.py): an approval needs a reason and is refused to the
identity that trained the version; a protected alias moves only to an ELIGIBLE version, whose state is re-read
share-locked in the move's transaction; a revocation is refused while a protected alias points at it. Aliases
move by compare-and-swap (one conditional statement checked by its row count, with the history row). Every
write is audited in its own transaction. A deployment is an event and a ``deployed_to`` lineage edge, together.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Row, func, insert, select, update
from sqlalchemy.engine import Connection

from dsv_platform.adapters.registry import queries as q
from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry import schema_models as sm
from dsv_platform.adapters.registry.approval import audit_in
from dsv_platform.adapters.registry.publication import insert_ignore
from dsv_platform.adapters.registry.transactions import RegistryTransactions
from dsv_platform.core import canonical_json
from dsv_platform.core.errors import AccessDeniedError, NotFoundError
from dsv_platform.core.lineage.lineage import NodeKind, Relation
from dsv_platform.core.publication.approval import DEFAULT_PROTECTED_ALIASES, check_approvable, check_protected_target, check_revocable, check_revoke_aliases
from dsv_platform.core.publication.records import StaleAliasError
from dsv_platform.core.publication.states import ConcurrentTransitionError, RealizationState
from dsv_platform.core.reproduction.model_registry import Deployment, ModelAlias, ModelAliasMove, ModelVersion, deployment_node

if TYPE_CHECKING:
    from dsv_platform.adapters.registry.registry import Registry

V, E, A, H, D = sm.model_versions, sm.model_version_events, sm.model_aliases, sm.model_alias_history, sm.model_deployments
S = RealizationState


def _version(row: Row[Any]) -> ModelVersion:
    m = row._mapping
    return ModelVersion(m["model"], m["run_hash"], S(m["state"]), m["trained_on"], m["trained_by"], m["registered_at"])


def _alias(row: Row[Any]) -> ModelAlias:
    m = row._mapping
    return ModelAlias(m["model"], m["alias"], m["run_hash"], m["generation"], m["updated_at"], m["updated_by"])


def _deployment(row: Row[Any], current: set[int]) -> Deployment:
    m = row._mapping
    return Deployment(m["id"], m["target"], m["model"], m["run_hash"], m["actor"], m["at"], m["reason"], m["id"] in current)


def _current_ids(conn: Connection) -> set[int]:
    return {int(i) for (i,) in conn.execute(select(func.max(D.c.id)).group_by(D.c.target))}


def _load(conn: Connection, run_hash: str, *, lock: bool = False) -> ModelVersion:
    stmt = select(V).where(V.c.run_hash == run_hash)
    row = conn.execute(stmt.with_for_update(read=True) if lock else stmt).first()
    if row is None:
        raise NotFoundError(f"no model version with run manifest {run_hash} (dsv model list)", ref=run_hash)
    return _version(row)


def _set_state(conn: Connection, current: ModelVersion, to: RealizationState, *, reason: str, actor: str, now: datetime) -> ModelVersion:
    moved = conn.execute(update(V).where(V.c.run_hash == current.run_hash, V.c.state == current.state.value).values(state=to.value))
    if moved.rowcount != 1:
        raise ConcurrentTransitionError(f"model version {current.ref} changed state concurrently; re-read it")
    conn.execute(insert(E).values(run_hash=current.run_hash, from_state=current.state.value, to_state=to.value, reason=reason, actor=actor, at=now))
    return _load(conn, current.run_hash)


def _aliases_at(conn: Connection, run_hash: str, among: Collection[str]) -> list[str]:
    return sorted(a for (a,) in conn.execute(select(A.c.alias).where(A.c.run_hash == run_hash)) if a in among)


def _refuse_own_training(version: ModelVersion, identity: str | None) -> None:
    """Separation of duties, as for datasets: the identity that trained a model version never approves it."""
    if identity is not None and identity == version.trained_by:
        raise AccessDeniedError(
            f"identity {identity!r} trained {version.ref} and cannot approve it (role 'approver': separation of duties); another approver must",
            ref=version.ref,
            detail={"identity": identity, "role": "approver", "trained_by": version.trained_by},
        )


class ModelRecords(RegistryTransactions):
    """The model registry of one registry: ``ModelRecords.of(registry)`` (its engine, clock and protected aliases)."""

    protected: frozenset[str] = frozenset(DEFAULT_PROTECTED_ALIASES)

    @classmethod
    def of(cls, registry: Registry) -> ModelRecords:
        records = cls(registry.engine, clock=registry._clock)
        records.protected = registry.protected_aliases
        return records

    # ------------------------------------------------------------ versions

    def register(self, model: str, run_hash: str, *, trained_on: str, trained_by: str, actor: str) -> tuple[ModelVersion, bool]:
        """Record ``model@sha256:run_hash`` as PUBLISHED (idempotent); False when it was registered already."""

        def work(conn: Connection) -> tuple[ModelVersion, bool]:
            now = self._now()
            values = {"model": model, "state": S.PUBLISHED.value, "trained_on": trained_on, "trained_by": trained_by}
            created = insert_ignore(conn, V, run_hash=run_hash, registered_at=now, registered_by=actor, **values)
            if created:
                conn.execute(insert(E).values(run_hash=run_hash, from_state=None, to_state=S.PUBLISHED.value, reason="registered", actor=actor, at=now))
            return _load(conn, run_hash), created

        return self._retrying(work)

    def get(self, run_hash: str) -> ModelVersion | None:
        with self._read() as conn:
            row = conn.execute(select(V).where(V.c.run_hash == run_hash)).first()
        return None if row is None else _version(row)

    def versions(self, *, model: str | None = None, prefix: str | None = None) -> list[ModelVersion]:
        """Registered versions, newest first: of one model, or whose run hash starts with ``prefix``."""
        stmt = select(V).order_by(V.c.registered_at.desc(), V.c.run_hash)
        if model is not None:
            stmt = stmt.where(V.c.model == model)
        if prefix is not None:
            stmt = stmt.where(V.c.run_hash.like(f"{prefix}%"))
        with self._read() as conn:
            return [_version(r) for r in conn.execute(stmt)]

    def approve(self, run_hash: str, *, reason: str, actor: str, audit_as: str | None) -> tuple[ModelVersion, bool]:
        """PUBLISHED -> ELIGIBLE with an event; refused to its trainer; ``(version, False)`` when it was ELIGIBLE already."""

        def work(conn: Connection) -> tuple[ModelVersion, bool]:
            current = _load(conn, run_hash)
            _refuse_own_training(current, audit_as)
            if not check_approvable(current.ref, current.state):
                return current, False
            updated = _set_state(conn, current, S.ELIGIBLE, reason=reason, actor=actor, now=self._now())
            audit_in(conn, audit_as, "model.approve", updated.ref, reason=reason, now=self._now(), detail={})
            return updated, True

        return self._retrying(work, also=(ConcurrentTransitionError,))

    def revoke(self, run_hash: str, *, reason: str, actor: str, force: bool, audit_as: str | None) -> tuple[ModelVersion, bool, list[str]]:
        """ELIGIBLE -> PUBLISHED with an event; refused while a protected alias points at it, unless ``force``."""

        def work(conn: Connection) -> tuple[ModelVersion, bool, list[str]]:
            current = _load(conn, run_hash)
            if not check_revocable(current.ref, current.state):
                return current, False, []
            seen = _aliases_at(conn, run_hash, self.protected)
            check_revoke_aliases(current.ref, seen, force=force)
            note = f"{reason} (forced: protected alias(es) {', '.join(seen)} still point here)" if seen else reason
            updated = _set_state(conn, current, S.PUBLISHED, reason=note, actor=actor, now=self._now())
            if _aliases_at(conn, run_hash, self.protected) != seen:  # re-read under the row lock the update took
                raise ConcurrentTransitionError(f"protected aliases of {current.ref} moved during the revocation; re-read it")
            audit_in(conn, audit_as, "model.revoke", updated.ref, reason=reason, now=self._now(), detail={"forced": bool(seen)})
            return updated, True, seen

        return self._retrying(work, also=(ConcurrentTransitionError,))

    def events(self, run_hash: str) -> list[dict[str, Any]]:
        with self._read() as conn:
            rows = conn.execute(select(E).where(E.c.run_hash == run_hash).order_by(E.c.id))
            return [{"from": r.from_state, "to": r.to_state, "reason": r.reason, "actor": r.actor, "at": r.at.isoformat()} for r in rows]

    # ------------------------------------------------------------ aliases

    def get_alias(self, model: str, alias: str) -> ModelAlias | None:
        with self._read() as conn:
            row = conn.execute(select(A).where(A.c.model == model, A.c.alias == alias)).first()
        return None if row is None else _alias(row)

    def aliases(self, *, model: str | None = None, run_hashes: Collection[str] | None = None) -> list[ModelAlias]:
        stmt = select(A).order_by(A.c.model, A.c.alias)
        if model is not None:
            stmt = stmt.where(A.c.model == model)
        if run_hashes is not None:
            stmt = stmt.where(A.c.run_hash.in_(sorted(run_hashes)))
        with self._read() as conn:
            return [_alias(r) for r in conn.execute(stmt)]

    def set_alias(self, model: str, alias: str, run_hash: str, *, expect: str | None, actor: str, reason: str, audit_as: str | None) -> ModelAlias:
        """Compare-and-swap: point ``model@alias`` at a version of ``model`` if it still points at ``expect`` (None: create)."""
        return self._retrying(lambda conn: self._swap(conn, model, alias, run_hash, expect=expect, actor=actor, reason=reason, audit_as=audit_as))

    def _swap(
        self, conn: Connection, model: str, alias: str, run_hash: str, *, expect: str | None, actor: str, reason: str, audit_as: str | None
    ) -> ModelAlias:
        now = self._now()
        version = _load(conn, run_hash, lock=True)  # share-locked: a concurrent revocation waits, or committed before and is read here
        if version.model != model:
            raise NotFoundError(f"alias {model}@{alias} cannot point to {version.ref}: it is a version of {version.model}, not {model}", ref=version.ref)
        check_protected_target(alias, version.ref, version.state, self.protected, approve_with=f"dsv model approve {version.ref} --reason TEXT")
        where = (A.c.model == model, A.c.alias == alias)
        if expect is None:
            moved = insert_ignore(conn, A, model=model, alias=alias, run_hash=run_hash, generation=1, updated_at=now, updated_by=actor)
        else:
            values = {"run_hash": run_hash, "generation": A.c.generation + 1, "updated_at": now, "updated_by": actor}
            moved = conn.execute(update(A).where(*where, A.c.run_hash == expect).values(**values)).rowcount == 1
        row = conn.execute(select(A).where(*where)).first()
        if not moved or row is None:
            actual = None if row is None else row.run_hash
            raise StaleAliasError(
                f"model alias {model}@{alias} was expected to point to {expect or '(nothing: create)'} but points to {actual or '(nothing)'}; "
                f"re-read it (dsv model list --json) and decide again",
                actual=actual,
                generation=None if row is None else row.generation,
            )
        current = _alias(row)
        move = {"old_target": expect, "new_target": run_hash, "generation": current.generation, "actor": actor, "reason": reason, "at": now}
        conn.execute(insert(H).values(model=model, alias=alias, **move))
        audit_in(conn, audit_as, "model.alias.move", current.ref, reason=reason or None, now=now, detail={"from": expect, "to": run_hash})
        return current

    def alias_history(self, model: str, alias: str) -> list[ModelAliasMove]:
        with self._read() as conn:
            rows = conn.execute(select(H).where(H.c.model == model, H.c.alias == alias).order_by(H.c.generation, H.c.id))
            return [ModelAliasMove(r.model, r.alias, r.old_target, r.new_target, r.generation, r.actor, r.reason, r.at) for r in rows]

    # ------------------------------------------------------------ deployments

    def record_deployment(self, target: str, run_hash: str, *, actor: str, reason: str, audit_as: str | None) -> Deployment:
        """One deployment event and its ``model_run --deployed_to--> deployment`` lineage edge, in one transaction."""

        def work(conn: Connection) -> Deployment:
            now = self._now()
            version = _load(conn, run_hash)
            values = {"target": target, "model": version.model, "run_hash": run_hash, "actor": actor, "reason": reason, "at": now}
            new_id = q.inserted_id(conn.execute(insert(D).values(**values)))
            kind, ident = deployment_node(target, run_hash)
            le = s.lineage_edges
            edge = (le.c.src_kind == NodeKind.MODEL_RUN.value, le.c.src_id == run_hash, le.c.dst_kind == kind, le.c.dst_id == ident)
            if conn.execute(select(le.c.id).where(*edge)).first() is None:
                attributes = canonical_json.dumps({"model": version.model, "target": target, "recorded_by": actor}).decode()
                ends = {"src_kind": NodeKind.MODEL_RUN.value, "src_id": run_hash, "dst_kind": kind, "dst_id": ident}
                conn.execute(insert(le).values(**ends, relation=Relation.DEPLOYED_TO.value, recorded_at=now, attributes_json=attributes))
            detail = {"model": version.model, "run_hash": run_hash, "deployment": new_id}
            audit_in(conn, audit_as, "deploy.record", f"deployment:{target}", reason=reason or None, now=now, detail=detail)
            row = conn.execute(select(D).where(D.c.id == new_id)).one()
            return _deployment(row, _current_ids(conn))

        return self._retrying(work)

    def deployments(self, *, target: str | None = None, run_hashes: Collection[str] | None = None, current_only: bool = False) -> list[Deployment]:
        """Deployment events, newest first (of one target, of some versions); ``current`` marks each target's newest."""
        stmt = select(D).order_by(D.c.id.desc())
        if target is not None:
            stmt = stmt.where(D.c.target == target)
        if run_hashes is not None:
            stmt = stmt.where(D.c.run_hash.in_(sorted(run_hashes)))
        with self._read() as conn:
            current = _current_ids(conn)
            found = [_deployment(r, current) for r in conn.execute(stmt)]
        return [d for d in found if d.current] if current_only else found


def model_pointers(conn: Connection) -> list[tuple[str, str, str]]:
    """What GC keeps for the model registry, in the caller's read transaction: ``(kind, name, run hash)`` of every model alias
    (``model_alias``, ``NAME@ALIAS``) and every target's current deployment (``deployment``, the target)."""
    out = [("model_alias", f"{r.model}@{r.alias}", str(r.run_hash)) for r in conn.execute(select(A).order_by(A.c.model, A.c.alias))]
    current = _current_ids(conn)
    out += [("deployment", str(r.target), str(r.run_hash)) for r in conn.execute(select(D).order_by(D.c.target)) if r.id in current]
    return out

