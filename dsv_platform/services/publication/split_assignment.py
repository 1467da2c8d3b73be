"""A build's split assignment in bounded memory: computed batch by batch, stored and hashed as it streams.

The examples are read sorted by key (in the engine, which spills), a batch at a time; each batch's
assignment goes straight into the Parquet object (row group by row group, the bytes
:func:`parquet_bytes` gives the whole table) and its ``(example id, entity, split)`` into a table
of the engine, where the entity disjointness and the assignment hash (ids in their own order)
are computed. The stored object, its hash, the counts and the gates' findings are those of the
whole-table assignment (``assign_examples``): the differential tests hold them equal.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from dsv_platform.adapters.engine.duckdb_engine import EngineLimits, engine_cursor, load_table
from dsv_platform.core.config.dataset_definition import DatasetDefinition
from dsv_platform.core.contracts.contract import Contract
from dsv_platform.core.identity.example_id import assignment_key, example_id_column, with_example_id
from dsv_platform.core.progress.stages import SILENT, Progress
from dsv_platform.core.publication.manifest import SplitsEntry
from dsv_platform.core.splits.assignment_stream import SplitTally, assign_in_order, assignment_columns
from dsv_platform.core.splits.policy import SplitPolicy
from dsv_platform.core.splits.split_checks import CheckFinding, CheckReport, hash_sorted_lines
from dsv_platform.core.splits.split_common import PolicyCheck
from dsv_platform.services.publication.examples import Examples
from dsv_platform.services.publication.parts import PARQUET_OPTIONS

if TYPE_CHECKING:
    from dsv_platform.adapters.engine.duckdb_engine import Connection
    from dsv_platform.adapters.objects.object_store import ObjectStore
    from dsv_platform.bootstrap import Platform

ROWS = "__split_rows"
_EXAMPLES = 5


@dataclass(frozen=True)
class SplitSummary:
    """What the gates read of an assignment: its rows, rows per split, entity disjointness, the policy's own rules."""

    rows: int
    counts: Mapping[str, int]
    disjoint: CheckReport
    checks: tuple[PolicyCheck, ...]


def split_assignment(platform: Platform, definition: DatasetDefinition, examples: Examples, progress: Progress = SILENT) -> tuple[SplitSummary, SplitsEntry]:
    """The split assignment of ``examples``, stored as a content-addressed object (its scratch under the data home's spill folder)."""
    settings = platform.settings
    limits = EngineLimits(memory=settings.build_memory, spill_root=settings.spill_dir)
    split = Splitting(definition.contract, definition.policy(), definition.entity_column, definition.ref)
    return assign_splits(split, examples, platform.store, limits, progress=progress)


@dataclass(frozen=True)
class Splitting:
    """How a dataset's examples are split: its output contract, policy and entity column (``source`` names it in errors)."""

    contract: Contract
    policy: SplitPolicy
    entity_column: str
    source: str | None = None


def assign_splits(
    split: Splitting, examples: Examples, store: ObjectStore, limits: EngineLimits, *, progress: Progress = SILENT
) -> tuple[SplitSummary, SplitsEntry]:
    """The assignment of ``examples`` by the contract's key, batch by batch: the gates' summary and the manifest's entry.

    Only the columns the policy reads are read; ``progress`` advances by the rows assigned.
    """
    contract, policy, entity = split.contract, split.policy, split.entity_column
    ident = example_id_column(contract)
    columns = assignment_columns(policy, ident, entity, assignment_key(contract))
    wanted = [c for c in columns.read if c in contract.column_names]
    tally = SplitTally(policy)
    with examples.scratch(limits) as con, _scratch_file(limits.spill_root) as path:
        con.execute(f"DROP TABLE IF EXISTS {ROWS}")
        writer = _RowGroups(path)
        try:
            for batch, positions in examples.ordered(wanted, columns.order, positions=columns.column is None):
                checked, stored = assign_in_order(with_example_id(batch, contract, source=split.source), policy, columns, positions)
                tally.add(checked)
                writer.write(stored)
                _insert(con, pa.table({"id": checked.column(ident), "entity": checked.column(entity), "split": checked.column("split")}))
                progress.advance(checked.num_rows)
            writer.close()
            disjoint = engine_entity_disjoint(con, entity, writer.entity_type(entity))
            digest = engine_assignment_hash(con, ident)
        finally:
            writer.close()
            con.execute(f"DROP TABLE IF EXISTS {ROWS}")
        entry = SplitsEntry(
            policy=policy.to_document(),
            assignment_object=store.put_file(path),
            assignment_hash=digest,
            counts={s: int(tally.counts.get(s, 0)) for s in policy.names},
        )
    return SplitSummary(tally.rows, tally.counts, disjoint, tally.checks()), entry


