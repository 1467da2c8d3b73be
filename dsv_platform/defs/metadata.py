"""Small renderers from our values to Dagster metadata: tables as ``MetadataValue.table`` (typed columns, sortable in the UI)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import dagster as dg

from dsv_platform.core.contracts.validation import FailureCase

MAX_ROWS = 50

if TYPE_CHECKING:
    AssetResult = dg.MaterializeResult[None]
else:
    AssetResult = dg.MaterializeResult  # Dagster reads asset return annotations: a subscripted one breaks assets with checks

_TYPES = ((bool, "bool"), (int, "int"), (float, "float"))


Cell = str | int | float | bool | None


# The UI reads table cells as JavaScript numbers: an integer past 2**53 (an Iceberg snapshot id) would show rounded.
JS_SAFE_INT = 2**53 - 1


def _cell(value: object) -> Cell:
    if type(value) is int and abs(value) > JS_SAFE_INT:
        return str(value)  # exact digits; its column becomes a string column
    return value if value is None or isinstance(value, str | int | float | bool) else str(value)


def _type(values: Sequence[Cell]) -> str:
    """The column's table type: bool, int or float when every non-null value is one (bool is not an int here), else string."""
    present = [v for v in values if v is not None]
    for python, name in _TYPES:
        if present and all(type(v) is python for v in present):
            return name
    return "string"


def table(header: Sequence[str], rows: Iterable[Sequence[object]], *, limit: int = MAX_ROWS) -> dg.MetadataValue:
    """``rows`` under ``header`` as a table; past ``limit`` rows the first column's description says how many are not shown."""
    cells = [[_cell(v) for v in row] for row in rows]
    shown = cells[:limit]
    types = [_type([r[i] for r in shown]) for i in range(len(header))]
    for row in shown:  # a column of mixed types is a string column: every value its text
        row[:] = [str(v) if t == "string" and v is not None else v for v, t in zip(row, types, strict=True)]
    more = f"first {limit} of {len(cells)} rows shown" if len(cells) > limit else None
    columns = [dg.TableColumn(name, t, description=more if i == 0 else None) for i, (name, t) in enumerate(zip(header, types, strict=True))]
    records = [dg.TableRecord(dict(zip(header, row, strict=True))) for row in shown]
    return dg.MetadataValue.table(records=records, schema=dg.TableSchema(columns=columns))


def failure_cases(failures: Sequence[FailureCase]) -> dg.MetadataValue:
    return table(["row", "key", "column", "check", "value"], [(f.row_index, f.row_key, f.column, f.check, f.value) for f in failures])
