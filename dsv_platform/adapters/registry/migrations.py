"""Versioned schema migrations: a tiny runner of our own.

:func:`upgrade` is idempotent and safe when several processes open the registry at once;
an old database is upgraded in place. Migrations never change once released.

Details: docs/storage.md
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Column, ForeignKeyConstraint, Index, Integer, MetaData, String, Table, Text, UniqueConstraint, func, inspect, select
from sqlalchemy.engine import Connection, Engine

from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry import schema_models as sm
from dsv_platform.adapters.registry import schema_trust as st
from dsv_platform.adapters.registry.collection import gc_deletions
from dsv_platform.adapters.registry.governance import model_decisions, model_obligations
from dsv_platform.adapters.registry.landing_index import APPEND_ONLY as LANDING_APPEND_ONLY
from dsv_platform.adapters.registry.landing_index import LANDING_TABLES
from dsv_platform.adapters.registry.privacy import privacy_plans
from dsv_platform.adapters.registry.read_health import read_health
from dsv_platform.core.errors import ConfigurationError

_PG_LOCK_ID = 0x64737672  # "dsvr"


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    apply: Callable[[Connection], None]


# ---------------------------------------------------------------- frozen shapes


def _v1_tables() -> list[Table]:
    m = MetaData()
    definitions = Table(
        "dataset_definitions",
        m,
        Column("name", s.NAME, primary_key=True),
        Column("version", s.VERSION, primary_key=True),
        Column("contract_json", Text, nullable=False),
        Column("contract_hash", s.HASH, nullable=False),
        Column("recipe_json", Text, nullable=False),
        Column("recipe_hash", s.HASH, nullable=False),
        Column("owner", s.NAME, nullable=False),
        Column("created_at", s.UtcDateTime, nullable=False),
    )
    realizations = Table(
        "realizations",
        m,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("dataset", s.NAME, nullable=False),
        Column("version", s.VERSION, nullable=False),
        Column("state", String(20), nullable=False),
        Column("request_id", s.NAME, nullable=False, unique=True),
        Column("logical_key", Text, nullable=False),
        Column("manifest_hash", s.HASH),
        Column("content_hash", s.HASH),
        Column("schema_hash", s.HASH),
        Column("human_version", String(40)),
        Column("created_at", s.UtcDateTime, nullable=False),
        Column("created_by", s.NAME, nullable=False),
        Column("state_changed_at", s.UtcDateTime, nullable=False),
        Column("published_at", s.UtcDateTime),
        ForeignKeyConstraint(["dataset", "version"], ["dataset_definitions.name", "dataset_definitions.version"]),
        UniqueConstraint("dataset", "version", "human_version", name="uq_realizations_human_version"),
    )
    # Unchanged since v1: created from the current schema, into this metadata so
    # foreign keys resolve against the frozen shapes above.
    rest = [t.to_metadata(m) for t in (s.realization_events, s.manifests, s.publication_claims, s.aliases, s.alias_history)]
    Index("ix_realizations_manifest", realizations.c.dataset, realizations.c.version, realizations.c.manifest_hash)
    return [definitions, realizations, *rest]


def _append_only(conn: Connection, table: str) -> None:
    if conn.dialect.name == "sqlite":
        for op in ("UPDATE", "DELETE"):
            conn.exec_driver_sql(
                f"CREATE TRIGGER {table}_no_{op.lower()} BEFORE {op} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END"
            )
    else:
        conn.exec_driver_sql(
            "CREATE OR REPLACE FUNCTION dsv_append_only() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION USING MESSAGE = TG_TABLE_NAME || ' is append-only'; END $$"
        )
        conn.exec_driver_sql(
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} FOR EACH ROW EXECUTE FUNCTION dsv_append_only()"
        )


# ---------------------------------------------------------------- migrations


def _v1(conn: Connection) -> None:
    for table in _v1_tables():
        table.create(conn)
    _append_only(conn, "realization_events")
    _append_only(conn, "alias_history")


def _v2(conn: Connection) -> None:
    conn.exec_driver_sql("ALTER TABLE dataset_definitions ADD COLUMN allowed_readers_json TEXT NOT NULL DEFAULT '[]'")
    conn.exec_driver_sql("ALTER TABLE realizations ADD COLUMN redaction_generation INTEGER")
    for table in (s.lineage_edges, s.retention_roots, s.consumption_records, s.redaction_generations, s.reproduction_records):
        table.create(conn)
    _append_only(conn, "redaction_generations")


def _v3(conn: Connection) -> None:
    for table in (s.subject_index, s.subject_index_scans, s.privacy_requests, s.privacy_outcomes):
        table.create(conn)


def _v4(conn: Connection) -> None:
    s.subject_index_raw_scans.create(conn)


def _v5(conn: Connection) -> None:
    s.dataset_consumers.create(conn)


def _v6(conn: Connection) -> None:
    s.production_runs.create(conn)
    s.lineage_activities.create(conn)
    _append_only(conn, "lineage_activities")


def _v7(conn: Connection) -> None:
    for table in (st.identities, st.grants, st.audit_log, st.realization_builders):
        table.create(conn)
    _append_only(conn, "audit_log")


def _v8(conn: Connection) -> None:
    s.quarantines.create(conn)
    s.quarantine_releases.create(conn)
    _append_only(conn, "quarantine_releases")


def _v10(conn: Connection) -> None:
    s.signatures.create(conn)
    _append_only(conn, "signatures")


def _v11(conn: Connection) -> None:
    st.registry_properties.create(conn)
    _append_only(conn, "registry_properties")


def _v12(conn: Connection) -> None:
    gc_deletions.create(conn)


def _v13(conn: Connection) -> None:
    privacy_plans.create(conn)


def _v14(conn: Connection) -> None:
    for table in (st.signed_events, st.certificates):
        table.create(conn)
        _append_only(conn, table.name)


def _v15(conn: Connection) -> None:
    for table in (st.audit_signatures, st.audit_checkpoints):
        table.create(conn)
        _append_only(conn, table.name)


def _v16(conn: Connection) -> None:
    st.data_file_digests.create(conn)
    _append_only(conn, st.data_file_digests.name)


def _v18(conn: Connection) -> None:
    for table in (st.realization_launches, st.launch_nonces):
        table.create(conn)
        _append_only(conn, table.name)


def _v19(conn: Connection) -> None:
    for table in sm.MODEL_TABLES:
        table.create(conn)
    for table in sm.APPEND_ONLY:
        _append_only(conn, table.name)


def _v20(conn: Connection) -> None:
    for table in (model_obligations, model_decisions):
        table.create(conn)
        _append_only(conn, table.name)


def _v21(conn: Connection) -> None:
    read_health.create(conn)


def _v22(conn: Connection) -> None:
    for table in LANDING_TABLES:
        table.create(conn)
    for table in LANDING_APPEND_ONLY:
        _append_only(conn, table.name)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "definitions, realizations, events, manifests, publication claims, aliases", _v1),
    Migration(2, "reader ACL, redaction generation; lineage, retention, consumption, redaction, reproduction tables", _v2),
    Migration(3, "privacy deletion: subject index, scans, requests, per-descendant outcomes", _v3),
    Migration(4, "privacy deletion: subject index scans of raw landed batches", _v4),
    Migration(5, "registered consumers of a definition and the columns they read", _v5),
    Migration(6, "artifact and model runs (intent, complete, failed) and activities attached to lineage nodes", _v6),
    Migration(7, "trust: identities and public keys, grants, hash-chained audit log, realization builders", _v7),
    Migration(8, "operator quarantines of realizations and raw batches with evidence and affected descendants; two-person releases", _v8),
    Migration(10, "signed realization statements: DSSE envelope object, signer, key id per published realization", _v10),
    Migration(11, "registry properties recorded once: strictness and the bootstrap identity", _v11),
    Migration(12, "GC deletion intents: objects a GC batch is deleting, which no publication may name meanwhile", _v12),
    Migration(13, "privacy deletion plans: the decisions of a request, recorded with it; completion needs an outcome for each", _v13),
    Migration(14, "signed state transitions and alias moves; operator certificates of identity keys and grants", _v14),
    Migration(15, "signed audit entries and signed checkpoints of the audit head", _v15),
    Migration(16, "SHA-256 and size of every canonical data file the platform wrote, signed", _v16),
    Migration(18, "who launched each Dagster-built realization: the identity a signed launch request proved, or unverified", _v18),
    Migration(19, "model registry: model versions (by run manifest hash) and approvals, model aliases and their history, deployments", _v19),
    Migration(20, "model governance after a privacy deletion: one obligation per affected model run, and the decision closing it", _v20),
    Migration(21, "consumption health: per read of a realization, time to first byte, bytes, rows, seconds, missing and corrupt objects", _v21),
    Migration(22, "the landing index moves into the registry: landed batches, redaction marks, imports of a home's SQLite index", _v22),
)
LATEST = max(m.version for m in MIGRATIONS)  # numbers are reserved per issue: the newest is not always the last one written


# ---------------------------------------------------------------- runner


@contextmanager
def _locked(engine: Engine) -> Iterator[Connection]:
    with engine.connect() as conn:
        conn.execution_options(dsv_write=True)
        with conn.begin():
            if conn.dialect.name == "postgresql":
                conn.execute(select(func.pg_advisory_xact_lock(_PG_LOCK_ID)))
            s.schema_version.create(conn, checkfirst=True)
            yield conn


def _applied(conn: Connection) -> set[int]:
    return set(conn.execute(select(s.schema_version.c.version)).scalars())


def current_version(engine: Engine) -> int:
    """The newest applied migration (0 for an empty database)."""
    with engine.connect() as conn:
        if not inspect(conn).has_table("schema_version"):
            return 0
        return int(conn.execute(select(func.max(s.schema_version.c.version))).scalar() or 0)


def upgrade(engine: Engine, target: int | None = None) -> list[int]:
    """Apply the missing migrations up to ``target`` (default: all); returns those applied.

    An empty database takes them all in one transaction (nothing of it to keep if one fails: it stays empty), an
    older one each in its own. Refuses a database whose schema is newer than this code knows.
    """
    with engine.connect() as conn:  # a read first: an up-to-date registry takes no write lock (a read-only command on a full disk)
        empty = not inspect(conn).has_table("schema_version") or not _applied(conn)
        if not empty and {m.version for m in MIGRATIONS} <= _applied(conn):
            if max(_applied(conn)) > LATEST:
                raise ConfigurationError(f"registry schema v{max(_applied(conn))} is newer than this code (v{LATEST}); upgrade dsv_platform")
            return []
    wanted = [m for m in MIGRATIONS if target is None or m.version <= target]
    applied: list[int] = []
    for group in [wanted] if empty else [[m] for m in wanted]:
        with _locked(engine) as conn:
            done = _applied(conn)
            if done and max(done) > LATEST:
                raise ConfigurationError(f"registry schema v{max(done)} is newer than this code (v{LATEST}); upgrade dsv_platform")
            for migration in (m for m in group if m.version not in done):
                migration.apply(conn)
                conn.execute(
                    s.schema_version.insert().values(version=migration.version, description=migration.description, applied_at=datetime.now(UTC))
                )
                applied.append(migration.version)
    return applied
