"""The SQL registry (SQLite embedded default, PostgreSQL in production)."""

from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.publication.records import (
    AliasMove,
    AliasRecord,
    Definition,
    DefinitionConflictError,
    PublishOutcome,
    PublishResult,
    Realization,
    RealizationEvent,
    StaleAliasError,
)

__all__ = [
    "AliasMove",
    "AliasRecord",
    "Definition",
    "DefinitionConflictError",
    "PublishOutcome",
    "PublishResult",
    "Realization",
    "RealizationEvent",
    "Registry",
    "StaleAliasError",
]
