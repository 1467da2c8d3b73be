"""A build's examples, whole in memory or held by the build engine: counted, projected, filtered and read per partition.

The build asks only for what each step needs: a few columns for the split assignment, one
partition at a time for hashing and storing, the whole table only for a gate that compares
rows across it (semantic rules, duplicate clusters). :class:`EngineExamples` keeps the rows in
the build's DuckDB database, so a build without such gates holds one partition at a time.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.adapters.engine.duckdb_engine import EngineLimits, engine, engine_cursor, load_table
from dsv_platform.adapters.engine.memory import shrink_pool
from dsv_platform.core.assembly.assembly_sql import quote
from dsv_platform.core.contracts.contract import Contract
from dsv_platform.core.identity.hashing import UNPARTITIONED_KEY, partition_keys
from dsv_platform.services.publication.parts import KeyOrderedRows

if TYPE_CHECKING:
    from dsv_platform.adapters.engine.duckdb_engine import Connection

Part = tuple[str, Callable[[], pa.Table]]
Ordered = tuple[pa.Table, pa.Array | None]  # a batch of rows, and each one's position when asked
BATCH_ROWS = 1 << 16
PART_ROWS = 1 << 17  # a part's rows are read a Parquet row group at a time (parts.py)
POSITION = "__position"


class Examples(Protocol):
    contract: Contract

    @property
    def num_rows(self) -> int: ...

    def select(self, columns: Sequence[str]) -> pa.Table: ...

    def ordered(self, columns: Sequence[str], order: Sequence[str], *, positions: bool = False) -> Iterator[Ordered]:
        """``columns`` sorted by ``order`` (ascending), batch by batch (at least one, maybe empty), with each row's position when asked."""

    def scratch(self, limits: EngineLimits) -> AbstractContextManager[Connection]:
        """A DuckDB database for work beside the examples: the engine's own, else a fresh one under ``limits``."""

    def whole(self) -> pa.Table: ...

    def parts(self) -> list[Part]: ...

    def keys(self) -> set[str]:
        """The partition keys the examples fall in (what :meth:`parts` would return the keys of), without grouping the rows."""

    def distinct(self, column: str) -> list[object]:
        """Each value of ``column`` once (nulls included), in no particular order."""

    def filtered(self, keep: Callable[[pa.Table], pa.Table]) -> Examples: ...


class TableExamples:
    """Examples already in memory (the in-memory assembly)."""

    def __init__(self, table: pa.Table, contract: Contract) -> None:
        self.table, self.contract = table, contract

    @property
    def num_rows(self) -> int:
        return int(self.table.num_rows)

    def select(self, columns: Sequence[str]) -> pa.Table:
        return self.table.select(list(dict.fromkeys(columns)))

    def ordered(self, columns: Sequence[str], order: Sequence[str], *, positions: bool = False) -> Iterator[Ordered]:
        narrow = self.select(columns)
        if positions:
            narrow = narrow.append_column(POSITION, pa.array(np.arange(narrow.num_rows, dtype=np.int64)))
        narrow = narrow.sort_by([(k, "ascending") for k in order])
        for start in range(0, max(narrow.num_rows, 1), BATCH_ROWS):
            yield _positioned(narrow.slice(start, BATCH_ROWS).combine_chunks(), positions)

    def scratch(self, limits: EngineLimits) -> AbstractContextManager[Connection]:
        return engine(limits)

    def whole(self) -> pa.Table:
        return self.table

    def parts(self) -> list[Part]:
        keys = partition_keys(self.table, self.contract, self.contract.partition_by)
        return [(key, functools.partial(self._part, keys, key)) for key in sorted(pc.unique(keys).to_pylist())]

    def keys(self) -> set[str]:
        return set(pc.unique(partition_keys(self.table, self.contract, self.contract.partition_by)).to_pylist())

    def distinct(self, column: str) -> list[object]:
        return list(pc.unique(self.table.column(column)).to_pylist())

    def _part(self, keys: pa.Array, key: str) -> pa.Table:
        return self.table.filter(pc.equal(keys, key))

    def filtered(self, keep: Callable[[pa.Table], pa.Table]) -> Examples:
        return TableExamples(keep(self.table), self.contract)


