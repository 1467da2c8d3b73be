"""What GC plans over: the inventory of everything the platform owns, and the policy.

Plain values read from the registry, the object store, Iceberg and raw landing
by ``adapters/gc.py``; ``core/retention/gc.py`` turns them into a plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from dsv_platform.core.lineage.lineage import Edge, Node, NodeKind

_K_ALIAS = NodeKind.ALIAS.value


@dataclass(frozen=True, slots=True)
class RootSpec:
    id: str
    kind: str
    ref: str
    reason: str
    owner: str
    expires_at: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "ref": self.ref,
            "reason": self.reason,
            "owner": self.owner,
            "expires_at": None if self.expires_at is None else self.expires_at.isoformat(),
        }


class RealizationInfo(NamedTuple):
    id: int
    dataset: str
    version: str
    state: str
    manifest_hash: str | None
    logical_key: str
    created_at: datetime
    published_at: datetime | None = None


class StoredObject(NamedTuple):
    digest: str
    size: int
    modified_at: datetime | None = None  # None: unknown, never collected (treated as new)


@dataclass(frozen=True, slots=True)
class StagingInfo:
    attempt_id: str
    last_modified: datetime
    size: int
    count: int


@dataclass(frozen=True, slots=True)
class SnapshotInfo:
    table: str
    snapshot_id: int
    timestamp: datetime
    is_current: bool
    data_files: tuple[str, ...] = ()
    parent_id: int | None = None


@dataclass(frozen=True, slots=True)
class TagInfo:
    table: str
    tag: str
    snapshot_id: int
    max_ref_age_ms: int | None = None  # Iceberg's max-ref-age-ms of the tag (None: unset)
    branch: bool = False  # a staging branch a blocked load left (write-audit-publish, core/ingest/staging.py), not a tag


@dataclass(frozen=True, slots=True)
class DataFileInfo:
    table: str
    path: str
    size: int
    modified_at: datetime | None
    batches: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RawBatchInfo:
    batch_ref: str  # batch_id@digest, the canonical rows' _batch
    digest: str
    size: int
    loadable: bool
    landed_at: datetime


@dataclass(frozen=True, slots=True)
class AliasInfo:
    dataset: str
    version: str
    alias: str
    target: str

    @property
    def node(self) -> Node:
        return (_K_ALIAS, f"{self.dataset}:{self.version}@{self.alias}")


@dataclass(frozen=True, slots=True)
class ModelPointer:
    """What the model registry points at: a model alias (``model_alias``, ``NAME@ALIAS``) or a target's current deployment
    (``deployment``, the target), and the model version's run manifest hash."""

    kind: str
    name: str
    run_hash: str


@dataclass
class Inventory:
    observed_at: datetime
    watermark: Mapping[str, Any]
    realizations: Sequence[RealizationInfo] = ()
    manifests: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # manifest hash -> document
    objects: Sequence[StoredObject] = ()
    staging: Sequence[StagingInfo] = ()
    snapshots: Sequence[SnapshotInfo] = ()
    tags: Sequence[TagInfo] = ()
    data_files: Sequence[DataFileInfo] = ()
    raw_batches: Sequence[RawBatchInfo] = ()
    aliases: Sequence[AliasInfo] = ()
    roots: Sequence[RootSpec] = ()
    lineage: Sequence[Edge] = ()
    run_manifests: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # model run hash -> run manifest document
    artifacts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # artifact manifest hash -> {"manifest": doc, "files": {name: digest}}
    model_pointers: Sequence[ModelPointer] = ()  # model aliases and current deployments: retention roots of their model versions


__all__ = [
    "AliasInfo",
    "DataFileInfo",
    "Inventory",
    "ModelPointer",
    "RawBatchInfo",
    "RealizationInfo",
    "RootSpec",
    "SnapshotInfo",
    "StagingInfo",
    "StoredObject",
    "TagInfo",
]
