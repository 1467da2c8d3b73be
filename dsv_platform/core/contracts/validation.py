"""Contract validation with Pandera: failure cases as data, never exceptions for bad rows.

:func:`pandera_schema` derives a Pandera ``DataFrameSchema`` from a
:class:`Contract` (Arrow-backed pandas dtypes, nullability, a unique natural
key, ``allowed_values`` and ``range`` checks). :func:`validate` runs it lazily
over a pyarrow table and returns a :class:`ValidationReport`: one
:class:`FailureCase` per (column, check, row), with the row's natural key, so
a caller can quarantine exactly the failing rows and keep the rest. A
malformed contract or a programming error still raises.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pandas as pd
import pandera.pandas as pdp
import pyarrow as pa
import pyarrow.compute as pc
from pandera.errors import SchemaErrors

from dsv_platform.core.contracts.contract import Column, Contract, LogicalType

MISSING_COLUMN = "column_in_dataframe"


@dataclass(frozen=True)
class FailureCase:
    """One contract failure: which column, which check, the offending value and the row's natural key."""

    column: str | None
    check: str
    value: Any
    row_key: tuple[Any, ...] | None
    row_index: int | None

    def to_document(self) -> dict[str, Any]:
        return {
            "column": self.column,
            "check": self.check,
            "value": None if self.value is None else str(self.value),
            "row_key": None if self.row_key is None else [str(k) for k in self.row_key],
            "row_index": self.row_index,
        }


@dataclass(frozen=True)
class ValidationReport:
    """The outcome of validating one table against one contract."""

    contract: str
    rows: int
    failures: tuple[FailureCase, ...]

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def failed_rows(self) -> frozenset[int]:
        """Row positions with at least one failure (table-level failures name no row)."""
        return frozenset(f.row_index for f in self.failures if f.row_index is not None)

    @property
    def table_failures(self) -> tuple[FailureCase, ...]:
        """Failures that concern the whole table (missing column, wrong type), not a row."""
        return tuple(f for f in self.failures if f.row_index is None)

    def summary(self) -> dict[str, int]:
        """Failure counts by ``column:check``, sorted."""
        counts: dict[str, int] = {}
        for f in self.failures:
            name = f"{f.column}:{f.check}"
            counts[name] = counts.get(name, 0) + 1
        return dict(sorted(counts.items()))


def _bound(column: Column, value: Any) -> Any:
    if value is None:
        return None
    if column.type is LogicalType.DECIMAL:
        return Decimal(str(value))
    return value


def _checks(column: Column) -> list[pdp.Check]:
    checks: list[pdp.Check] = []
    if column.allowed_values is not None:
        checks.append(pdp.Check.isin(list(column.allowed_values)))
    if column.value_range is not None:
        lo, hi = (_bound(column, v) for v in column.value_range)
        if lo is not None and hi is not None:
            checks.append(pdp.Check.in_range(lo, hi))
        elif lo is not None:
            checks.append(pdp.Check.greater_than_or_equal_to(lo))
        elif hi is not None:
            checks.append(pdp.Check.less_than_or_equal_to(hi))
    return checks


def pandera_schema(contract: Contract, *, unique: bool = True) -> pdp.DataFrameSchema:
    """The Pandera schema of a contract: Arrow dtypes, nullability, allowed values, ranges, unique key (unless not ``unique``)."""
    single_key = unique and len(contract.key) == 1
    columns = {
        c.name: pdp.Column(
            pd.ArrowDtype(c.arrow_type),
            nullable=c.nullable,
            unique=single_key and c.name in contract.key,
            checks=_checks(c),
            description=c.description,
        )
        for c in contract.columns
    }
    return pdp.DataFrameSchema(
        columns,
        unique=None if single_key or not unique else list(contract.key),
        strict="filter",
        name=contract.name,
        coerce=False,
    )


def to_frame(table: pa.Table) -> pd.DataFrame:
    """A pandas frame with Arrow-backed dtypes and a plain 0..n-1 index (row positions)."""
    return table.to_pandas(types_mapper=pd.ArrowDtype).reset_index(drop=True)


def _plain(value: Any) -> Any:
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "as_py"):
        return value.as_py()
    return value


def _row_key(table: pa.Table, key: Sequence[str], index: int) -> tuple[Any, ...] | None:
    if not all(k in table.column_names for k in key):
        return None
    return tuple(table.column(k)[index].as_py() for k in key)


