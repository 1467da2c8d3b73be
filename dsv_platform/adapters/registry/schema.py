"""The registry's tables as they are after the newest migration (what queries use).

The DDL that creates them lives in :mod:`migrations` (frozen per version); a
test checks that an upgraded database has exactly these tables and columns.
JSON is stored as canonical JSON text; times are UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

HASH = String(64)
NAME = String(200)
VERSION = String(100)


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite keeps naive UTC text)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"registry times must be timezone-aware, got naive {value!r}")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        moment: datetime = value
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


metadata = MetaData()

schema_version = Table(
    "schema_version",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("description", Text, nullable=False),
    Column("applied_at", UtcDateTime, nullable=False),
)

dataset_definitions = Table(
    "dataset_definitions",
    metadata,
    Column("name", NAME, primary_key=True),
    Column("version", VERSION, primary_key=True),
    Column("contract_json", Text, nullable=False),
    Column("contract_hash", HASH, nullable=False),
    Column("recipe_json", Text, nullable=False),
    Column("recipe_hash", HASH, nullable=False),
    Column("owner", NAME, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("allowed_readers_json", Text, nullable=False, server_default="[]"),  # v2
)

realizations = Table(
    "realizations",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("dataset", NAME, nullable=False),
    Column("version", VERSION, nullable=False),
    Column("state", String(20), nullable=False),
    Column("request_id", NAME, nullable=False, unique=True),
    Column("logical_key", Text, nullable=False),
    Column("manifest_hash", HASH),
    Column("content_hash", HASH),
    Column("schema_hash", HASH),
    Column("human_version", String(40)),
    Column("created_at", UtcDateTime, nullable=False),
    Column("created_by", NAME, nullable=False),
    Column("state_changed_at", UtcDateTime, nullable=False),
    Column("published_at", UtcDateTime),
    Column("redaction_generation", Integer),  # v2
    ForeignKeyConstraint(["dataset", "version"], ["dataset_definitions.name", "dataset_definitions.version"]),
    UniqueConstraint("dataset", "version", "human_version", name="uq_realizations_human_version"),
    Index("ix_realizations_manifest", "dataset", "version", "manifest_hash"),
)

realization_events = Table(  # append-only (triggers refuse UPDATE and DELETE)
    "realization_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("realization_id", Integer, ForeignKey("realizations.id"), nullable=False, index=True),
    Column("from_state", String(20)),
    Column("to_state", String(20), nullable=False),
    Column("reason", Text, nullable=False),
    Column("actor", NAME, nullable=False),
    Column("at", UtcDateTime, nullable=False),
)

manifests = Table(
    "manifests",
    metadata,
    Column("manifest_hash", HASH, primary_key=True),
    Column("dataset", NAME, nullable=False),
    Column("version", VERSION, nullable=False),
    Column("canonical_json", Text, nullable=False),
    Column("stored_at", UtcDateTime, nullable=False),
)

# The one conditional insert of publication: a row here IS the publication.
# Its unique constraints make exactly one winner per logical key, per manifest
# and per human version, on SQLite and PostgreSQL alike.
publication_claims = Table(
    "publication_claims",
    metadata,
    Column("realization_id", Integer, ForeignKey("realizations.id"), primary_key=True, autoincrement=False),
    Column("dataset", NAME, nullable=False),
    Column("version", VERSION, nullable=False),
    Column("logical_key", Text, nullable=False),
    Column("manifest_hash", HASH, nullable=False),
    Column("human_version", String(40), nullable=False),
    Column("request_id", NAME, nullable=False, unique=True),
    Column("claimed_at", UtcDateTime, nullable=False),
    UniqueConstraint("dataset", "version", "logical_key", name="uq_claims_logical_key"),
    UniqueConstraint("dataset", "version", "manifest_hash", name="uq_claims_manifest"),
    UniqueConstraint("dataset", "version", "human_version", name="uq_claims_human_version"),
)

aliases = Table(
    "aliases",
    metadata,
    Column("dataset", NAME, primary_key=True),
    Column("version", VERSION, primary_key=True),
    Column("alias", NAME, primary_key=True),
    Column("target_manifest_hash", HASH, nullable=False),
    Column("generation", Integer, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    Column("updated_by", NAME, nullable=False),
)

alias_history = Table(  # append-only
    "alias_history",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("dataset", NAME, nullable=False),
    Column("version", VERSION, nullable=False),
    Column("alias", NAME, nullable=False),
    Column("old_target", HASH),
    Column("new_target", HASH, nullable=False),
    Column("generation", Integer, nullable=False),
    Column("actor", NAME, nullable=False),
    Column("reason", Text, nullable=False),
    Column("at", UtcDateTime, nullable=False),
    Index("ix_alias_history_alias", "dataset", "version", "alias", "generation"),
)

# ---- v2: tables later issues fill (lineage, retention, consumption, privacy, reproduction)

lineage_edges = Table(
    "lineage_edges",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("src_kind", String(40), nullable=False),
    Column("src_id", Text, nullable=False),
    Column("dst_kind", String(40), nullable=False),
    Column("dst_id", Text, nullable=False),
    Column("relation", String(40), nullable=False),
    Column("recorded_at", UtcDateTime, nullable=False),
    Column("attributes_json", Text, nullable=False, server_default="{}"),
    Index("ix_lineage_src", "src_kind", "src_id"),
    Index("ix_lineage_dst", "dst_kind", "dst_id"),
)

RETENTION_ROOT_KINDS = ("model_version", "legal_hold", "report", "experiment", "alias", "rollback_window", "artifact", "definition_retention")  # issues 14, 27

retention_roots = Table(
    "retention_roots",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(40), nullable=False),
    Column("ref", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("owner", NAME, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("expires_at", UtcDateTime),
    Column("released_at", UtcDateTime),
    Index("ix_retention_roots_kind", "kind"),
)

consumption_records = Table(
    "consumption_records",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("actor", NAME, nullable=False),
    Column("ref", Text, nullable=False),
    Column("realization_id", Integer),
    Column("manifest_hash", HASH),
    Column("ok", Boolean, nullable=False),
    Column("failure_kind", String(20)),
    Column("at", UtcDateTime, nullable=False),
    Column("detail_json", Text, nullable=False, server_default="{}"),
)

redaction_generations = Table(  # append-only; generation strictly increases
    "redaction_generations",
    metadata,
    Column("generation", Integer, primary_key=True, autoincrement=False),
    Column("subject_key_hash", HASH, nullable=False),
    Column("reason", Text, nullable=False),
    Column("actor", NAME, nullable=False),
    Column("at", UtcDateTime, nullable=False),
)

reproduction_records = Table(
    "reproduction_records",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("ref", Text, nullable=False),
    Column("manifest_hash", HASH, nullable=False),
    Column("actor", NAME, nullable=False),
    Column("at", UtcDateTime, nullable=False),
    Column("outcome", String(40), nullable=False),
    Column("details_json", Text, nullable=False, server_default="{}"),
)

# ---- v3: privacy deletion (subject index, requests, per-descendant outcomes)

subject_index = Table(  # subject key hash (salted SHA-256, never the raw key) -> what holds its rows
    "subject_index",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("subject_key_hash", HASH, nullable=False),
    Column("kind", String(40), nullable=False),
    Column("descendant_id", Text, nullable=False),
    Column("manifest_hash", HASH),
    Column("dataset", NAME),
    Column("version", VERSION),
    Column("rows", Integer, nullable=False),
    Column("indexed_at", UtcDateTime, nullable=False),
    Index("ix_subject_index_subject", "subject_key_hash"),
)

subject_index_scans = Table(  # which manifests the subject index has scanned
    "subject_index_scans",
    metadata,
    Column("manifest_hash", HASH, primary_key=True),
    Column("subject_column", NAME),
    Column("scanned_at", UtcDateTime, nullable=False),
)

subject_index_raw_scans = Table(  # which landed raw objects (by digest) the subject index has scanned
    "subject_index_raw_scans",
    metadata,
    Column("digest", HASH, primary_key=True),
    Column("source", NAME, nullable=False),
    Column("subject_column", NAME),
    Column("scanned_at", UtcDateTime, nullable=False),
)

privacy_requests = Table(
    "privacy_requests",
    metadata,
    Column("request_id", NAME, primary_key=True),
    Column("subject_key_hash", HASH, nullable=False),
    Column("generation", Integer, nullable=False, unique=True),
    Column("reason", Text, nullable=False),
    Column("actor", NAME, nullable=False),
    Column("requested_at", UtcDateTime, nullable=False),
    Column("completed_at", UtcDateTime),
)

privacy_outcomes = Table(  # one outcome per descendant per request
    "privacy_outcomes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("request_id", NAME, ForeignKey("privacy_requests.request_id"), nullable=False),
    Column("generation", Integer, nullable=False),
    Column("kind", String(40), nullable=False),
    Column("descendant_id", Text, nullable=False),
    Column("outcome", String(20), nullable=False),
    Column("legal_basis", Text),
    Column("detail_json", Text, nullable=False, server_default="{}"),
    Column("at", UtcDateTime, nullable=False),
    UniqueConstraint("request_id", "kind", "descendant_id", name="uq_privacy_outcomes_descendant"),
    Index("ix_privacy_outcomes_generation", "generation"),
)

# ---- v5: registered consumers of a definition and the columns they read (schema evolution gate)

dataset_consumers = Table(
    "dataset_consumers",
    metadata,
    Column("dataset", NAME, primary_key=True),
    Column("name", NAME, primary_key=True),
    Column("columns_json", Text, nullable=False),
    Column("created_by", NAME, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
)

# ---- v6: artifact and model runs (intent -> complete | failed) and activities attached to lineage nodes

production_runs = Table(  # one row per artifact production or model training, written before any input is opened
    "production_runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(20), nullable=False),  # "artifact" | "model_run"
    Column("name", NAME, nullable=False),
    Column("state", String(20), nullable=False),  # INTENT | COMPLETE | FAILED
    Column("producer", Text, nullable=False),
    Column("intent_json", Text, nullable=False),
    Column("manifest_hash", HASH),
    Column("manifest_json", Text),  # the canonical manifest document once COMPLETE (also stored as an object under its hash)
    Column("files_json", Text, nullable=False, server_default="{}"),
    Column("error", Text),
    Column("actor", NAME, nullable=False),
    Column("started_at", UtcDateTime, nullable=False),
    Column("finished_at", UtcDateTime),
    Index("ix_production_runs_name", "kind", "name"),
    Index("ix_production_runs_manifest", "manifest_hash"),
)

lineage_activities = Table(  # append-only: a reproduction (or other) record attached to a lineage node
    "lineage_activities",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("node_kind", String(40), nullable=False),
    Column("node_id", Text, nullable=False),
    Column("kind", String(40), nullable=False),
    Column("record_json", Text, nullable=False),
    Column("actor", NAME, nullable=False),
    Column("recorded_at", UtcDateTime, nullable=False),
    Index("ix_lineage_activities_node", "node_kind", "node_id"),
)

# ---- v10: signed realization statements (DSSE envelopes stored as objects beside the manifest)

signatures = Table(  # one per published realization, written in the publication transaction
    "signatures",
    metadata,
    Column("realization_id", Integer, ForeignKey("realizations.id"), primary_key=True, autoincrement=False),
    Column("manifest_hash", HASH, nullable=False),
    Column("envelope_object", HASH, nullable=False),
    Column("signer", NAME, nullable=False),
    Column("keyid", HASH, nullable=False),
    Column("signed_at", UtcDateTime, nullable=False),
    Index("ix_signatures_manifest", "manifest_hash"),
)

# ---- v8: operator quarantines (realizations and raw batches) with their evidence, and two-person releases

quarantines = Table(  # one per quarantine action; the evidence and every affected descendant kept with it
    "quarantines",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(20), nullable=False),  # "realization" | "raw_batch"
    Column("target", Text, nullable=False),  # manifest hash, or raw:<source>/<batch id>
    Column("ref", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("evidence_json", Text, nullable=False, server_default="{}"),
    Column("affected_json", Text, nullable=False, server_default="[]"),
    Column("created_by", NAME, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("state", String(20), nullable=False),  # ACTIVE | RELEASE_PENDING | RELEASED
    Column("released_at", UtcDateTime),
    Index("ix_quarantines_target", "kind", "target"),
)

quarantine_releases = Table(  # append-only: the release request and its approval by a second identity
    "quarantine_releases",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("quarantine_id", Integer, ForeignKey("quarantines.id"), nullable=False),
    Column("action", String(20), nullable=False),  # "request" | "approve"
    Column("identity", NAME, nullable=False),
    Column("reason", Text, nullable=False),
    Column("at", UtcDateTime, nullable=False),
)
