"""Registered consumers of a definition (``dataset_consumers``, migration 5) and the gate they set.

A consumer is ``(dataset, name, columns)``: who reads a definition name and which of its
columns. :func:`refuse_breaking_change` runs inside the transaction that registers a
definition version again with another output contract: a change that breaks a consumer
is refused naming it (docs/schema-evolution.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection

from dsv_platform.adapters.registry import queries as q
from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry.transactions import RegistryTransactions
from dsv_platform.core import canonical_json
from dsv_platform.core.contracts.contract import parse_contract
from dsv_platform.core.contracts.schema_diff import Consumer, diff_contracts, refuse_breaking
from dsv_platform.core.errors import ContractError, NotFoundError
from dsv_platform.core.publication.records import Definition

T = s.dataset_consumers


def upsert(conn: Connection, dataset: str, name: str, columns: Sequence[str], *, actor: str, now: datetime) -> Consumer:
    """Register ``name`` as a consumer of ``dataset`` (again: its columns are replaced)."""
    doc = canonical_json.dumps(list(columns)).decode()
    found = conn.execute(select(T.c.name).where(T.c.dataset == dataset, T.c.name == name)).first()
    if found is None:
        conn.execute(insert(T).values(dataset=dataset, name=name, columns_json=doc, created_by=actor, created_at=now))
    else:
        conn.execute(update(T).where(T.c.dataset == dataset, T.c.name == name).values(columns_json=doc, created_by=actor, created_at=now))
    return Consumer(name, tuple(columns))


def remove(conn: Connection, dataset: str, name: str) -> None:
    if conn.execute(delete(T).where(T.c.dataset == dataset, T.c.name == name)).rowcount != 1:
        raise NotFoundError(f"no consumer {name!r} registered for {dataset}", ref=dataset)


def list_consumers(conn: Connection, dataset: str | None = None) -> list[tuple[str, Consumer]]:
    """``(dataset, consumer)`` pairs, by dataset then name."""
    stmt = select(T.c.dataset, T.c.name, T.c.columns_json).order_by(T.c.dataset, T.c.name)
    if dataset is not None:
        stmt = stmt.where(T.c.dataset == dataset)
    return [(row.dataset, Consumer(row.name, tuple(json.loads(row.columns_json)))) for row in conn.execute(stmt)]


def latest_definition(conn: Connection, dataset: str) -> Definition | None:
    """The newest registered version of ``dataset`` (by registration time), else None."""
    t = s.dataset_definitions
    row = conn.execute(select(t).where(t.c.name == dataset).order_by(t.c.created_at.desc(), t.c.version.desc())).first()
    return None if row is None else q.definition_from_row(row)


def refuse_breaking_change(conn: Connection, existing: Definition, contract: Mapping[str, Any]) -> None:
    """Raise ConsumerBreakError when ``contract`` (re-registered under ``existing``'s version) breaks a registered consumer."""
    consumers = [c for _, c in list_consumers(conn, existing.name)]
    if not consumers:
        return
    where = f"{existing.name}:{existing.version}"
    try:
        old = parse_contract(json.loads(existing.contract_json), source=f"registered {where}")
        new = parse_contract(contract, source=f"new {where}")
    except ContractError:  # not a full contract on one side: nothing to classify, the plain conflict stands
        return
    refuse_breaking(diff_contracts(old, new, consumers), definition=where)


class ConsumerRepository:
    """The consumers table of a registry, in its transactions (a lost race is retried, times come from its clock)."""

    def __init__(self, registry: RegistryTransactions) -> None:
        self.registry = registry

    def add(self, dataset: str, name: str, columns: Sequence[str], *, actor: str) -> Consumer:
        now = self.registry._now()
        return self.registry._retrying(lambda conn: upsert(conn, dataset, name, columns, actor=actor, now=now))

    def remove(self, dataset: str, name: str) -> None:
        with self.registry._write() as conn:
            remove(conn, dataset, name)

    def list(self, dataset: str | None = None) -> list[tuple[str, Consumer]]:
        with self.registry._read() as conn:
            return list_consumers(conn, dataset)

    def latest_definition(self, dataset: str) -> Definition | None:
        with self.registry._read() as conn:
            return latest_definition(conn, dataset)
