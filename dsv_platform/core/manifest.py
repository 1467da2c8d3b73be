"""The realization manifest (`dsv-manifest/1`): what exactly a realization is.

A manifest lists the partitions (content leaves and the Parquet objects that
hold them), the content and schema hashes, and everything needed to rebuild
the realization: pinned sources, labels, splits, code, environment,
parameters and seed. It holds no wall-clock build time and no builder
identity (those live in the registry's record), so the same inputs rebuilt
into the same bytes give the same manifest hash.

``manifest_hash`` is the SHA-256 of the canonical JSON of :meth:`Manifest.to_document`
(CANONICAL-ENCODING.md). Every key is always present (``null`` when unset), so a
document has exactly one canonical form; :meth:`Manifest.from_document` accepts
only that form. A new key is a new format (`dsv-manifest/2`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from dsv_platform.core import canonical_json
from dsv_platform.core.errors import ContractViolationError, PublicationError
from dsv_platform.core.refs import VERSION_PATTERN

FORMAT = "dsv-manifest/1"
ENCODING = "dsv-canon/1"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_EMPTY: Mapping[str, Any] = MappingProxyType({})


class ManifestError(PublicationError):
    """A manifest or manifest document breaks the manifest rules (bad hash, missing key, wrong totals, ...)."""


def content_hash_of(pairs: Iterable[tuple[str, str]]) -> str:
    """Content hash: SHA-256 of ``key:hash`` lines sorted by key (code point order), LF-joined, no trailing LF.

    Raises :class:`ContractViolationError` when two leaves share a key.
    """
    ordered = sorted(pairs, key=lambda kv: kv[0])
    for (k1, _), (k2, _) in zip(ordered, ordered[1:]):
        if k1 == k2:
            raise ContractViolationError(f"two partitions share the key {k1!r}")
    text = "\n".join(f"{k}:{h}" for k, h in ordered)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------- helpers


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


def _hex(value: object, what: str) -> str:
    if not isinstance(value, str) or not _HEX64.match(value):
        raise ManifestError(f"{what} must be 64 lowercase hex digits (a SHA-256), got {value!r}")
    return value


def _int(value: object, what: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ManifestError(f"{what} must be an integer >= {minimum}, got {value!r}")
    return value


def _str(value: object, what: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise ManifestError(f"{what} must be a non-empty string, got {value!r}")
    return value


def _scalar_map(value: object, what: str) -> Mapping[str, str | int]:
    if not isinstance(value, Mapping):
        raise ManifestError(f"{what} must be an object of string or integer values, got {value!r}")
    for k, v in value.items():
        if not isinstance(k, str) or isinstance(v, bool) or not isinstance(v, (str, int)):
            raise ManifestError(f"{what}[{k!r}] must be a string or an integer, got {v!r}")
    return MappingProxyType(dict(value))


def _keys(doc: object, what: str, expected: Iterable[str]) -> Mapping[str, Any]:
    if not isinstance(doc, Mapping):
        raise ManifestError(f"{what} must be an object, got {type(doc).__name__}")
    want = set(expected)
    missing, unknown = sorted(want - set(doc)), sorted(set(doc) - want)
    if missing or unknown:
        raise ManifestError(f"{what}: missing keys {missing}, unknown keys {unknown} (the manifest format has exactly {sorted(want)})")
    return doc


# ---------------------------------------------------------------- entries


@dataclass(frozen=True)
class PartitionEntry:
    """One partition: its canonical key, content hash (leaf), rows, and the Parquet object holding it."""

    key: str
    hash: str
    rows: int
    object: str
    bytes: int

    def __post_init__(self) -> None:
        _str(self.key, "partition key")
        _hex(self.hash, f"partition {self.key!r} hash")
        _int(self.rows, f"partition {self.key!r} rows")
        _hex(self.object, f"partition {self.key!r} object")
        _int(self.bytes, f"partition {self.key!r} bytes")

    def to_document(self) -> dict[str, Any]:
        return {"key": self.key, "hash": self.hash, "rows": self.rows, "object": self.object, "bytes": self.bytes}

    @classmethod
    def from_document(cls, doc: object) -> "PartitionEntry":
        d = _keys(doc, "partition", ("key", "hash", "rows", "object", "bytes"))
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
        object.__setattr__(self, "policy", _freeze(self.policy))
        _hex(self.assignment_object, "splits.assignment_object")
        _hex(self.assignment_hash, "splits.assignment_hash")
        counts = _scalar_map(self.counts, "splits.counts")
        for name, n in counts.items():
            _int(n, f"splits.counts[{name!r}]")
        object.__setattr__(self, "counts", counts)

    def to_document(self) -> dict[str, Any]:
        return {
            "policy": _thaw(self.policy),
            "assignment_object": self.assignment_object,
            "assignment_hash": self.assignment_hash,
            "counts": dict(self.counts),
        }

    @classmethod
    def from_document(cls, doc: object) -> "SplitsEntry":
        d = _keys(doc, "splits", ("policy", "assignment_object", "assignment_hash", "counts"))
        return cls(policy=d["policy"], assignment_object=d["assignment_object"], assignment_hash=d["assignment_hash"], counts=d["counts"])


@dataclass(frozen=True)
class SourcePin:
    """A pinned source table: its Iceberg snapshot id (as a string), the tag that protects it, extra attributes."""

    table: str
    snapshot_id: str
    tag: str | None = None
    attributes: Mapping[str, str | int] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        _str(self.table, "source table")
        _str(self.snapshot_id, f"source {self.table!r} snapshot_id")
        _str(self.tag, f"source {self.table!r} tag", optional=True)
        object.__setattr__(self, "attributes", _scalar_map(self.attributes, f"source {self.table!r} attributes"))

    def to_document(self) -> dict[str, Any]:
        return {"table": self.table, "snapshot_id": self.snapshot_id, "tag": self.tag, "attributes": dict(self.attributes)}

    @classmethod
    def from_document(cls, doc: object) -> "SourcePin":
        d = _keys(doc, "source", ("table", "snapshot_id", "tag", "attributes"))
        return cls(table=d["table"], snapshot_id=d["snapshot_id"], tag=d["tag"], attributes=d["attributes"])


@dataclass(frozen=True)
class LabelPin:
    name: str
    version: str

    def __post_init__(self) -> None:
        _str(self.name, "labels.name")
        _str(self.version, "labels.version")

    def to_document(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version}

    @classmethod
    def from_document(cls, doc: object) -> "LabelPin":
        d = _keys(doc, "labels", ("name", "version"))
        return cls(name=d["name"], version=d["version"])


@dataclass(frozen=True)
class CodePin:
    commit: str
    dirty: bool

    def __post_init__(self) -> None:
        _str(self.commit, "code.commit")
        if not isinstance(self.dirty, bool):
            raise ManifestError(f"code.dirty must be true or false, got {self.dirty!r}")

    def to_document(self) -> dict[str, Any]:
        return {"commit": self.commit, "dirty": self.dirty}

    @classmethod
    def from_document(cls, doc: object) -> "CodePin":
        d = _keys(doc, "code", ("commit", "dirty"))
        return cls(commit=d["commit"], dirty=d["dirty"])


@dataclass(frozen=True)
class EnvironmentPin:
    lockfile_hash: str
    python: str

    def __post_init__(self) -> None:
        _hex(self.lockfile_hash, "environment.lockfile_hash")
        _str(self.python, "environment.python")

    def to_document(self) -> dict[str, Any]:
        return {"lockfile_hash": self.lockfile_hash, "python": self.python}

    @classmethod
    def from_document(cls, doc: object) -> "EnvironmentPin":
        d = _keys(doc, "environment", ("lockfile_hash", "python"))
        return cls(lockfile_hash=d["lockfile_hash"], python=d["python"])


_OPTIONAL_ENTRIES: dict[str, Any] = {
    "splits": SplitsEntry,
    "labels": LabelPin,
    "code": CodePin,
    "environment": EnvironmentPin,
}

DOCUMENT_KEYS = (
    "format", "encoding", "dataset", "version", "contract", "schema_hash", "content_hash", "rows",
    "partitions", "splits", "sources", "labels", "feature_versions", "observation_window",
    "population_filter", "watermark", "code", "environment", "runner_timezone", "parameters",
    "seed", "attachments",
)  # fmt: skip


@dataclass(frozen=True)
class Manifest:
    """A realization's manifest. Construction validates it; partitions and sources are kept sorted.

    Only ``dataset``, ``version``, ``schema_hash``, ``content_hash``, ``rows`` and
    ``partitions`` are required; the rest default to "not recorded" (``None`` or
    empty). ``attachments`` maps a name (``quality_report``, ``lineage``) to the
    SHA-256 of an object stored with the manifest.
    """

    dataset: str
    version: str
    schema_hash: str
    content_hash: str
    rows: int
    partitions: tuple[PartitionEntry, ...]
    contract: Mapping[str, Any] | None = None
    splits: SplitsEntry | None = None
    sources: tuple[SourcePin, ...] = ()
    labels: LabelPin | None = None
    feature_versions: Mapping[str, str | int] = field(default_factory=lambda: _EMPTY)
    observation_window: Mapping[str, str | int] | None = None
    population_filter: str | None = None
    watermark: str | None = None
    code: CodePin | None = None
    environment: EnvironmentPin | None = None
    runner_timezone: str | None = None
    parameters: Mapping[str, str | int] = field(default_factory=lambda: _EMPTY)
    seed: int | None = None
    attachments: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    format: str = FORMAT
    encoding: str = ENCODING
    _canonical: bytes = field(default=b"", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.format != FORMAT:
            raise ManifestError(f"manifest format must be {FORMAT!r}, got {self.format!r}")
        if self.encoding != ENCODING:
            raise ManifestError(f"manifest encoding must be {ENCODING!r}, got {self.encoding!r}")
        _str(self.dataset, "dataset")
        if not isinstance(self.version, str) or not VERSION_PATTERN.match(self.version):
            raise ManifestError(f"version must be a definition version string like 'v6', got {self.version!r}")
        _hex(self.schema_hash, "schema_hash")
        _hex(self.content_hash, "content_hash")
        _int(self.rows, "rows")
        parts = tuple(sorted(self.partitions, key=lambda p: p.key))
        if not all(isinstance(p, PartitionEntry) for p in parts):
            raise ManifestError("partitions must be PartitionEntry values")
        try:
            expected = content_hash_of((p.key, p.hash) for p in parts)
        except ContractViolationError as exc:
            raise ManifestError(f"manifest lists a partition twice: {exc}") from exc
        if expected != self.content_hash:
            raise ManifestError(f"content_hash {self.content_hash} does not match the partition leaves (they give {expected})")
        total = sum(p.rows for p in parts)
        if total != self.rows:
            raise ManifestError(f"rows is {self.rows} but the partitions hold {total}")
        object.__setattr__(self, "partitions", parts)
        object.__setattr__(self, "sources", tuple(sorted(self.sources, key=lambda s: s.table)))
        tables = [s.table for s in self.sources]
        if len(set(tables)) != len(tables):
            raise ManifestError(f"a source table is pinned twice: {tables}")
        if self.contract is not None:
            if not isinstance(self.contract, Mapping):
                raise ManifestError(f"contract must be a document (object), got {type(self.contract).__name__}")
            object.__setattr__(self, "contract", _freeze(self.contract))
        object.__setattr__(self, "feature_versions", _scalar_map(self.feature_versions, "feature_versions"))
        object.__setattr__(self, "parameters", _scalar_map(self.parameters, "parameters"))
        if self.observation_window is not None:
            object.__setattr__(self, "observation_window", _scalar_map(self.observation_window, "observation_window"))
        attachments = _scalar_map(self.attachments, "attachments")
        for name, digest in attachments.items():
            _hex(digest, f"attachments[{name!r}]")
        object.__setattr__(self, "attachments", attachments)
        for name in ("population_filter", "watermark", "runner_timezone"):
            _str(getattr(self, name), name, optional=True)
        if self.seed is not None:
            _int(self.seed, "seed")
        for name, kind in _OPTIONAL_ENTRIES.items():
            value = getattr(self, name)
            if value is not None and not isinstance(value, kind):
                raise ManifestError(f"{name} must be a {kind.__name__} or None, got {type(value).__name__}")
        try:
            canonical = canonical_json.dumps(self.to_document())
        except canonical_json.CanonicalJsonError as exc:
            raise ManifestError(f"manifest cannot be written as canonical JSON: {exc}") from exc
        object.__setattr__(self, "_canonical", canonical)

    def to_document(self) -> dict[str, Any]:
        """The plain JSON document (every key present) whose canonical JSON is hashed."""
        opt = {name: (None if getattr(self, name) is None else getattr(self, name).to_document()) for name in _OPTIONAL_ENTRIES}
        return {
            "format": self.format,
            "encoding": self.encoding,
            "dataset": self.dataset,
            "version": self.version,
            "contract": _thaw(self.contract),
            "schema_hash": self.schema_hash,
            "content_hash": self.content_hash,
            "rows": self.rows,
            "partitions": [p.to_document() for p in self.partitions],
            "sources": [s.to_document() for s in self.sources],
            "feature_versions": dict(self.feature_versions),
            "observation_window": None if self.observation_window is None else dict(self.observation_window),
            "population_filter": self.population_filter,
            "watermark": self.watermark,
            "runner_timezone": self.runner_timezone,
            "parameters": dict(self.parameters),
            "seed": self.seed,
            "attachments": dict(self.attachments),
            **opt,
        }

    def canonical_bytes(self) -> bytes:
        """Canonical JSON of :meth:`to_document`: the bytes the registry stores and the hash covers."""
        return self._canonical

    @property
    def manifest_hash(self) -> str:
        return hashlib.sha256(self._canonical).hexdigest()

    @classmethod
    def from_document(cls, doc: object) -> "Manifest":
        """Read a document back; refuses anything that is not exactly the canonical manifest form."""
        d = _keys(doc, "manifest", DOCUMENT_KEYS)
        if not isinstance(d["partitions"], list) or not isinstance(d["sources"], list):
            raise ManifestError("partitions and sources must be lists")
        entries = {name: (None if d[name] is None else kind.from_document(d[name])) for name, kind in _OPTIONAL_ENTRIES.items()}
        manifest = cls(
            format=d["format"],
            encoding=d["encoding"],
            dataset=d["dataset"],
            version=d["version"],
            contract=d["contract"],
            schema_hash=d["schema_hash"],
            content_hash=d["content_hash"],
            rows=d["rows"],
            partitions=tuple(PartitionEntry.from_document(p) for p in d["partitions"]),
            sources=tuple(SourcePin.from_document(s) for s in d["sources"]),
            feature_versions=d["feature_versions"],
            observation_window=d["observation_window"],
            population_filter=d["population_filter"],
            watermark=d["watermark"],
            runner_timezone=d["runner_timezone"],
            parameters=d["parameters"],
            seed=d["seed"],
            attachments=d["attachments"],
            **entries,
        )
        if canonical_json.dumps(d) != manifest.canonical_bytes():
            raise ManifestError("manifest document is not in canonical order (partitions sorted by key, sources sorted by table)")
        return manifest

    @classmethod
    def from_json(cls, text: str | bytes) -> "Manifest":
        """Parse stored canonical JSON text; the bytes must be exactly the canonical form."""
        import json

        raw = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            raise ManifestError(f"manifest text is not JSON: {exc}") from exc
        manifest = cls.from_document(doc)
        if manifest.canonical_bytes() != raw:
            raise ManifestError("manifest text is not canonical JSON")
        return manifest


@dataclass(frozen=True)
class BuiltPart:
    """What one completed partition build reports: leaf hash, rows, verified object, and the schema it used."""

    key: str
    hash: str
    rows: int
    object: str
    bytes: int
    schema_hash: str

    def entry(self) -> PartitionEntry:
        return PartitionEntry(key=self.key, hash=self.hash, rows=self.rows, object=self.object, bytes=self.bytes)


def build_manifest(
    parts: Iterable[BuiltPart],
    *,
    dataset: str,
    version: str,
    schema_hash: str | None = None,
    contract: Mapping[str, Any] | None = None,
    **optional: Any,
) -> Manifest:
    """The manifest of a candidate from its completed parts.

    Rejects, with :class:`PublicationError` (a :class:`ManifestError`), a
    candidate with no parts, two parts claiming the same partition key, parts
    that disagree on the schema hash, or parts whose schema hash differs from
    the expected ``schema_hash``. ``optional`` takes the other :class:`Manifest`
    fields (sources, labels, splits, code, environment, parameters, seed, ...).
    """
    parts = list(parts)
    if not parts:
        raise ManifestError(f"{dataset}:{version}: a candidate needs at least one completed part (an unpartitioned dataset has the part 'all')")
    owners: dict[str, BuiltPart] = {}
    for part in parts:
        if part.key in owners:
            other = owners[part.key]
            raise ManifestError(
                f"{dataset}:{version}: two parts claim partition {part.key!r} (objects {other.object} and {part.object}); rebuild the candidate"
            )
        owners[part.key] = part
    schemas = {p.schema_hash for p in parts}
    if len(schemas) > 1:
        detail = ", ".join(f"{p.key}={p.schema_hash[:12]}" for p in sorted(parts, key=lambda p: p.key))
        raise ManifestError(f"{dataset}:{version}: parts disagree on the schema hash ({detail})")
    found = schemas.pop()
    if schema_hash is not None and found != schema_hash:
        raise ManifestError(f"{dataset}:{version}: parts were built with schema {found}, the contract says {schema_hash}")
    entries = tuple(p.entry() for p in parts)
    return Manifest(
        dataset=dataset,
        version=version,
        schema_hash=found,
        content_hash=content_hash_of((e.key, e.hash) for e in entries),
        rows=sum(e.rows for e in entries),
        partitions=entries,
        contract=contract,
        **optional,
    )