class _RowGroups:
    """A Parquet file written one full row group at a time: the bytes ``pq.write_table`` writes for the whole table."""

    def __init__(self, path: Path) -> None:
        self.path, self.size = path, int(PARQUET_OPTIONS["row_group_size"])
        self.options = {k: v for k, v in PARQUET_OPTIONS.items() if k != "row_group_size"}
        self.writer: pq.ParquetWriter | None = None
        self.pending: list[pa.Table] = []
        self.held = self.written = 0
        self.closed = False

    def write(self, table: pa.Table) -> None:
        if self.writer is None:
            self.writer = pq.ParquetWriter(str(self.path), table.schema, **self.options)
            self.schema = table.schema
        self.pending.append(table)
        self.held += table.num_rows
        while self.held >= self.size:
            whole = pa.concat_tables(self.pending).combine_chunks()
            self.writer.write_table(whole.slice(0, self.size), row_group_size=self.size)
            self.written += self.size
            rest = whole.slice(self.size)
            self.pending, self.held = [rest], rest.num_rows

    def close(self) -> None:
        if self.writer is None or self.closed:
            return
        self.closed = True
        if self.held or not self.written:  # the last rows; an empty assignment is one empty row group, as write_table writes it
            self.writer.write_table(pa.concat_tables(self.pending).combine_chunks(), row_group_size=self.size)
        self.pending, self.held = [], 0
        self.writer.close()

    def entity_type(self, column: str) -> pa.DataType:
        return self.schema.field(column).type


def _insert(con: Connection, rows: pa.Table) -> None:
    if not _exists(con):
        load_table(con, ROWS, rows.schema.empty_table())
    con.register("__split_incoming", rows)
    try:
        con.execute(f"INSERT INTO {ROWS} SELECT * FROM __split_incoming")
    finally:
        con.unregister("__split_incoming")


def _exists(con: Connection) -> bool:
    found = con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [ROWS]).fetchone()
    return bool(found and found[0])


def engine_entity_disjoint(con: Connection, entity_column: str, entity_type: pa.DataType) -> CheckReport:
    """:func:`splits_are_entity_disjoint` of the whole assignment, grouped in the engine: the same finding."""
    # The least and greatest split code per entity: an entity is in two splits exactly when they differ. Integer codes, not
    # DISTINCT aggregates or min/max of strings, whose per-entity states DuckDB keeps in memory and cannot spill (at 128.9M
    # rows and 2.6M entities both ran out of a 1 GiB pool; the integer form took 66 s and 688 MiB).
    con.execute(f"CREATE OR REPLACE TEMP TABLE __split_codes AS SELECT split, (row_number() OVER (ORDER BY split))::INTEGER AS code "
                f"FROM (SELECT DISTINCT split FROM {ROWS})")  # fmt: skip
    groups = f"SELECT r.entity, min(c.code) AS lo, max(c.code) AS hi FROM {ROWS} r JOIN __split_codes c ON r.split = c.split GROUP BY r.entity"
    counted = con.execute(f"SELECT count(*), count(*) FILTER (WHERE lo <> hi) FROM ({groups})").fetchone() or (0, 0)
    first = f"SELECT entity FROM ({groups}) WHERE lo <> hi ORDER BY entity ASC NULLS LAST LIMIT {_EXAMPLES}"
    named = f"SELECT f.entity, list(DISTINCT r.split) AS splits FROM ({first}) f JOIN {ROWS} r ON r.entity IS NOT DISTINCT FROM f.entity GROUP BY f.entity"
    leaked = con.sql(f"SELECT entity, splits FROM ({named}) ORDER BY entity ASC NULLS LAST").to_arrow_table()
    entities = leaked.column("entity").cast(entity_type).to_pylist()
    examples = [f"{e!r} in {sorted(s)}" for e, s in zip(entities, leaked.column("splits").to_pylist(), strict=True)]
    detail: dict[str, int | str] = {"entities": int(counted[0]), "leaked_entities": int(counted[1]), "examples": "; ".join(examples)}
    return CheckReport((CheckFinding(f"splits_are_entity_disjoint[{entity_column}]", int(counted[1]) == 0, detail),))


def engine_assignment_hash(con: Connection, id_column: str) -> str:
    """:func:`assignment_hash` of the whole assignment: the lines fed in id order, read from the engine batch by batch."""
    digest = hashlib.sha256()
    cursor = engine_cursor(con)
    try:
        for batch in cursor.sql(f"SELECT id, split FROM {ROWS} ORDER BY id, split").to_arrow_reader(1 << 16):
            hash_sorted_lines(digest, batch.column(0), batch.column(1), id_column)
    finally:
        cursor.close()
    return digest.hexdigest()


@contextlib.contextmanager
def _scratch_file(root: Path | None) -> Iterator[Path]:
    """A file for the assignment object under ``root`` (the spill folder), removed afterwards."""
    if root is not None:
        root.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix="splits-", suffix=".parquet", dir=root)
    os.close(handle)
    try:
        yield Path(name)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)


__all__ = ["ROWS", "SplitSummary", "Splitting", "assign_splits", "engine_assignment_hash", "engine_entity_disjoint", "split_assignment"]
