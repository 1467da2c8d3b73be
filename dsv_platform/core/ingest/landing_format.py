"""Reading a landed batch's bytes (CSV, JSON Lines or Parquet) into contract-named columns.

CSV and JSON Lines cells come out as text (typed parsing happens in
:func:`dsv_platform.core.ingest.batch.prepare_table`); Parquet columns keep their
types and are cast there. Every reader applies the source's compatibility
view (``aliases``) and keeps only the contract columns; a batch that cannot be
read comes back as the reason (a string).
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from dsv_platform.core.config.source import DEFAULT_NULL_VALUES, LandingFormat, SourceSpec
from dsv_platform.core.contracts.contract import Contract, LogicalType

EXTENSIONS: dict[LandingFormat, str] = {"csv": "csv", "jsonl": "jsonl", "parquet": "parquet"}


def _contract_view(raw: pa.Table, contract: Contract, aliases: Mapping[str, str], *, text: bool, absent_null: bool = False) -> pa.Table | str:
    names = [aliases.get(n, n) for n in raw.column_names]
    if len(set(names)) != len(names):
        return f"columns appear twice after the compatibility view: {raw.column_names}"
    raw = raw.rename_columns(names)
    for col in contract.columns if absent_null else ():  # a replay: a batch landed before this nullable column was added
        if col.nullable and col.name not in names:
            raw = raw.append_column(col.name, pa.nulls(raw.num_rows, pa.string() if text else col.arrow_type))
            names.append(col.name)
    missing = [c for c in contract.column_names if c not in names]
    if missing:
        return f"missing column(s) {missing}; the batch has {raw.column_names}"
    if text:
        not_text = [n for n in contract.column_names if not pa.types.is_string(raw.schema.field(n).type)]
        if not_text:
            return f"column(s) {not_text} could not be read as text"
    return raw.select(contract.column_names)


def read_csv_text(
    data: bytes,
    contract: Contract,
    aliases: Mapping[str, str] | None = None,
    *,
    null_values: Sequence[str] = DEFAULT_NULL_VALUES,
    absent_null: bool = False,
) -> pa.Table | str:
    """The batch's cells as strings under contract names, or the reason it cannot be read.

    Cells are read literally: only an unquoted cell equal to one of ``null_values`` is null (pyarrow's own
    defaults would turn ``NA``, ``N/A``, ``null``, ``NULL``, ``nan`` and more into nulls; they are text here).
    """
    aliases = aliases or {}
    try:
        raw = pcsv.read_csv(
            io.BytesIO(data),
            convert_options=pcsv.ConvertOptions(
                column_types=dict.fromkeys([*contract.column_names, *aliases], pa.string()),
                null_values=list(null_values),
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
            ),
        )
        raw.column_names  # noqa: B018 - header names that are not UTF-8 raise here
    except (pa.ArrowInvalid, UnicodeDecodeError) as exc:
        return f"not readable as CSV: {exc}"
    return _contract_view(raw, contract, aliases, text=True, absent_null=absent_null)


def _cell_text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    raise TypeError(type(value).__name__)


def read_jsonl_text(data: bytes, contract: Contract, aliases: Mapping[str, str] | None = None, *, absent_null: bool = False) -> pa.Table | str:
    """JSON Lines (one object per line) as text cells; numbers keep their literal text, a missing key is null."""
    aliases = aliases or {}
    wanted = [*contract.column_names, *aliases]
    cells: dict[str, list[str | None]] = {n: [] for n in wanted}
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        return f"not readable as JSON Lines: not UTF-8 ({exc})"
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line, parse_float=str, parse_int=str, parse_constant=str)
        except json.JSONDecodeError as exc:
            return f"not readable as JSON Lines: line {number}: {exc.msg}"
        if not isinstance(row, dict):
            return f"not readable as JSON Lines: line {number} is not an object"
        seen.update(row)
        for name in wanted:
            try:
                cells[name].append(_cell_text(row.get(name)))
            except TypeError as exc:
                return f"line {number}: column {name!r} holds a nested {exc} value"
    present = [n for n in wanted if n in seen]
    return _contract_view(pa.table({n: pa.array(cells[n], pa.string()) for n in present}), contract, aliases, text=True, absent_null=absent_null)


def read_parquet_table(data: bytes, contract: Contract, aliases: Mapping[str, str] | None = None, *, absent_null: bool = False) -> pa.Table | str:
    """A Parquet batch's columns (typed as written) under contract names."""
    try:
        raw = pq.read_table(io.BytesIO(data))
    except (pa.ArrowException, OSError) as exc:
        return f"not readable as Parquet: {exc}"
    view = _contract_view(raw, contract, aliases or {}, text=False, absent_null=absent_null)
    if isinstance(view, str):
        return view
    return naive_timestamps(view, contract) or view


def naive_timestamps(view: pa.Table, contract: Contract) -> str | None:
    """The reason a typed batch is refused for timestamp columns without a time zone, else None."""
    types = {c.name: view.schema.field(c.name).type for c in contract.columns if c.type is LogicalType.TIMESTAMP}
    naive = [name for name, t in types.items() if pa.types.is_timestamp(t) and t.tz is None]
    if naive:  # as CSV landing and `dsv hash` refuse them: which zone they meant is not known
        return f"column(s) {naive} hold timestamps without a time zone; write them with one (UTC: timestamp[us, tz=UTC])"
    return None


def read_batch_table(data: bytes, spec: SourceSpec, *, replay: bool = False) -> pa.Table | str:
    """The batch's contract columns by the source's landing format, or the reason it cannot be read.

    ``replay`` (a rebuild from raw replays batches landed under earlier contracts): a column declared
    ``renamed_from`` is also read under its old name, and a nullable column the batch lacks reads null.
    """
    aliases = dict(spec.aliases)
    for col in spec.contract.columns if replay else ():
        if col.renamed_from is not None:
            aliases.setdefault(col.renamed_from, col.name)
    if spec.landing_format == "parquet":
        return read_parquet_table(data, spec.contract, aliases, absent_null=replay)
    if spec.landing_format == "jsonl":
        return read_jsonl_text(data, spec.contract, aliases, absent_null=replay)
    return read_csv_text(data, spec.contract, aliases, null_values=spec.null_values, absent_null=replay)


def encode_csv(table: pa.Table) -> bytes:
    """CSV bytes of a table: header, every valid value quoted, null as an empty unquoted field."""
    out = io.BytesIO()
    pcsv.write_csv(table, out, pcsv.WriteOptions(quoting_style="all_valid"))
    return out.getvalue()


def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)  # Decimal and the rest: their exact text


def encode_jsonl(table: pa.Table) -> bytes:
    """JSON Lines bytes of a table: dates and timestamps as ISO text, decimals as strings."""
    lines = [json.dumps({k: _json_value(v) for k, v in row.items()}, ensure_ascii=False) for row in table.to_pylist()]
    return "".join(f"{line}\n" for line in lines).encode("utf-8")


def encode_parquet(table: pa.Table) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def encode_batch(table: pa.Table, fmt: LandingFormat) -> bytes:
    """Bytes of ``table`` in landing format ``fmt``."""
    return {"csv": encode_csv, "jsonl": encode_jsonl, "parquet": encode_parquet}[fmt](table)
