"""Approval, revocation and the protected-alias check, inside the registry's write transactions.

The state an alias move depends on is read with ``SELECT ... FOR SHARE`` on
PostgreSQL (SQLite serializes writers with ``BEGIN IMMEDIATE``), so a revocation
committing in another connection either happens before the move (the move then
reads PUBLISHED and is refused) or waits for it (and then sees the alias).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.engine import Connection

from dsv_platform.adapters.registry import queries as q
from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry.launches import SignedBuild, build_problem, builder_row, refuse_unverified_approver
from dsv_platform.core.errors import AccessDeniedError, UntrustedError
from dsv_platform.core.publication.approval import check_approvable, check_revocable, check_revoke_aliases
from dsv_platform.core.publication.records import Realization
from dsv_platform.core.publication.states import ConcurrentTransitionError, RealizationState

S = RealizationState


def locked_state(conn: Connection, name: str, version: str, manifest_hash: str) -> RealizationState | None:
    """The state of the published realization ``name:version@sha256:manifest_hash``, its row share-locked until commit."""
    r, c = s.realizations, s.publication_claims
    stmt = (
        select(r.c.state)
        .join(c, c.c.realization_id == r.c.id)
        .where(c.c.dataset == name, c.c.version == version, c.c.manifest_hash == manifest_hash)
        .with_for_update(read=True, of=r)
    )
    state = conn.execute(stmt).scalar()
    return None if state is None else RealizationState(state)


def aliases_at(conn: Connection, realization: Realization, among: Collection[str]) -> list[str]:
    """The aliases in ``among`` that point at ``realization`` now."""
    a = s.aliases
    rows = conn.execute(
        select(a.c.alias).where(a.c.dataset == realization.dataset, a.c.version == realization.version, a.c.target_manifest_hash == realization.manifest_hash)
    )
    return sorted(alias for (alias,) in rows if alias in among)


def refuse_own_build(conn: Connection, realization: Realization, identity: str, signed: SignedBuild | None = None) -> None:
    """Separation of duties: the identity that built ``realization`` never approves it (docs/trust.md).

    With ``signed`` (what the realization's verified statement says), a builder or launch row that disagrees is UNTRUSTED
    (the field named), and the signed values decide: an UPDATE or DELETE of the rows moves nobody past the rule.
    """
    if signed is not None and (problem := build_problem(conn, realization, signed)) is not None:
        field, why = problem
        raise UntrustedError(why, ref=realization.ref, detail={"field": field, "identity": identity})
    builder = signed.builder if signed is not None else builder_row(conn, realization.id)
    if builder is not None and builder == identity:
        raise AccessDeniedError(
            f"identity {identity!r} built {realization.ref} and cannot approve it (role 'approver': separation of duties); another approver must",
            ref=realization.ref,
            detail={"identity": identity, "role": "approver", "builder": builder},
        )
    refuse_unverified_approver(conn, realization, identity, signed)  # a Dagster build nobody proved launching: no possible launcher approves it


def audit_in(conn: Connection, identity: str | None, action: str, target: str, *, reason: str | None, now: datetime, detail: dict[str, object]) -> None:
    """One audit entry in the caller's transaction (nothing when ``identity`` is None: no trust gate)."""
    if identity is not None:  # in the same transaction as the state change
        from dsv_platform.adapters.registry.trust import append_audit  # here: trust.py imports registry.py, which imports this module

        append_audit(conn, now=now, identity=identity, action=action, target=target, reason=reason, detail=detail)


def approve(
    conn: Connection, realization_id: int, *, reason: str, actor: str, now: datetime, audit_as: str | None = None, signed: SignedBuild | None = None
) -> tuple[Realization, bool]:
    """PUBLISHED -> ELIGIBLE with an event (actor, reason); ``(realization, False)`` when it was ELIGIBLE already.

    ``audit_as``: the approving identity; refused if it built the realization (``signed``: by its signed statement), audited here.
    """
    current = q.load_realization(conn, realization_id)
    if audit_as is not None:
        refuse_own_build(conn, current, audit_as, signed)
    if not check_approvable(current.ref, current.state):
        return current, False
    updated = q.set_state(conn, current, S.ELIGIBLE, reason=reason, actor=actor, at=now)
    audit_in(conn, audit_as, "approve", updated.ref, reason=reason, now=now, detail={})
    return updated, True


def revoke(
    conn: Connection, realization_id: int, *, reason: str, actor: str, now: datetime, protected: Collection[str], force: bool, audit_as: str | None = None
) -> tuple[Realization, bool, list[str]]:
    """ELIGIBLE -> PUBLISHED with an event; refused while a protected alias points at it unless ``force``.

    Returns the realization, whether it changed, and the protected aliases still pointing at it.
    The aliases are read again after the update took the row lock: a concurrent move either
    committed before (seen here; the registry retries and refuses) or waits and then reads PUBLISHED.
    """
    current = q.load_realization(conn, realization_id)
    if not check_revocable(current.ref, current.state):
        return current, False, []
    seen = aliases_at(conn, current, protected)
    check_revoke_aliases(current.ref, seen, force=force)
    note = f"{reason} (forced: protected alias(es) {', '.join(seen)} still point here)" if seen else reason
    updated = q.set_state(conn, current, S.PUBLISHED, reason=note, actor=actor, at=now)
    pointing = aliases_at(conn, current, protected)  # re-read under the row lock the update took
    if pointing != seen:
        raise ConcurrentTransitionError(f"protected aliases of {current.ref} moved during the revocation; re-read it")
    audit_in(conn, audit_as, "revoke", updated.ref, reason=reason, now=now, detail={"forced": bool(pointing)})
    return updated, True, pointing