def _cast_columns(table: pa.Table, contract: Contract) -> tuple[pa.Table, list[FailureCase]]:
    """Keep the contract's columns; report missing ones and ones whose Arrow type differs."""
    failures: list[FailureCase] = []
    for c in contract.columns:
        if c.name not in table.column_names:
            failures.append(FailureCase(c.name, MISSING_COLUMN, None, None, None))
        elif not table.schema.field(c.name).type.equals(c.arrow_type):
            actual = table.schema.field(c.name).type
            failures.append(FailureCase(c.name, f"dtype('{c.arrow_type}')", str(actual), None, None))
    return table, failures


def _plain_kind(t: pa.DataType) -> type | None:
    """The Python type whose values a column of ``t`` holds, for the types :func:`_surely_valid` checks; None for others."""
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return str
    if pa.types.is_integer(t):
        return int
    if pa.types.is_floating(t):
        return float
    if pa.types.is_decimal(t):
        return Decimal
    if pa.types.is_boolean(t) or pa.types.is_date(t) or pa.types.is_timestamp(t):
        return object
    return None


def _column_surely_valid(values: pa.ChunkedArray, column: Column) -> bool:
    kind = _plain_kind(values.type)
    if kind is None or (not column.nullable and values.null_count):
        return False
    if kind is float and pc.any(pc.is_nan(values)).as_py():
        return False  # NaN: Pandera's nullability and range checks decide
    if column.allowed_values is not None:
        if kind not in (str, int) or any(type(v) is not kind for v in column.allowed_values):
            return False
        present = pc.drop_null(values)  # Pandera's checks leave nulls to the nullability check
        if pc.any(pc.invert(pc.is_in(present, value_set=pa.array(list(column.allowed_values), values.type)))).as_py():
            return False
    if column.value_range is not None:
        lo, hi = (_bound(column, v) for v in column.value_range)
        if kind not in (int, float, Decimal) or any(b is not None and (isinstance(b, bool) or not isinstance(b, int | float | Decimal)) for b in (lo, hi)):
            return False
        bounds = pc.min_max(values).as_py()
        if bounds["min"] is not None and ((lo is not None and bounds["min"] < lo) or (hi is not None and bounds["max"] > hi)):
            return False
    return True


def _surely_valid(table: pa.Table, contract: Contract) -> bool:
    """True when no row can fail the Pandera schema without its key's uniqueness: nothing to report, Pandera need not run.

    Conservative, in Arrow: no null in a non-nullable column, no NaN, allowed values and ranges of plain kinds met.
    Any doubt (another type, a bound of another kind) is False, and Pandera reports exactly what fails.
    """
    return all(_column_surely_valid(table.column(c.name), c) for c in contract.columns)


def validate(table: pa.Table, contract: Contract, *, unique: bool = True) -> ValidationReport:
    """Validate ``table`` against ``contract``; every data problem becomes a :class:`FailureCase`.

    ``unique=False`` leaves the key's uniqueness out (a streamed batch checks it across its record batches).
    """
    table, failures = _cast_columns(table, contract)
    if failures:
        return ValidationReport(contract.name, table.num_rows, tuple(failures))
    if not unique and _surely_valid(table, contract):  # the common case of a streamed record batch, without pandas
        return ValidationReport(contract.name, table.num_rows, ())
    frame = to_frame(table.select(contract.column_names))
    try:
        pandera_schema(contract, unique=unique).validate(frame, lazy=True)
    except SchemaErrors as exc:
        for rec in exc.failure_cases.to_dict(orient="records"):
            idx = _plain(rec.get("index"))
            row = int(idx) if idx is not None else None
            check = str(rec["check"])
            column = _plain(rec.get("column"))
            if column is None and rec.get("schema_context") == "DataFrameSchema" and check.startswith("multiple_fields_uniqueness"):
                column = ",".join(contract.key)
            failures.append(
                FailureCase(
                    column=None if column is None else str(column),
                    check=check,
                    value=_plain(rec.get("failure_case")),
                    row_key=None if row is None else _row_key(table, contract.key, row),
                    row_index=row,
                )
            )
    failures.sort(key=lambda f: (f.row_index if f.row_index is not None else -1, f.column or "", f.check))
    return ValidationReport(contract.name, table.num_rows, tuple(failures))


def split_valid(table: pa.Table, report: ValidationReport) -> tuple[pa.Table, pa.Table]:
    """``(valid_rows, rejected_rows)`` by the report's failing row positions (all rejected on a table failure)."""
    if report.table_failures:
        return table.slice(0, 0), table
    bad = sorted(report.failed_rows)
    if not bad:
        return table, table.slice(0, 0)
    mask = pa.array([False] * table.num_rows)
    flags = mask.to_pylist()
    for i in bad:
        flags[i] = True
    rejected = pa.array(flags)
    return table.filter(pc.invert(rejected)), table.filter(rejected)
