"""The inputs of a realization: code and environment pins, the pinned input tables, the watermark, the assembled examples.

A definition reads its base source, its as-of-joined sources and, when it
names one, its label version's table; each is pinned at its current snapshot
and read as known at the watermark, then handed to
:func:`dsv_platform.core.assembly.assembly.assemble_examples`.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import importlib.metadata
import platform
import re
import subprocess
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.adapters.engine.duckdb_engine import EngineLimits
from dsv_platform.adapters.iceberg.iceberg import CanonicalTables
from dsv_platform.adapters.iceberg.iceberg_maintenance import max_recorded_at
from dsv_platform.core import canonical_json
from dsv_platform.core.assembly.assembly import assemble_examples
from dsv_platform.core.config.aggregation import ZoneOf
from dsv_platform.core.config.dataset_definition import DatasetDefinition
from dsv_platform.core.config.labels import LabelVersion
from dsv_platform.core.config.platform_config import PlatformConfig
from dsv_platform.core.config.source import SourceSpec, TableSpecLike
from dsv_platform.core.config.timezones import zone
from dsv_platform.core.contracts.contract import Contract
from dsv_platform.core.errors import DsvError
from dsv_platform.core.identity.example_id import example_id_column
from dsv_platform.core.identity.hashing import partition_keys
from dsv_platform.core.progress.stages import SILENT, Progress
from dsv_platform.core.publication.manifest import CodePin, EnvironmentPin
from dsv_platform.core.reproduction.build_pin import read_build_pin
from dsv_platform.services.ingest.label_build import label_table_spec
from dsv_platform.services.publication.assembly_engine import engine_refusal, examples_out_of_core, known_at_sources
from dsv_platform.services.publication.examples import Examples, TableExamples

REPO = Path(__file__).resolve().parents[3]


class RealizationBuildError(DsvError):
    """A realization cannot be built (a source has no snapshot yet, an unknown source or label)."""


@dataclass(frozen=True)
class Pin:
    table: str
    snapshot_id: int
    tag: str


@dataclass(frozen=True)
class Inputs:
    """What a definition reads: its sources by name and, if it has one, its label version."""

    definition: DatasetDefinition
    sources: Mapping[str, SourceSpec]
    label: LabelVersion | None

    @property
    def tables(self) -> list[TableSpecLike]:
        """Every input table: the sources in definition order, then the label table."""
        specs: list[TableSpecLike] = [self.sources[s] for s in self.definition.sources]
        return specs + ([label_table_spec(self.label)] if self.label is not None else [])


def example_id(contract: Contract) -> str:
    """The column identifying one example: the output contract's one-column key, or a composite key's ``example_id``."""
    return example_id_column(contract)


def inputs_of(config: PlatformConfig, definition: DatasetDefinition) -> Inputs:
    """The sources and label ``definition`` reads, from the configuration."""
    unknown = [s for s in definition.sources if s not in config.sources]
    if unknown:
        raise RealizationBuildError(f"{definition.ref}: unknown source(s) {unknown}; known: {sorted(config.sources)}")
    label = None
    if definition.label is not None:
        try:
            label = config.labels[definition.label.name][definition.label.version]
        except KeyError:
            raise RealizationBuildError(f"{definition.ref}: label {definition.label.name}:v{definition.label.version} is not registered") from None
    return Inputs(definition, {s: config.sources[s] for s in definition.sources}, label)


# ---------------------------------------------------------------- pins of code and environment


@functools.cache
def code_pin(repo: Path = REPO) -> CodePin:
    """The checkout's commit, dirty flag and repository (its ``origin`` URL, :func:`repository_url`); in an image the
    commit baked in at build time (no repo); else ``unknown`` (not dirty, no repo)."""
    baked = read_build_pin()
    unknown = CodePin("unknown", False) if baked is None else CodePin(baked.commit, baked.dirty)
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return unknown
        status = subprocess.run(["git", "--no-optional-locks", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True, timeout=30)
        origin = subprocess.run(["git", "-C", str(repo), "config", "--get", "remote.origin.url"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return unknown
    return CodePin(head.stdout.strip(), bool(status.stdout.strip()), repository_url(origin.stdout.strip()))


def repository_url(origin: str) -> str | None:
    """Where the code lives, the same from every clone: a remote URL without credentials, or None.

    A local path (a clone of a clone, a CI checkout) names one machine's folder, not the repository, and would give
    the same build a different manifest hash in every checkout: it is not recorded.
    """
    if "://" in origin:
        scheme, _, rest = origin.partition("://")
        if scheme == "file":
            return None
        return f"{scheme}://{rest.rpartition('@')[2] if '@' in rest.split('/', 1)[0] else rest}"
    if re.fullmatch(r"[\w.-]+@[\w.-]+:[^/].*", origin):  # scp-like git@host:org/repo.git
        return origin
    return None


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


# ---------------------------------------------------------------- pinning and reading the inputs


def logical_key(definition: DatasetDefinition, snapshots: Mapping[str, int]) -> str:
    return canonical_json.sha256_hex({"recipe": definition.recipe_hash, "schema": definition.contract.schema_hash, "snapshots": dict(snapshots)})[:20]


def pin_sources(tables: CanonicalTables, inputs: Inputs) -> tuple[str, tuple[Pin, ...]]:
    """Tag the current snapshot of every input table; returns the logical key and the pins."""
    definition = inputs.definition
    current: dict[str, int] = {}
    for spec in inputs.tables:
        sid = tables.current_snapshot_id(spec)
        if sid is None:
            first = f"land a batch first (dsv ingest {spec.name} FILE)"
            raise RealizationBuildError(f"{definition.ref}: table {tables.identifier(spec)} has no snapshot yet: {first}")
        current[spec.name] = sid
    key = logical_key(definition, current)
    tag = f"{definition.name}-{definition.version}-{key}"
    pins = tuple(Pin(spec.name, p.snapshot_id, p.tag) for spec in inputs.tables for p in [tables.pin(spec, tag, snapshot_id=current[spec.name])])
    return key, pins


def pinned_watermark(tables: CanonicalTables, inputs: Inputs, pins: Mapping[str, Pin]) -> dt.datetime:
    """The definition's fixed watermark, or the latest ``_recorded_at`` in the pinned snapshots (from manifest bounds, no data scan)."""
    definition = inputs.definition
    if definition.watermark.at is not None:
        return definition.watermark.at
    marks = [m for spec in inputs.tables if (m := max_recorded_at(tables, spec, pins[spec.name].snapshot_id)) is not None]  # from metadata
    if not marks:
        raise RealizationBuildError(f"{definition.ref}: the pinned tables are empty")
    return max(marks)