class EngineExamples:
    """Examples in table ``name`` of the build's DuckDB database (contract columns; cast to the contract when read)."""

    def __init__(self, con: Connection, name: str, contract: Contract) -> None:
        self.con, self.name, self.contract = con, name, contract
        counted = con.execute(f"SELECT count(*) FROM {name}").fetchone()
        self._rows = int(counted[0]) if counted else 0
        self._keyed: str | None = None

    @property
    def num_rows(self) -> int:
        return self._rows

    def _read(self, sql: str, columns: Sequence[str]) -> pa.Table:
        schema = pa.schema([self.contract.arrow_schema.field(c) for c in columns])
        cursor = engine_cursor(self.con)  # one per read: the publisher reads parts on worker threads
        try:
            reader = cursor.sql(sql).to_arrow_reader(BATCH_ROWS)  # streamed: the engine holds a batch, never the whole result
            return pa.Table.from_batches(list(reader), schema=reader.schema).cast(schema)
        finally:
            cursor.close()  # an open cursor keeps the database alive (and writing its WAL) after the build removed it

    def select(self, columns: Sequence[str]) -> pa.Table:
        wanted = list(dict.fromkeys(columns))
        return self._read(f"SELECT {', '.join(quote(c) for c in wanted)} FROM {self.name}", wanted)

    def ordered(self, columns: Sequence[str], order: Sequence[str], *, positions: bool = False) -> Iterator[Ordered]:
        """Sorted in the engine (spilling past its memory limit); a row's position is its place in the table (``rowid``)."""
        wanted = list(dict.fromkeys(columns))
        fields = [self.contract.arrow_schema.field(c) for c in wanted] + ([pa.field(POSITION, pa.int64())] if positions else [])
        position = f", row_number() OVER (ORDER BY rowid) - 1 AS {POSITION}" if positions else ""
        sql = f"SELECT {', '.join(quote(c) for c in wanted)}{position} FROM {self.name} ORDER BY {', '.join(quote(k) for k in order)}"
        cursor = engine_cursor(self.con)
        try:
            empty = True
            for batch in cursor.sql(sql).to_arrow_reader(BATCH_ROWS):
                empty = False
                yield _positioned(pa.Table.from_batches([batch]).cast(pa.schema(fields)), positions)
            if empty:
                yield _positioned(pa.schema(fields).empty_table(), positions)
        finally:
            cursor.close()

    def scratch(self, limits: EngineLimits) -> AbstractContextManager[Connection]:
        return contextlib.nullcontext(self.con)

    def whole(self) -> pa.Table:
        return self.select(self.contract.column_names)

    def parts(self) -> list[Part]:
        """Each partition's key and a reader of its rows, in key order; rows are grouped by key once, in the engine."""
        column, names = self.contract.partition_by, self.contract.column_names
        listed = ", ".join(quote(c) for c in names)
        if column is None:
            return [(UNPARTITIONED_KEY, self._ordered(f"SELECT {listed} FROM {self.name} ORDER BY {', '.join(quote(k) for k in self.contract.key)}"))]
        values = self._values(column)
        keys = partition_keys(values, self.contract, column).to_pylist()
        order = sorted(set(keys))
        position = {k: i for i, k in enumerate(order)}
        index = pa.array([position[k] for k in keys], pa.int32())
        load_table(self.con, "__partition_values", pa.table({"v": values.column(column), "__part": index}))
        match = f"e.{quote(column)} IS NOT DISTINCT FROM p.v"
        self.con.execute(f"CREATE OR REPLACE TABLE __keyed AS SELECT e.*, p.__part FROM {self.name} e JOIN __partition_values p ON {match}")
        shrink_pool(self.con, 2)  # from here the engine sorts one part per job at a time; the parts stream, so half the pool is theirs
        by_key = ", ".join(quote(k) for k in self.contract.key)
        return [(k, self._ordered(f"SELECT {listed} FROM __keyed WHERE __part = {i} ORDER BY {by_key}")) for i, k in enumerate(order)]

    def _ordered(self, sql: str) -> KeyOrderedRows:
        """A part's rows in natural-key order, read a row group at a time (the engine sorts, spilling past its limit)."""
        schema = self.contract.arrow_schema
        setting = self.con.execute("SELECT current_setting('temp_directory')").fetchone()
        spool = Path(str(setting[0])).parent if setting and setting[0] else None  # the build's engine folder, removed after it

        def tables() -> Iterator[pa.Table]:
            cursor = engine_cursor(self.con)  # one per read: the publisher reads parts on worker threads
            try:
                for batch in cursor.sql(sql).to_arrow_reader(PART_ROWS):
                    yield pa.Table.from_batches([batch]).cast(schema)
            finally:
                cursor.close()

        return KeyOrderedRows(tables, schema, spool)

    def _values(self, column: str) -> pa.Table:
        """Each value of the partition column once, with one row's key (what an encoding error names)."""
        others = [k for k in self.contract.key if k != column]
        firsts = "".join(f", any_value({quote(k)}) AS {quote(k)}" for k in others)
        return self._read(f"SELECT {quote(column)}{firsts} FROM {self.name} GROUP BY {quote(column)}", [column, *others])

    def keys(self) -> set[str]:
        column = self.contract.partition_by
        return {UNPARTITIONED_KEY} if column is None else set(partition_keys(self._values(column), self.contract, column).to_pylist())

    def distinct(self, column: str) -> list[object]:
        return list(self._read(f"SELECT DISTINCT {quote(column)} FROM {self.name}", [column]).column(column).to_pylist())

    def filtered(self, keep: Callable[[pa.Table], pa.Table]) -> Examples:
        """The rows ``keep`` keeps, streamed through it batch by batch into a new table."""
        target = f"{self.name}_kept"
        cursor = engine_cursor(self.con)
        reader = cursor.sql(f"SELECT {', '.join(quote(c) for c in self.contract.column_names)} FROM {self.name}").to_arrow_reader(BATCH_ROWS)
        schema = self.contract.arrow_schema

        def kept() -> Iterator[pa.RecordBatch]:
            for batch in reader:
                yield from keep(pa.Table.from_batches([batch]).cast(schema)).to_batches()

        self.con.register("__kept", pa.RecordBatchReader.from_batches(schema, kept()))
        try:
            self.con.execute(f"CREATE TABLE {target} AS SELECT * FROM __kept")
        finally:
            self.con.unregister("__kept")
            cursor.close()
        return EngineExamples(self.con, target, self.contract)


def _positioned(table: pa.Table, positions: bool) -> Ordered:
    if not positions:
        return table, None
    return table.drop_columns([POSITION]), table.column(POSITION).combine_chunks()


__all__ = ["EngineExamples", "Examples", "Ordered", "Part", "TableExamples"]
