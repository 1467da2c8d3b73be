"""The realization manifest (`dsv-manifest/1`): what exactly a realization is.

It names the partitions and everything needed to rebuild the realization, and nothing
about when or by whom it was built, so the same inputs give the same ``manifest_hash``
(the SHA-256 of its one canonical JSON form).

Details: docs/publication.md
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from dsv_platform.core import canonical_json
from dsv_platform.core.errors import ContractViolationError
from dsv_platform.core.publication.manifest_entries import (
    CodePin,
    EnvironmentPin,
    LabelPin,
    PartitionEntry,
    SourcePin,
    SplitsEntry,
)
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
from dsv_platform.core.publication.refs import VERSION_PATTERN

__all__ = [
    "DOCUMENT_KEYS",
    "ENCODING",
    "FORMAT",
    "BuiltPart",
    "CodePin",
    "EnvironmentPin",
    "LabelPin",
    "Manifest",
    "ManifestError",
    "PartitionEntry",
    "SourcePin",
    "SplitsEntry",
    "build_manifest",
    "content_hash_of",
]

FORMAT = "dsv-manifest/1"
ENCODING = "dsv-canon/1"


def content_hash_of(pairs: Iterable[tuple[str, str]]) -> str:
    """Content hash: SHA-256 of ``key:hash`` lines sorted by key (code point order), LF-joined, no trailing LF.

    Raises :class:`ContractViolationError` when two leaves share a key.
    """
    ordered = sorted(pairs, key=lambda kv: kv[0])
    for (k1, _), (k2, _) in pairwise(ordered):
        if k1 == k2:
            raise ContractViolationError(f"two partitions share the key {k1!r}")
    text = "\n".join(f"{k}:{h}" for k, h in ordered)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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
    feature_versions: Mapping[str, str | int] = field(default_factory=lambda: EMPTY)
    observation_window: Mapping[str, str | int] | None = None
    population_filter: str | None = None
    watermark: str | None = None
    code: CodePin | None = None
    environment: EnvironmentPin | None = None
    runner_timezone: str | None = None
    parameters: Mapping[str, str | int] = field(default_factory=lambda: EMPTY)
    seed: int | None = None
    attachments: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    format: str = FORMAT
    encoding: str = ENCODING
    _canonical: bytes = field(default=b"", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.format != FORMAT:
            raise ManifestError(f"manifest format must be {FORMAT!r}, got {self.format!r}")
        if self.encoding != ENCODING:
            raise ManifestError(f"manifest encoding must be {ENCODING!r}, got {self.encoding!r}")
        check_str(self.dataset, "dataset")
        if not isinstance(self.version, str) or not VERSION_PATTERN.match(self.version):
            raise ManifestError(f"version must be a definition version string like 'v6', got {self.version!r}")
        check_hex(self.schema_hash, "schema_hash")
        check_hex(self.content_hash, "content_hash")
        check_int(self.rows, "rows")
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
            object.__setattr__(self, "contract", freeze(self.contract))
        object.__setattr__(self, "feature_versions", scalar_map(self.feature_versions, "feature_versions"))
        object.__setattr__(self, "parameters", scalar_map(self.parameters, "parameters"))
        if self.observation_window is not None:
            object.__setattr__(self, "observation_window", scalar_map(self.observation_window, "observation_window"))
        attachments = scalar_map(self.attachments, "attachments")
        for name, digest in attachments.items():
            check_hex(digest, f"attachments[{name!r}]")
        object.__setattr__(self, "attachments", attachments)
        for name in ("population_filter", "watermark", "runner_timezone"):
            check_str(getattr(self, name), name, optional=True)
        if self.seed is not None:
            check_int(self.seed, "seed")
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
            "contract": thaw(self.contract),
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
    def from_document(cls, doc: object) -> Manifest:
        """Read a document back; refuses anything that is not exactly the canonical manifest form."""
        d = exact_keys(doc, "manifest", DOCUMENT_KEYS)
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
    def from_json(cls, text: str | bytes) -> Manifest:
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
