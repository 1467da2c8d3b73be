"""Building a dataset realization from a declarative definition.

1. note the current snapshot of every source table and of the pinned label
   version; the logical build key is the hash of the recipe and those ids;
2. protect each snapshot with the tag ``<name>-<version>-<logical key>`` (the
   manifest hash is not known yet; the tag names are recorded in the manifest);
3. read every table at its pinned snapshot, as known at the watermark;
4. join the account features of the previous day and the pinned labels; keep
   the observation window and the population;
5. apply the split policy and store the assignment as a content-addressed
   Parquet object;
6. publish through :class:`Publisher` with the gates (split invariants and
   row count and label coverage block; proportions warn), pinning code commit,
   dirty flag, environment hash, runner timezone, parameters, seed, watermark.

Rebuilding over unchanged snapshots reuses the published realization (the
request id is the logical key), so the same inputs give one realization.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import datetime as dt
import functools
import hashlib
import importlib.metadata
import platform
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.adapters.iceberg import CanonicalTables
from dsv_platform.adapters.iceberg_values import RECORDED_AT
from dsv_platform.services.canonical_load import label_spec
from dsv_platform.adapters.encrypted_store import EncryptingObjectStore
from dsv_platform.adapters.object_store import ObjectStore
from dsv_platform.services.privacy import PrivacyCoordinator
from dsv_platform.services.publisher import BuildRequest, Publisher, parquet_bytes
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core import canonical_json
from dsv_platform.core.dataset_definition import DatasetDefinition
from dsv_platform.core.errors import CorruptError, DsvError
from dsv_platform.core.gates import GateResult, rows_at_least
from dsv_platform.core.manifest import CodePin, EnvironmentPin, LabelPin, Manifest, SourcePin, SplitsEntry
from dsv_platform.core.split_checks import CheckReport, assignment_hash, expected_parts, proportions_within_tolerance, splits_are_entity_disjoint
from dsv_platform.core.splits import assign
from dsv_platform.domain.labels import label_definition
from dsv_platform.domain.sources import SOURCES, TableSpec
from dsv_platform.services.datasets import load_manifest, open_dataset

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform

ALIAS = "candidate"
FEATURE_LAG_DAYS = 1
REPO = Path(__file__).resolve().parents[2]


class RealizationBuildError(DsvError):
    """A realization cannot be built (a source has no snapshot yet, an unknown source)."""


@dataclass(frozen=True)
class Pin:
    table: str
    snapshot_id: int
    tag: str


@dataclass(frozen=True)
class RealizationBuild:
    """What a build produced (or found already published for the same inputs)."""

    ref: str
    manifest: Manifest
    pins: tuple[Pin, ...]
    reused: bool
    gates: tuple[GateResult, ...]

    @property
    def manifest_hash(self) -> str:
        return self.manifest.manifest_hash

    @property
    def content_hash(self) -> str:
        return self.manifest.content_hash

    @property
    def split_counts(self) -> dict[str, int]:
        return dict(self.manifest.splits.counts) if self.manifest.splits else {}


# ---------------------------------------------------------------- pins of code and environment


@functools.cache
def code_pin(repo: Path = REPO) -> CodePin:
    """The checkout's commit and dirty flag; ``unknown`` (not dirty) when this is not a git checkout."""
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return CodePin("unknown", False)
        status = subprocess.run(["git", "--no-optional-locks", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return CodePin("unknown", False)
    return CodePin(head.stdout.strip(), bool(status.stdout.strip()))


@functools.cache
def environment_lockfile() -> bytes:
    """The installed distributions as sorted ``name==version`` lines (what ``pip freeze`` lists)."""
    lines = sorted({f"{d.metadata['Name'].lower()}=={d.version}" for d in importlib.metadata.distributions() if d.metadata["Name"]})
    return "\n".join(lines).encode()


@functools.cache
def environment_pin() -> EnvironmentPin:
    """SHA-256 of :func:`environment_lockfile` (stored as an object under that digest, so a later audit can diff it)."""
    return EnvironmentPin(hashlib.sha256(environment_lockfile()).hexdigest(), platform.python_version())


def runner_timezone() -> str:
    return dt.datetime.now().astimezone().tzname() or "unknown"


# ---------------------------------------------------------------- reading the pinned inputs


def _specs(definition: DatasetDefinition) -> list[TableSpec]:
    unknown = [s for s in definition.sources if s not in SOURCES]
    if unknown:
        raise RealizationBuildError(f"{definition.ref}: unknown source(s) {unknown}; known: {sorted(SOURCES)}")
    return [SOURCES[s] for s in definition.sources] + [label_spec(label_definition(definition.label_version))]


def logical_key(definition: DatasetDefinition, snapshots: Mapping[str, int]) -> str:
    return canonical_json.sha256_hex({"recipe": definition.recipe_hash, "schema": definition.contract.schema_hash, "snapshots": dict(snapshots)})[:20]


def pin_sources(tables: CanonicalTables, definition: DatasetDefinition) -> tuple[str, tuple[Pin, ...]]:
    """Tag the current snapshot of every input table; returns the logical key and the pins."""
    current: dict[str, int] = {}
    for spec in _specs(definition):
        sid = tables.current_snapshot_id(spec)
        if sid is None:
            raise RealizationBuildError(f"{definition.ref}: table {tables.identifier(spec)} has no snapshot yet; materialize it first")
        current[spec.name] = sid
    key = logical_key(definition, current)
    tag = f"{definition.name}-{definition.version}-{key}"
    pins = tuple(Pin(spec.name, p.snapshot_id, p.tag) for spec in _specs(definition) for p in [tables.pin(spec, tag, snapshot_id=current[spec.name])])
    return key, pins


def _watermark(tables: CanonicalTables, definition: DatasetDefinition, pins: Mapping[str, Pin]) -> dt.datetime:
    if definition.watermark.at is not None:
        return definition.watermark.at
    marks = []
    for spec in _specs(definition):
        hist = tables.read(spec, snapshot_id=pins[spec.name].snapshot_id, history=True)
        if hist.num_rows:
            marks.append(pc.max(hist.column(RECORDED_AT)).as_py())
    if not marks:
        raise RealizationBuildError(f"{definition.ref}: the pinned tables are empty")
    return max(marks)


def assemble(tables: CanonicalTables, definition: DatasetDefinition, pins: Mapping[str, Pin], watermark: dt.datetime) -> tuple[pa.Table, int]:
    """The examples (contract columns) and the population size before the label join."""
    specs = {s.name: s for s in _specs(definition)}
    read = lambda name: tables.read(specs[name], snapshot_id=pins[name].snapshot_id, as_of=watermark)  # noqa: E731
    window, population = definition.observation_window, definition.population_filter
    tx = read("transactions")
    days = tx.column(window.column)
    keep = pc.and_(pc.greater_equal(days, pa.scalar(window.start, pa.date32())), pc.less_equal(days, pa.scalar(window.end, pa.date32())))
    tx = tx.filter(pc.and_(keep, pc.is_in(tx.column(population.column), pa.array(population.values, tx.schema.field(population.column).type))))
    feature_day = pc.cast(pc.subtract(pc.cast(tx.column("event_date"), pa.int32()), pa.scalar(FEATURE_LAG_DAYS, pa.int32())), pa.date32())
    tx = tx.append_column("feature_date", feature_day)
    if "account_features" in specs:
        features = read("account_features").select(["account_id", "feature_date", *definition.features])
        tx = tx.join(features, keys=["account_id", "feature_date"], join_type="left outer")
    labels = read(label_spec(label_definition(definition.label_version)).name).select(["transaction_id", "is_fraud", "label_version"])
    joined = tx.join(labels, keys="transaction_id", join_type="inner")
    return joined.select(definition.contract.column_names).cast(definition.contract.arrow_schema), tx.num_rows


def _partitions(table: pa.Table, column: str) -> list[tuple[str, pa.Table]]:
    out = []
    for day in sorted(pc.unique(table.column(column)).to_pylist()):
        out.append((f"{column}={day.isoformat()}", table.filter(pc.equal(table.column(column), pa.scalar(day, pa.date32())))))
    return out


def _gates(definition: DatasetDefinition, assignment: pa.Table, population: int) -> list[GateResult]:
    disjoint = splits_are_entity_disjoint(assignment, definition.entity_column)
    proportions = proportions_within_tolerance(assignment, expected_parts(definition.policy()), definition.gates.proportion_tolerance_bp)
    coverage_bp = assignment.num_rows * 10_000 // population if population else 0
    return [
        GateResult("splits_are_entity_disjoint", disjoint.passed, {f.name: str(dict(f.detail)) for f in disjoint.findings}),
        GateResult("proportions_within_tolerance", proportions.passed, {f.name: str(f.detail.get("observed")) for f in proportions.findings}, blocking=False),
        rows_at_least(assignment.num_rows, definition.gates.rows_at_least),
        GateResult("label_coverage", coverage_bp >= definition.gates.label_coverage_at_least_bp, {"coverage_bp": coverage_bp, "minimum_bp": definition.gates.label_coverage_at_least_bp, "population": population}),
    ]


# ---------------------------------------------------------------- the build


def _manifest_fields(
    tables: CanonicalTables,
    definition: DatasetDefinition,
    pins: tuple[Pin, ...],
    splits: SplitsEntry,
    by_table: Mapping[str, Pin],
    watermark: dt.datetime,
    population: int,
    *,
    code: CodePin | None,
    environment: EnvironmentPin | None,
) -> dict[str, object]:
    """What the manifest records besides the partitions: pins, labels, window, watermark, code, environment, parameters."""
    versions = sorted(set(tables.read(SOURCES["account_features"], snapshot_id=by_table["account_features"].snapshot_id).column("feature_version").to_pylist())) if "account_features" in by_table else []
    return {
        "splits": splits,
        "sources": tuple(SourcePin(p.table, str(p.snapshot_id), p.tag, {"identifier": tables.identifier(SOURCES.get(p.table) or label_spec(label_definition(definition.label_version)))}) for p in pins),
        "labels": LabelPin(definition.label_name, f"v{definition.label_version}"),
        "feature_versions": {"account_features": ",".join(str(v) for v in versions) or "none"},
        "observation_window": definition.observation_window.to_document(),
        "population_filter": definition.population_filter.to_text(),
        "watermark": watermark.astimezone(dt.UTC).isoformat(),
        "code": code or code_pin(),
        "environment": environment or environment_pin(),
        "runner_timezone": runner_timezone(),
        "parameters": {"recipe_hash": definition.recipe_hash, "feature_lag_days": FEATURE_LAG_DAYS, "watermark_rule": definition.watermark.rule, "population_rows": population},
        "seed": definition.seed,
    }


def build_realization(
    tables: CanonicalTables,
    registry: Registry,
    store: ObjectStore,
    definition: DatasetDefinition,
    *,
    actor: str,
    code: CodePin | None = None,
    environment: EnvironmentPin | None = None,
) -> RealizationBuild:
    """Pin, read, join, split and publish one realization of ``definition`` (idempotent per pinned inputs).

    ``code`` and ``environment`` default to the live checkout and interpreter; the
    current environment's lockfile is stored as an object named by its hash.
    """
    if environment is None:
        store.put(environment_lockfile())
    registry.register_definition(definition.name, definition.version, contract=definition.contract.to_document(), recipe=definition.recipe(), owner=definition.owner)
    key, pins = pin_sources(tables, definition)
    by_table = {p.table: p for p in pins}
    publisher = Publisher(registry, store, actor=actor)
    # A privacy deletion raises the redaction generation; a rebuild after it is a new logical version.
    generation = registry.redaction_generation()
    key = f"{key}:g{generation}" if generation else key
    request_id = f"{definition.name}:{definition.version}:{key}"
    done = publisher.reconcile(request_id)
    if done is not None:
        manifest = load_manifest(registry, done)
        return RealizationBuild(done.ref, manifest, pins, True, ())
    watermark = _watermark(tables, definition, by_table)
    examples, population = assemble(tables, definition, by_table, watermark)
    if isinstance(store, EncryptingObjectStore):  # new realizations exclude deleted subjects
        examples = PrivacyCoordinator(registry, store, actor=actor).exclusion_filter()(examples)
    policy = definition.policy()
    assignment = assign(examples.select(["transaction_id", definition.entity_column]), policy).sort_by("transaction_id")
    splits = SplitsEntry(
        policy=policy.to_document(),
        assignment_object=store.put(parquet_bytes(assignment)),
        assignment_hash=assignment_hash(assignment, "transaction_id"),
        counts={s: int(pc.sum(pc.equal(assignment.column("split"), s)).as_py() or 0) for s in policy.names},
    )
    gates = _gates(definition, assignment, population)
    request = BuildRequest(
        dataset=definition.name,
        version=definition.version,
        contract=definition.contract,
        request_id=request_id,
        logical_key=key,
        partitions=_partitions(examples, definition.contract.partition_by or "event_date"),
        manifest_fields=_manifest_fields(tables, definition, pins, splits, by_table, watermark, population, code=code, environment=environment),
        gates=lambda manifest, parts: gates,
        alias=ALIAS,
    )
    result = publisher.build(request)
    registry.record_lineage(
        [("iceberg_snapshot", f"{p.table}@{p.snapshot_id}", "realization", result.manifest.manifest_hash, "pinned_by", {"tag": p.tag}) for p in pins]
        + [("split_assignment", splits.assignment_object, "realization", result.manifest.manifest_hash, "part_of", {})],
        actor=actor,
    )
    return RealizationBuild(result.ref, result.manifest, pins, False, tuple(gates))


# ---------------------------------------------------------------- the split assignment of a published realization


@dataclass(frozen=True)
class SplitsCheck:
    ref: str
    assignment_hash: str
    counts: Mapping[str, int]
    policy: Mapping[str, object]
    report: CheckReport


def check_splits(platform: Platform, ref: str, definition: DatasetDefinition) -> SplitsCheck:
    """Re-read ``ref``'s assignment object, confirm its hash against the manifest, and check entity disjointness."""
    ds = open_dataset(platform, ref, actor=platform.actor)
    splits = ds.manifest.splits
    assignment = ds.split_assignment
    if splits is None or assignment is None:
        raise RealizationBuildError(f"{ref}: the manifest records no split assignment")
    recomputed = assignment_hash(assignment, "transaction_id")
    if recomputed != splits.assignment_hash:
        raise CorruptError(f"split assignment {splits.assignment_object} hashes to {recomputed}, the manifest says {splits.assignment_hash}", ref=ref)
    return SplitsCheck(ds.ref, recomputed, dict(splits.counts), splits.to_document()["policy"], splits_are_entity_disjoint(assignment, definition.entity_column))
