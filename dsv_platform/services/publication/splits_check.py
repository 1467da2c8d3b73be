"""The split assignment of a published realization, re-read and checked against its manifest.

The assignment object is fetched to a file in the spill folder and streamed, one row group at a
time, into a scratch DuckDB database, where the entity disjointness groups by entity and the
assignment hash reads the ids back in their order: the findings and hash of the whole-table check
(``split_checks.py``), in bounded memory whatever the number of examples.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from dsv_platform.adapters.engine.duckdb_engine import EngineLimits, engine, load
from dsv_platform.core.errors import CorruptError, SplitPolicyError
from dsv_platform.core.publication.manifest import PartitionEntry
from dsv_platform.core.splits.split_checks import CheckReport
from dsv_platform.services.publication.datasets import fetch_object, open_dataset
from dsv_platform.services.publication.realization_inputs import RealizationBuildError, example_id
from dsv_platform.services.publication.split_assignment import ROWS, engine_assignment_hash, engine_entity_disjoint

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform
    from dsv_platform.core.config.dataset_definition import DatasetDefinition

BATCH_ROWS = 1 << 16


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
    if splits is None:
        raise RealizationBuildError(f"{ref}: the manifest records no split assignment")
    entry = PartitionEntry(key="splits", hash=splits.assignment_hash, rows=0, object=splits.assignment_object, bytes=0)
    limits = EngineLimits(memory=platform.settings.build_memory, spill_root=platform.settings.spill_dir)
    ident, entity = example_id(definition.contract), definition.entity_column
    with engine(limits) as con, tempfile.TemporaryDirectory(dir=limits.spill_root, prefix="splits-check-") as folder:
        path = Path(folder) / "assignment.parquet"
        fetch_object(ds.store, ds.ref, entry, path)
        with pq.ParquetFile(path) as stored:
            load(con, ROWS, _assignment_rows(stored, ident, entity))
            entity_type = stored.schema_arrow.field(entity).type
        disjoint = engine_entity_disjoint(con, entity, entity_type)
        recomputed = engine_assignment_hash(con, ident)
    if recomputed != splits.assignment_hash:
        raise CorruptError(f"split assignment {splits.assignment_object} hashes to {recomputed}, the manifest says {splits.assignment_hash}", ref=ref)
    return SplitsCheck(ds.ref, recomputed, dict(splits.counts), splits.to_document()["policy"], disjoint)


def _assignment_rows(stored: pq.ParquetFile, ident: str, entity: str) -> pa.RecordBatchReader:
    """``(id, entity, split)`` of the stored assignment, batch by batch, the split as text."""
    names = stored.schema_arrow.names
    for column in dict.fromkeys([ident, entity, "split"]):
        if column not in names:
            raise SplitPolicyError(f"column {column!r} is not in the table (columns: {names})")
    types = stored.schema_arrow
    schema = pa.schema([pa.field("id", types.field(ident).type), pa.field("entity", types.field(entity).type), pa.field("split", pa.string())])

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in stored.iter_batches(BATCH_ROWS, columns=list(dict.fromkeys([ident, entity, "split"]))):
            split = batch.column("split").cast(pa.string())
            yield pa.record_batch([batch.column(ident), batch.column(entity), split], schema=schema)

    return pa.RecordBatchReader.from_batches(schema, batches())


__all__ = ["SplitsCheck", "check_splits"]
