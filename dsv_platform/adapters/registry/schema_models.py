"""The model registry's tables (migration 19), on the same metadata as schema.py.

Model versions (one per complete model run, keyed by its run manifest hash) with their approval state and
events, model aliases with their history, and deployment events. Events, alias history and deployments are
append-only. migrations.py imports this module, so the tables are part of ``schema.metadata``.
"""

from __future__ import annotations

from sqlalchemy import Column, ForeignKey, Index, Integer, String, Table, Text

from dsv_platform.adapters.registry.schema import HASH, NAME, UtcDateTime, metadata

model_versions = Table(
    "model_versions",
    metadata,
    Column("run_hash", HASH, primary_key=True),  # the run manifest hash (core/reproduction/model_run.py)
    Column("model", NAME, nullable=False, index=True),  # the run manifest's model name
    Column("state", String(20), nullable=False),  # PUBLISHED, or ELIGIBLE once approved
    Column("trained_on", Text, nullable=False),  # the realization ref the run trained on
    Column("trained_by", NAME, nullable=False),  # the identity that ran the training (never approves it)
    Column("registered_at", UtcDateTime, nullable=False),
    Column("registered_by", NAME, nullable=False),
)

model_version_events = Table(  # append-only
    "model_version_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_hash", HASH, ForeignKey("model_versions.run_hash"), nullable=False, index=True),
    Column("from_state", String(20)),
    Column("to_state", String(20), nullable=False),
    Column("reason", Text, nullable=False),
    Column("actor", NAME, nullable=False),
    Column("at", UtcDateTime, nullable=False),
)

model_aliases = Table(
    "model_aliases",
    metadata,
    Column("model", NAME, primary_key=True),
    Column("alias", NAME, primary_key=True),
    Column("run_hash", HASH, ForeignKey("model_versions.run_hash"), nullable=False),
    Column("generation", Integer, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    Column("updated_by", NAME, nullable=False),
)

model_alias_history = Table(  # append-only
    "model_alias_history",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("model", NAME, nullable=False),
    Column("alias", NAME, nullable=False),
    Column("old_target", HASH),
    Column("new_target", HASH, nullable=False),
    Column("generation", Integer, nullable=False),
    Column("actor", NAME, nullable=False),
    Column("reason", Text, nullable=False),
    Column("at", UtcDateTime, nullable=False),
    Index("ix_model_alias_history_alias", "model", "alias", "generation"),
)

model_deployments = Table(  # append-only: a target's newest row is its current deployment
    "model_deployments",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("target", NAME, nullable=False, index=True),
    Column("model", NAME, nullable=False),
    Column("run_hash", HASH, ForeignKey("model_versions.run_hash"), nullable=False, index=True),
    Column("actor", NAME, nullable=False),
    Column("reason", Text, nullable=False),
    Column("at", UtcDateTime, nullable=False),
)

MODEL_TABLES = (model_versions, model_version_events, model_aliases, model_alias_history, model_deployments)
APPEND_ONLY = (model_version_events, model_alias_history, model_deployments)