def assemble(
    tables: CanonicalTables,
    inputs: Inputs,
    pins: Mapping[str, Pin],
    watermark: dt.datetime,
    *,
    zone_of: ZoneOf = zone,
    exclude_batches: Collection[str] = (),
    limits: EngineLimits | None = None,
) -> tuple[pa.Table, int]:
    """:func:`assembled`'s examples whole in memory (contract columns, sorted by its key) and the population before the label join."""
    with assembled(tables, inputs, pins, watermark, zone_of=zone_of, exclude_batches=exclude_batches, limits=limits) as (examples, population):
        return examples.whole().sort_by([(k, "ascending") for k in inputs.definition.contract.key]), population


@contextmanager
def assembled(
    tables: CanonicalTables,
    inputs: Inputs,
    pins: Mapping[str, Pin],
    watermark: dt.datetime,
    *,
    zone_of: ZoneOf = zone,
    exclude_batches: Collection[str] = (),
    limits: EngineLimits | None = None,
    progress: Progress = SILENT,
) -> Iterator[tuple[Examples, int]]:
    """The examples and the population size before the label join, for the block.

    With ``limits`` the relational work runs out of core in DuckDB when the definition allows it
    (:func:`engine_refusal`) and the examples stay in the engine; else they are assembled in memory.
    Both give the same rows. ``zone_of`` gives the time zone rules of local-time windows and buckets
    (default: the pinned tzdata package); ``exclude_batches``: quarantined raw batches whose rows are not read.
    ``progress``: ``read inputs`` and ``assemble`` out of core; one ``assemble`` stage in memory.
    """
    definition = inputs.definition
    label_key = inputs.label.key if inputs.label is not None else None
    if limits is not None and engine_refusal(definition, inputs.tables) is None:  # out of core (services/publication/assembly_engine.py)
        label = label_table_spec(inputs.label) if inputs.label is not None else None
        snapshots = {name: pin.snapshot_id for name, pin in pins.items()}
        sources = {s: inputs.sources[s] for s in [definition.base, *(j.source for j in definition.as_of_joins)]}
        with examples_out_of_core(
            tables, definition, sources, snapshots, watermark, label=label, label_key=label_key, limits=limits, zone_of=zone_of,
            exclude_batches=exclude_batches, progress=progress,
        ) as (examples, population):  # fmt: skip
            yield examples, population
        return
    progress.stage("assemble")

    def read(spec: TableSpecLike, history: bool = False) -> pa.Table:
        return tables.read(spec, snapshot_id=pins[spec.name].snapshot_id, as_of=watermark, exclude_batches=exclude_batches, history=history)

    base = read(inputs.sources[definition.base])
    joined = {j.source: read(inputs.sources[j.source]) for j in definition.as_of_joins if j.known_at is None}
    versions = {s: read(inputs.sources[s], history=True) for s in known_at_sources(definition)}  # core/assembly/known_at.py
    labels = read(label_table_spec(inputs.label)) if inputs.label is not None else None
    table, population = assemble_examples(definition, base, joined, inputs.sources, labels, label_key=label_key, zone_of=zone_of, versions=versions)
    progress.advance(table.num_rows)
    progress.done()
    yield TableExamples(table, definition.contract), population


def partitions_of(table: pa.Table, contract: Contract) -> list[tuple[str, pa.Table]]:
    """``[(<column>=<canonical text>, rows)]`` by the contract's ``partition_by`` (one ``all`` partition without it), as core.hashing keys them."""
    keys = partition_keys(table, contract, contract.partition_by)
    return [(key, table.filter(pc.equal(keys, key))) for key in sorted(pc.unique(keys).to_pylist())]
