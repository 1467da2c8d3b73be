"""The entries of a realization manifest: partitions, splits, pinned sources, labels, code, environment.

Each is a frozen value that validates itself and reads/writes its exact document
shape (every key present); see :mod:`dsv_platform.core.publication.manifest`.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dsv_platform.core.publication.manifest_fields import (
    EMPTY,
    ManifestError,
    check_hex,
    check_int,
    check_str,
    exact_keys,
    freeze,
    scalar_map,
    thaw,
)


@dataclass(frozen=True)
class PartitionEntry:
    """One partition: its canonical key, content hash (leaf), rows, and the Parquet object holding it."""

    key: str
    hash: str
    rows: int
    object: str
    bytes: int

    def __post_init__(self) -> None:
        check_str(self.key, "partition key")
        check_hex(self.hash, f"partition {self.key!r} hash")
        check_int(self.rows, f"partition {self.key!r} rows")
        check_hex(self.object, f"partition {self.key!r} object")
        check_int(self.bytes, f"partition {self.key!r} bytes")

    def to_document(self) -> dict[str, Any]:
        return {"key": self.key, "hash": self.hash, "rows": self.rows, "object": self.object, "bytes": self.bytes}

    @classmethod
    def from_document(cls, doc: builtins.object) -> PartitionEntry:
        d = exact_keys(doc, "partition", ("key", "hash", "rows", "object", "bytes"))
        return cls(key=d["key"], hash=d["hash"], rows=d["rows"], object=d["object"], bytes=d["bytes"])


@dataclass(frozen=True)
class SplitsEntry:
    """The materialized split assignment: its policy document, object, content hash and per-split counts."""

    policy: Mapping[str, Any]
    assignment_object: str
    assignment_hash: str
    counts: Mapping[str, int]

    def __post_init__(self) -> None:
        if not isinstance(self.policy, Mapping):
            raise ManifestError(f"splits.policy must be an object, got {self.policy!r}")
        object.__setattr__(self, "policy", freeze(self.policy))
        check_hex(self.assignment_object, "splits.assignment_object")
        check_hex(self.assignment_hash, "splits.assignment_hash")
        counts = scalar_map(self.counts, "splits.counts")
        for name, n in counts.items():
            check_int(n, f"splits.counts[{name!r}]")
        object.__setattr__(self, "counts", counts)

    def to_document(self) -> dict[str, Any]:
        return {
            "policy": thaw(self.policy),
            "assignment_object": self.assignment_object,
            "assignment_hash": self.assignment_hash,
            "counts": dict(self.counts),
        }

    @classmethod
    def from_document(cls, doc: builtins.object) -> SplitsEntry:
        d = exact_keys(doc, "splits", ("policy", "assignment_object", "assignment_hash", "counts"))
        return cls(policy=d["policy"], assignment_object=d["assignment_object"], assignment_hash=d["assignment_hash"], counts=d["counts"])


@dataclass(frozen=True)
class SourcePin:
    """A pinned source table: its Iceberg snapshot id (as a string), the tag that protects it, extra attributes."""

    table: str
    snapshot_id: str
    tag: str | None = None
    attributes: Mapping[str, str | int] = field(default_factory=lambda: EMPTY)

    def __post_init__(self) -> None:
        check_str(self.table, "source table")
        check_str(self.snapshot_id, f"source {self.table!r} snapshot_id")
        check_str(self.tag, f"source {self.table!r} tag", optional=True)
        object.__setattr__(self, "attributes", scalar_map(self.attributes, f"source {self.table!r} attributes"))

    def to_document(self) -> dict[str, Any]:
        return {"table": self.table, "snapshot_id": self.snapshot_id, "tag": self.tag, "attributes": dict(self.attributes)}

    @classmethod
    def from_document(cls, doc: builtins.object) -> SourcePin:
        d = exact_keys(doc, "source", ("table", "snapshot_id", "tag", "attributes"))
        return cls(table=d["table"], snapshot_id=d["snapshot_id"], tag=d["tag"], attributes=d["attributes"])


@dataclass(frozen=True)
class LabelPin:
    name: str
    version: str

    def __post_init__(self) -> None:
        check_str(self.name, "labels.name")
        check_str(self.version, "labels.version")

    def to_document(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version}

    @classmethod
    def from_document(cls, doc: builtins.object) -> LabelPin:
        d = exact_keys(doc, "labels", ("name", "version"))
        return cls(name=d["name"], version=d["version"])


@dataclass(frozen=True)
class CodePin:
    """The extraction code: its commit, dirty flag and, when known, its repository (the checkout).

    ``repo`` is the one optional key of a manifest document: absent when unknown, as in every manifest
    written before it was recorded, so those keep their bytes and their hash.
    """

    commit: str
    dirty: bool
    repo: str | None = None

    def __post_init__(self) -> None:
        check_str(self.commit, "code.commit")
        if not isinstance(self.dirty, bool):
            raise ManifestError(f"code.dirty must be true or false, got {self.dirty!r}")
        check_str(self.repo, "code.repo", optional=True)

    def to_document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"commit": self.commit, "dirty": self.dirty}
        if self.repo is not None:
            doc["repo"] = self.repo
        return doc

    @classmethod
    def from_document(cls, doc: builtins.object) -> CodePin:
        keys = ("commit", "dirty", "repo") if isinstance(doc, Mapping) and "repo" in doc else ("commit", "dirty")
        d = exact_keys(doc, "code", keys)
        repo = check_str(d["repo"], "code.repo") if "repo" in d else None  # present: a non-empty string, never null
        return cls(commit=d["commit"], dirty=d["dirty"], repo=repo)


@dataclass(frozen=True)
class EnvironmentPin:
    lockfile_hash: str
    python: str

    def __post_init__(self) -> None:
        check_hex(self.lockfile_hash, "environment.lockfile_hash")
        check_str(self.python, "environment.python")

    def to_document(self) -> dict[str, Any]:
        return {"lockfile_hash": self.lockfile_hash, "python": self.python}

    @classmethod
    def from_document(cls, doc: builtins.object) -> EnvironmentPin:
        d = exact_keys(doc, "environment", ("lockfile_hash", "python"))
        return cls(lockfile_hash=d["lockfile_hash"], python=d["python"])
