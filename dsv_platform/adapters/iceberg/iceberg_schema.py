"""Schema evolution of canonical tables (pyiceberg ``update_schema``), and reads of older snapshots through the current schema.

A table records the contract it was last evolved to (table property ``dsv.contract``). Before
an append, :func:`evolve_schema` applies the compatible changes of the source's contract
(core/contracts/table_evolution.py) in one Iceberg commit by field id, or refuses the breaking
ones. Older snapshots keep their data files; :func:`scan_arrow` reads them by field id through
the current schema (renamed columns under their new names, added columns null).
Details: docs/schema-evolution.md
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.expressions import AlwaysTrue, BooleanExpression, EqualTo, In
from pyiceberg.io.pyarrow import ArrowScan, _check_pyarrow_schema_compatible, _dataframe_to_data_files
from pyiceberg.table import Table
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestamptzType,
)

from dsv_platform.adapters.iceberg.iceberg_values import BATCH, RECORDED_AT, literal, table_schema
from dsv_platform.core.config.source import TableSpecLike
from dsv_platform.core.contracts.contract import Column, Contract, LogicalType, parse_contract
from dsv_platform.core.contracts.schema_diff import Change
from dsv_platform.core.contracts.table_evolution import Evolution, SchemaEvolutionError, Step, plan_evolution
from dsv_platform.core.errors import ContractError

if TYPE_CHECKING:
    from dsv_platform.adapters.iceberg.iceberg import CanonicalTables

CONTRACT_PROPERTY = "dsv.contract"


@dataclass(frozen=True)
class SchemaChange:
    """One evolution committed to a table: its Iceberg schema ids before and after, and the classified changes."""

    table: str
    schema_before: int
    schema_after: int
    changes: tuple[Change, ...]

    def to_document(self) -> dict[str, Any]:
        """Canonical JSON (an audit entry's detail): a change's old and new values as text unless a string, an integer or a bool."""
        changes = [{**c.to_document(), "old": _plain(c.old), "new": _plain(c.new)} for c in self.changes]
        return {"table": self.table, "schema_before": self.schema_before, "schema_after": self.schema_after, "changes": changes}

    def describe(self) -> str:
        return "; ".join(c.describe() for c in self.changes)


def _plain(value: Any) -> Any:
    return value if value is None or isinstance(value, str | int | bool) else json.dumps(value, sort_keys=True, default=str)


def contract_document(contract: Contract) -> str:
    """The text the table records of ``contract`` (JSON; a date or a decimal in a rule as its text)."""
    return json.dumps(contract.to_document(), sort_keys=True, separators=(",", ":"), default=str)


def recorded_contract(tbl: Table, contract: Contract) -> Contract:
    """The contract ``tbl`` was last evolved to; for a table that records none, read back from its Iceberg schema
    (a column whose Iceberg type and nullability match ``contract``'s is taken as ``contract`` declares it)."""
    text = tbl.properties.get(CONTRACT_PROPERTY)
    if text is not None:
        with contextlib.suppress(ValueError, ContractError):  # unreadable (written by hand?): read back from the schema instead
            return parse_contract(json.loads(text), source=f"table {tbl.name()[-1]} (recorded contract)")
    wanted = iceberg_types(contract)
    declared = {c.name: c for c in contract.columns}
    columns = []
    for f in tbl.schema().fields:
        if f.name in (RECORDED_AT, BATCH):
            continue
        mine = declared.get(f.name)
        if mine is not None and wanted.get(f.name) == f.field_type and mine.nullable == (not f.required):
            columns.append(dataclasses.replace(mine, renamed_from=None))
        else:
            columns.append(_column_of(f, mine))
    names = {c.name for c in columns}
    key = contract.key if set(contract.key) <= names else ()
    return Contract(contract.name, tuple(columns), key, contract.partition_by, contract.owner)


_LOGICAL = {
    t.__name__: logical
    for t, logical in (
        (IntegerType, LogicalType.INT32), (LongType, LogicalType.INT64), (FloatType, LogicalType.FLOAT32), (DoubleType, LogicalType.FLOAT64),
        (StringType, LogicalType.STRING), (BooleanType, LogicalType.BOOL), (DateType, LogicalType.DATE), (BinaryType, LogicalType.BINARY),
        (TimestamptzType, LogicalType.TIMESTAMP),
    )
}  # fmt: skip


def _column_of(f: NestedField, declared: Column | None) -> Column:
    t = f.field_type
    logical = _LOGICAL.get(type(t).__name__, LogicalType.DECIMAL)
    same_family = declared is not None and declared.type is logical
    scale = declared.scale if same_family and declared is not None and logical.is_float else None
    column = Column(f.name, logical, nullable=not f.required, unit=declared.unit if declared is not None else None, scale=scale)
    if isinstance(t, DecimalType):
        return dataclasses.replace(column, precision=t.precision, scale=t.scale)
    if logical is LogicalType.TIMESTAMP:
        return dataclasses.replace(column, resolution=declared.resolution if same_family and declared is not None else "us")
    return column


def iceberg_types(contract: Contract) -> dict[str, IcebergType]:
    """Column name -> the Iceberg type pyiceberg makes of it in the contract's canonical table."""
    return {f.name: f.field_type for f in Catalog._convert_schema_if_needed(table_schema(contract)).fields}


def check_evolution(tables: CanonicalTables, spec: TableSpecLike) -> tuple[Change, ...]:
    """The changes the next load applies to ``spec``'s table, or SchemaEvolutionError (read only: `dsv ingest` asks before landing)."""
    planned = plan(tables, spec)
    return () if planned is None else planned[1].changes


def plan(tables: CanonicalTables, spec: TableSpecLike) -> tuple[Table, Evolution] | None:
    """The table and the changes from its recorded contract to ``spec``'s; None for a missing table. Raises the refusal."""
    if not tables.exists(spec):
        return None
    tbl = tables.load(spec.name)
    evolution = plan_evolution(recorded_contract(tbl, spec.contract), spec.contract, table=tables.identifier(spec))
    if evolution.refused:
        raise evolution.refusal(source=spec.name, file=spec.contract.source)
    have, want = tbl.schema(), iceberg_types(spec.contract)
    for change, step in evolution.steps:
        if step is Step.PROMOTE and change.column is not None:
            _check_promotion(spec.name, change.column, have.find_field(change.column).field_type, want[_new_name(evolution, change.column)])
    return tbl, evolution


def evolve_schema(tables: CanonicalTables, spec: TableSpecLike) -> SchemaChange | None:
    """Evolve ``spec``'s table to its contract before an append (one commit, retried), or raise SchemaEvolutionError.

    None when nothing changed; a table made here records its contract from the start.
    """
    document = contract_document(spec.contract)
    for attempt in range(1, tables.commit_attempts + 1):
        planned = plan(tables, spec)
        if planned is None:
            tables.table(spec)
            planned = plan(tables, spec)
            assert planned is not None
        tbl, evolution = planned
        if tbl.properties.get(CONTRACT_PROPERTY) == document:
            return None
        before = tbl.schema().schema_id
        try:
            with tbl.transaction() as txn:
                if evolution.alters_schema:
                    _apply(txn, tbl, evolution, spec.contract)
                txn.set_properties({CONTRACT_PROPERTY: document})
        except CommitFailedException:
            time.sleep(0.05 * attempt)
            continue
        after = tables.load(spec.name).schema().schema_id
        return SchemaChange(tables.identifier(spec), before, after, evolution.changes) if evolution.changes else None
    raise SchemaEvolutionError(f"evolving the schema of {tables.identifier(spec)} lost {tables.commit_attempts} commit races in a row; retry the run")


def _apply(txn: Any, tbl: Table, evolution: Evolution, contract: Contract) -> None:
    wanted = iceberg_types(contract)
    current = tbl.schema()
    with txn.update_schema() as update:
        for change, step in evolution.steps:
            old = change.column
            assert old is not None
            if step is Step.ADD_COLUMN:
                update.add_column(old, wanted[old], required=False)
            elif step is Step.RENAME:
                update.rename_column(old, change.new)
            elif step is Step.MAKE_OPTIONAL:
                update.make_column_optional(old)
            elif step is Step.PROMOTE and current.find_field(old).field_type != wanted[_new_name(evolution, old)]:
                update.update_column(old, field_type=wanted[_new_name(evolution, old)])  # checked by plan()


def _new_name(evolution: Evolution, old: str) -> str:
    return next((str(c.new) for c, s in evolution.steps if s is Step.RENAME and c.column == old), old)


def _promotable(have: IcebergType, want: IcebergType) -> bool:
    """The Iceberg spec's type promotions (checked here: pyiceberg 0.12 lets a decimal's scale change)."""
    if isinstance(have, DecimalType) and isinstance(want, DecimalType):
        return have.scale == want.scale and want.precision >= have.precision
    return (type(have), type(want)) in ((IntegerType, LongType), (FloatType, DoubleType))


def _check_promotion(source: str, column: str, have: IcebergType, want: IcebergType) -> None:
    if have != want and not _promotable(have, want):
        raise SchemaEvolutionError(
            f"source {source}: column {column!r}: Iceberg cannot widen {have} to {want} in place (it widens int -> long, "
            f"float -> double and a decimal's precision at the same scale): keep {have}, or land the new shape as a new source (another name)"
        )


def scan_arrow(tbl: Table, row_filter: BooleanExpression, snapshot_id: int | None, selected: Sequence[str]) -> pa.Table:
    """``tbl.scan(...).to_arrow()``, except that a snapshot written under an older schema is read by field id through
    the current one, so its rows come out under the current names and types (added columns null)."""
    scan = tbl.scan(row_filter=row_filter, snapshot_id=snapshot_id, selected_fields=tuple(selected))
    snapshot = None if snapshot_id is None else tbl.snapshot_by_id(snapshot_id)
    current = tbl.schema()
    if snapshot is None or snapshot.schema_id is None or snapshot.schema_id == current.schema_id:
        return scan.to_arrow()
    projected = current if "*" in selected else current.select(*selected)
    return ArrowScan(tbl.metadata, tbl.io, projected, scan.row_filter, scan.case_sensitive, scan.limit).to_table(scan.plan_files())


def equal(column: str, value: object) -> BooleanExpression:
    """The row filter ``column == value`` (pyiceberg's runtime signature; its typed model signature differs)."""
    return EqualTo(column, value)  # type: ignore[call-arg, arg-type]


def where(condition: BooleanExpression | tuple[str, object]) -> BooleanExpression:
    """A row filter given as an expression or as ``(column, value)``."""
    return equal(condition[0], condition[1]) if isinstance(condition, tuple) else condition


def partition_filter(spec: TableSpecLike, values: Collection[object]) -> BooleanExpression:
    """The rows of these partitions (all rows for an unpartitioned table)."""
    part = spec.contract.partition_by
    if part is None or not values:
        return AlwaysTrue()
    if len(values) == 1:
        return equal(part, literal(next(iter(values))))
    return In(part, {literal(v) for v in values})  # type: ignore[call-arg, arg-type]


def rows_filter(contract: Contract, rows: pa.Table) -> BooleanExpression:
    """The partitions ``rows`` fall in (all rows when one is null or the table is unpartitioned)."""
    part = contract.partition_by
    if part is None or rows.num_rows == 0:
        return AlwaysTrue()
    values = pc.unique(rows.column(part)).to_pylist()
    if any(v is None for v in values):
        return AlwaysTrue()
    if len(values) == 1:
        return equal(part, literal(values[0]))
    return In(part, {literal(v) for v in values})  # type: ignore[call-arg, arg-type]  # only the partitions the batch touches


def with_sort_order(txn: Any, contract: Contract) -> None:
    """Stage the contract's key, ascending (nulls last, as Arrow sorts), as the table's sort order in the transaction ``txn``."""
    with txn.update_sort_order() as update:
        for column in contract.key:
            update.asc(column, IdentityTransform())


def sort_columns(table_metadata: Any) -> list[str]:
    """The column names of the table's default sort order (none for an unsorted table)."""
    order = table_metadata.sort_order_by_id(table_metadata.default_sort_order_id)
    if order is None or order.is_unsorted:
        return []
    schema = table_metadata.schema()
    return [schema.find_column_name(f.source_id) for f in order.fields]


class DataFileWriter:
    """The data files of one snapshot being made by ``files`` (a fast append of ``txn``): one file counter for the snapshot
    (else every write's first file is named ``00000-0-<uuid>`` and replaces the one before), never one path twice (``error``)."""

    def __init__(self, txn: Any, files: Any, tbl: Table, error: type[Exception]) -> None:
        self.txn, self.files, self.tbl, self.error = txn, files, tbl, error
        self.counter, self.paths = itertools.count(0), set[str]()

    def __call__(self, df: pa.Table) -> None:
        """Write ``df`` (stamped rows, checked against the table schema, sorted by the table's sort order) as data files of the snapshot."""
        meta = self.txn.table_metadata
        _check_pyarrow_schema_compatible(meta.schema(), provided_schema=df.schema, format_version=meta.format_version)
        if order := sort_columns(meta):  # each data file sorted by the table's sort order (the key; iceberg_hygiene.py)
            df = df.sort_by([(column, "ascending") for column in order])
        for data_file in _dataframe_to_data_files(table_metadata=meta, write_uuid=self.files.commit_uuid, df=df, io=self.tbl.io, counter=self.counter):
            if data_file.file_path in self.paths:  # a later write replaced an earlier one's bytes: never commit that
                raise self.error(f"append to {'.'.join(self.tbl.name())}: data file {data_file.file_path} written twice")
            self.paths.add(data_file.file_path)
            self.files.append_data_file(data_file)
