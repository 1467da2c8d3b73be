"""The registry's trust tables (migrations 7, 11, 13, 14, 15 and 16), on the same metadata as schema.py.

Identities and their public keys, grants, the hash-chained audit log (append-only),
the identity that built each realization, signed events and certificates. Kept apart from schema.py (its size);
migrations.py imports this module, so the tables are part of ``schema.metadata``.
"""

from __future__ import annotations

from sqlalchemy import Column, ForeignKey, Index, Integer, String, Table, Text, UniqueConstraint

from dsv_platform.adapters.registry.schema import HASH, NAME, UtcDateTime, metadata

identities = Table(
    "identities",
    metadata,
    Column("name", NAME, primary_key=True),
    Column("public_key", String(64), nullable=False),  # raw Ed25519 public key, hex
    Column("fingerprint", String(80), nullable=False),
    Column("created_by", NAME, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
)

grants = Table(
    "grants",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("scope_key", HASH, nullable=False, unique=True),  # sha256 of (identity, role, definition, source, purpose)
    Column("identity", NAME, ForeignKey("identities.name"), nullable=False),
    Column("role", String(40), nullable=False),
    Column("definition", NAME),
    Column("source", NAME),
    Column("purpose", NAME),
    Column("columns_json", Text, nullable=False, server_default="[]"),
    Column("created_by", NAME, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Index("ix_grants_identity", "identity"),
)

audit_log = Table(  # append-only (triggers refuse UPDATE and DELETE); entry_hash chains over prev_hash
    "audit_log",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("at", UtcDateTime, nullable=False),
    Column("identity", NAME, nullable=False),
    Column("action", String(40), nullable=False),
    Column("target", Text, nullable=False),
    Column("reason", Text),
    Column("detail_json", Text, nullable=False, server_default="{}"),
    Column("prev_hash", HASH, nullable=False),
    Column("entry_hash", HASH, nullable=False, unique=True),
    Index("ix_audit_log_target", "target"),
)

registry_properties = Table(  # append-only (migration 11): properties of the registry itself, recorded once (strictness, bootstrap)
    "registry_properties",
    metadata,
    Column("name", NAME, primary_key=True),
    Column("value", Text, nullable=False),
    Column("recorded_by", NAME, nullable=False),
    Column("recorded_at", UtcDateTime, nullable=False),
)

realization_builders = Table(  # who built a realization (the approver check: nobody approves what it built)
    "realization_builders",
    metadata,
    Column("realization_id", Integer, ForeignKey("realizations.id"), primary_key=True),
    Column("identity", NAME, nullable=False),
    Column("recorded_at", UtcDateTime, nullable=False),
)

realization_launches = Table(  # append-only (migration 18): who launched a Dagster-built realization, and whether a signed launch request proved it
    "realization_launches",
    metadata,
    Column("realization_id", Integer, ForeignKey("realizations.id"), primary_key=True),
    Column("launcher", NAME),  # the identity a valid launch request proved; NULL: unverified (builder = the service identity)
    Column("service", NAME, nullable=False),  # the identity the run acted as
    Column("run_id", String(64), nullable=False),
    Column("job", Text, nullable=False),
    Column("nonce", String(64)),  # the launch request's nonce: claimed by one run only
    Column("reason", Text, nullable=False),
    Column("recorded_at", UtcDateTime, nullable=False),
)

launch_nonces = Table(  # append-only (migration 18): each launch request's nonce, claimed by the first run that showed it
    "launch_nonces",
    metadata,
    Column("nonce", String(64), primary_key=True),
    Column("run_id", String(64), nullable=False),
    Column("identity", NAME, nullable=False),
    Column("claimed_at", UtcDateTime, nullable=False),
)

signed_events = Table(  # append-only (migration 14): the acting identity's signature of a state transition or an alias move
    "signed_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(20), nullable=False),  # state (realization_events.id) | alias (alias_history.id)
    Column("event_id", Integer, nullable=False),
    Column("subject", Text, nullable=False),
    Column("statement_hash", HASH, nullable=False),
    Column("signer", NAME, nullable=False),
    Column("keyid", String(64), nullable=False),
    Column("signature", Text, nullable=False),  # hex Ed25519 signature over the DSSE PAE of the statement
    Column("signed_at", UtcDateTime, nullable=False),
    UniqueConstraint("kind", "event_id", name="uq_signed_events_event"),
)

certificates = Table(  # append-only (migration 14): an operator's signature of an identity's key or of a grant
    "certificates",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(20), nullable=False),  # key (subject: identity name) | grant (subject: grant scope_key)
    Column("subject", Text, nullable=False),
    Column("statement_hash", HASH, nullable=False),
    Column("certifier", NAME, nullable=False),
    Column("keyid", String(64), nullable=False),
    Column("signature", Text, nullable=False),
    Column("certified_at", UtcDateTime, nullable=False),
    Index("ix_certificates_subject", "kind", "subject"),
)

audit_signatures = Table(  # append-only (migration 15): the acting identity's signature of an audit entry's hash
    "audit_signatures",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=False),  # audit_log.seq
    Column("signer", NAME, nullable=False),
    Column("keyid", String(64), nullable=False),
    Column("signature", Text, nullable=False),  # hex Ed25519 signature over the DSSE PAE of audit_seal.entry_statement
)

audit_checkpoints = Table(  # append-only (migration 15): a signature over the audit head (seq, hash, count, time)
    "audit_checkpoints",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("seq", Integer, nullable=False),
    Column("head", HASH, nullable=False),
    Column("count", Integer, nullable=False),
    Column("at", UtcDateTime, nullable=False),
    Column("signer", NAME, nullable=False),
    Column("keyid", String(64), nullable=False),
    Column("signature", Text, nullable=False),
)

data_file_digests = Table(  # append-only (migration 16): SHA-256 and size of each canonical data file the platform wrote, signed
    "data_file_digests",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("table_name", NAME, nullable=False),
    Column("path", Text, nullable=False),
    Column("sha256", HASH, nullable=False),
    Column("size", Integer, nullable=False),
    Column("snapshot_id", Text, nullable=False),  # the snapshot that added it (text: Iceberg ids are 64-bit)
    Column("recorded_at", UtcDateTime, nullable=False),
    Column("signer", NAME),
    Column("keyid", String(64)),
    Column("signature", Text),
    Index("ix_data_file_digests_table", "table_name"),
)
