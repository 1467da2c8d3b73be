"""Who launched a Dagster-built realization (migration 18), and the approval rule for a launch nobody proved (docs/trust.md).

:func:`record_launch` writes the realization's builder and its launch in the caller's transaction: the launcher a valid
signed launch request proved is the builder; otherwise the service identity the run acted as is, and the launch is
unverified. A launch request's nonce is claimed by the first run that shows it (:func:`claim_nonce`): a replay proves nothing.
:func:`refuse_unverified_approver` keeps an unverified build from being approved by anyone who could have launched it.
Both rows are copied into the realization's signed statement at publication (:func:`launch_document`); :func:`build_problem`
names a row that no longer says what the statement signed (an insider's UPDATE), and the approval rules read the signed values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from dsv_platform.adapters.registry import schema_trust as st
from dsv_platform.adapters.registry.certificates import grant_of
from dsv_platform.core.errors import AccessDeniedError
from dsv_platform.core.publication.records import Realization
from dsv_platform.core.trust.trust import Role, grant_covers


@dataclass(frozen=True)
class Launch:
    """One run's launch: ``launcher`` is the identity a valid launch request proved (None: unverified, ``reason`` says why)."""

    service: str
    run_id: str
    job: str
    launcher: str | None = None
    nonce: str | None = None
    reason: str = "no launch request"

    @property
    def builder(self) -> str:
        return self.launcher or self.service


@dataclass(frozen=True)
class SignedBuild:
    """What a realization's verified signed statement says about its build: the builder, and the launch (when the statement signs it)."""

    builder: str
    launch: Launch | None = None
    signs_launch: bool = False
    """False: a statement from before launches were signed; the launch row is then taken as it is."""


def launch_document(launch: Launch | None) -> dict[str, str | None] | None:
    """``launch`` as its signed statement carries it (None: not a Dagster build)."""
    return None if launch is None else {f.name: getattr(launch, f.name) for f in fields(Launch)}


def launch_from_document(doc: Mapping[str, Any] | None) -> Launch | None:
    if doc is None:
        return None
    return Launch(str(doc["service"]), str(doc["run_id"]), str(doc["job"]), doc.get("launcher"), doc.get("nonce"), str(doc["reason"]))


def builder_row(conn: Connection, realization_id: int) -> str | None:
    b = st.realization_builders
    found = conn.execute(select(b.c.identity).where(b.c.realization_id == realization_id)).scalar()
    return None if found is None else str(found)


def build_problem(conn: Connection, realization: Realization, signed: SignedBuild) -> tuple[str, str] | None:
    """The first builder or launch field whose row disagrees with the signed statement, and why, as (field, sentence); None when none does.

    A missing builder row is not a disagreement (a build without a trust gate records none; the signed builder is used).
    """
    ref = realization.ref
    row = builder_row(conn, realization.id)
    if row is not None and row != signed.builder:
        return "builder", (f"{ref}: the registry's builder row names {row!r}, but the realization's signed statement names builder "
                           f"{signed.builder!r}: the row was changed (realization_builders.identity)")  # fmt: skip
    if not signed.signs_launch:
        return None
    launch = launch_of(conn, realization.id)
    if launch == signed.launch:
        return None
    if launch is None or signed.launch is None:
        what = "is missing" if launch is None else "exists"
        signed_doc = launch_document(signed.launch)
        return "launch", f"{ref}: the registry's launch row {what}, but the realization's signed statement says {signed_doc}: the row was changed"
    f = next(f.name for f in fields(Launch) if getattr(launch, f.name) != getattr(signed.launch, f.name))
    return f, (f"{ref}: the registry's launch row has {f} {getattr(launch, f)!r}, but the realization's signed statement has "
               f"{getattr(signed.launch, f)!r}: the row was changed (realization_launches.{f})")  # fmt: skip


def claim_nonce(conn: Connection, nonce: str, run_id: str, identity: str, now: datetime) -> str | None:
    """Claim a launch request's ``nonce`` for ``run_id``; the other run that claimed it first (a replay), else None."""
    t = st.launch_nonces
    claimed = conn.execute(select(t.c.run_id).where(t.c.nonce == nonce)).scalar()
    if claimed is None:
        conn.execute(insert(t).values(nonce=nonce, run_id=run_id, identity=identity, claimed_at=now))
        return None
    return None if claimed == run_id else str(claimed)


def record_launch(conn: Connection, realization_id: int, launch: Launch, now: datetime) -> Launch:
    """Record ``launch`` and its builder for ``realization_id`` (first writer wins: a rerun changes neither); the launch as stored."""
    t = st.realization_launches
    if conn.execute(select(t.c.realization_id).where(t.c.realization_id == realization_id)).first() is None:
        conn.execute(
            insert(t).values(
                realization_id=realization_id, launcher=launch.launcher, service=launch.service, run_id=launch.run_id,
                job=launch.job, nonce=launch.nonce, reason=launch.reason, recorded_at=now,
            )
        )  # fmt: skip
    b = st.realization_builders
    if conn.execute(select(b.c.identity).where(b.c.realization_id == realization_id)).first() is None:
        conn.execute(insert(b).values(realization_id=realization_id, identity=launch.builder, recorded_at=now))
    return launch_of(conn, realization_id) or launch


def launch_of(conn: Connection, realization_id: int) -> Launch | None:
    t = st.realization_launches
    row = conn.execute(select(t).where(t.c.realization_id == realization_id)).first()
    return None if row is None else Launch(row.service, row.run_id, row.job, row.launcher, row.nonce, row.reason)


def refuse_unverified_approver(conn: Connection, realization: Realization, identity: str, signed: SignedBuild | None = None) -> None:
    """An unverified launch is approved only by an identity that holds no ``builder`` grant covering the definition.

    With ``signed`` (a statement that signs the launch), the signed launch decides, never the row.
    """
    launch = signed.launch if signed is not None and signed.signs_launch else launch_of(conn, realization.id)
    if launch is None or launch.launcher is not None:
        return
    scope = f"{realization.dataset}:{realization.version}"
    g = st.grants
    rows = conn.execute(select(g).where(g.c.identity == identity, g.c.role == Role.BUILDER.value))
    if any(grant_covers(grant_of(r), Role.BUILDER, definition=scope) for r in rows):
        raise AccessDeniedError(
            f"{realization.ref} was launched unverified in Dagster run {launch.run_id} ({launch.reason}; built as {launch.service!r}); "
            f"identity {identity!r} holds a builder grant on {scope}, so it could have launched it, and cannot approve it: "
            "an approver without a builder grant on it must (separation of duties)",
            ref=realization.ref,
            detail={"identity": identity, "role": "approver", "launch": "unverified", "run_id": launch.run_id},
        )
