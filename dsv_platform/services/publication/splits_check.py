"""The split assignment of a published realization, re-read and checked against its manifest.

The assignment object is fetched to a file in the spill folder and read by a scratch DuckDB database
(its own Parquet reader, in bounded memory), where the entity disjointness groups by entity and the
assignment hash reads the ids back in their order: the findings and hash of the whole-table check
(``split_checks.py``), in bounded memory whatever the number of examples.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from dsv_platform.adapters.engine.duckdb_engine import EngineLimits, engine
from dsv_platform.core.assembly.assembly_sql import quote
from dsv_platform.core.errors import CorruptError, SplitPolicyError
from dsv_platform.core.publication.manifest import PartitionEntry
from dsv_platform.core.splits.split_checks import CheckReport
from dsv_platform.services.publication.datasets import fetch_object, open_dataset
from dsv_platform.services.publication.realization_inputs import RealizationBuildError, example_id
from dsv_platform.services.publication.split_assignment import ROWS, engine_assignment_hash, engine_entity_disjoint

if TYPE_CHECKING:
    from dsv_platform.adapters.engine.duckdb_engine import Connection
    from dsv_platform.bootstrap import Platform
    from dsv_platform.core.config.dataset_definition import DatasetDefinition


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
        entity_type = _load_assignment(con, path, ident, entity)
        disjoint = engine_entity_disjoint(con, entity, entity_type)
        recomputed = engine_assignment_hash(con, ident)
    if recomputed != splits.assignment_hash:
        raise CorruptError(f"split assignment {splits.assignment_object} hashes to {recomputed}, the manifest says {splits.assignment_hash}", ref=ref)
    return SplitsCheck(ds.ref, recomputed, dict(splits.counts), splits.to_document()["policy"], disjoint)


def _load_assignment(con: Connection, path: Path, ident: str, entity: str) -> pa.DataType:
    """The stored ``(id, entity, split)`` as the engine's view of the file (DuckDB reads it itself); the entity's Arrow type."""
    schema = pq.read_schema(path)
    for column in dict.fromkeys([ident, entity, "split"]):
        if column not in schema.names:
            raise SplitPolicyError(f"column {column!r} is not in the table (columns: {schema.names})")
    source = "read_parquet('" + str(path).replace("'", "''") + "')"  # a view: each query scans the file, nothing is copied
    con.execute(f"CREATE VIEW {ROWS} AS SELECT {quote(ident)} AS id, {quote(entity)} AS entity, CAST(split AS VARCHAR) AS split FROM {source}")
    return schema.field(entity).type


__all__ = ["SplitsCheck", "check_splits"]
