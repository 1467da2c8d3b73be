"""Reading a landed batch (CSV, JSON Lines or Parquet) as a stream of record batches under contract names.

The same cells as :mod:`landing_format` reads from whole bytes (literal CSV text, JSON numbers as their
text, Parquet typed), a record batch at a time, so memory follows the record batch, not the file.
A batch that cannot be read raises :class:`UnreadableBatch` with the reason, possibly after some
record batches came out: a caller reads the whole stream once before it trusts any of it.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from typing import BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from dsv_platform.core.config.source import SourceSpec
from dsv_platform.core.errors import DsvError
from dsv_platform.core.ingest.landing_format import _cell_text, _contract_view, naive_timestamps

Opener = Callable[[], BinaryIO]
"""A fresh binary stream of the batch's bytes, from the start (a batch is read more than once)."""
BATCH_ROWS = 65_536
CSV_BLOCK = 4 << 20


class UnreadableBatch(DsvError):
    """A landed batch is not readable as its source's format; the message is the reason."""


def _csv_options(spec: SourceSpec, names: list[str]) -> pcsv.ConvertOptions:
    return pcsv.ConvertOptions(
        column_types=dict.fromkeys([*names, *spec.contract.column_names, *spec.aliases], pa.string()),
        null_values=list(spec.null_values),
        strings_can_be_null=True,
        quoted_strings_can_be_null=False,
    )


def _csv_chunks(open_: Opener, spec: SourceSpec) -> Iterator[pa.Table]:
    contract, aliases = spec.contract, spec.aliases
    try:
        with open_() as head:  # the header's names, so that every column is read as text (no type inference per block)
            names = pcsv.open_csv(head, read_options=pcsv.ReadOptions(block_size=1 << 20), convert_options=_csv_options(spec, [])).schema.names
        with open_() as stream:
            reader = pcsv.open_csv(stream, read_options=pcsv.ReadOptions(block_size=CSV_BLOCK), convert_options=_csv_options(spec, names))
            view = _contract_view(reader.schema.empty_table(), contract, aliases, text=True)
            if isinstance(view, str):
                raise UnreadableBatch(view)
            yielded = False
            for batch in reader:
                yielded = True
                yield _view(pa.Table.from_batches([batch]), spec, text=True)
            if not yielded:
                yield view
    except (pa.ArrowInvalid, UnicodeDecodeError) as exc:
        raise UnreadableBatch(f"not readable as CSV: {exc}") from exc


def _view(raw: pa.Table, spec: SourceSpec, *, text: bool) -> pa.Table:
    view = _contract_view(raw, spec.contract, spec.aliases, text=text)
    if isinstance(view, str):
        raise UnreadableBatch(view)
    return view


def _jsonl_chunks(open_: Opener, spec: SourceSpec, rows: int) -> Iterator[pa.Table]:
    """JSON Lines a record batch at a time; which columns the batch has (missing, twice after the aliases) is checked at its end."""
    wanted = [*spec.contract.column_names, *spec.aliases]
    seen: set[str] = set()
    number = 0
    cells: dict[str, list[str | None]] = {n: [] for n in wanted}
    with open_() as stream:
        for physical in stream:
            try:
                lines = physical.decode("utf-8").splitlines()
            except UnicodeDecodeError as exc:
                raise UnreadableBatch(f"not readable as JSON Lines: not UTF-8 ({exc})") from exc
            for line in lines:
                number += 1
                _json_row(line, number, wanted, cells, seen)
            if len(cells[wanted[0]]) >= rows:
                yield _jsonl_table(cells, spec)
                cells = {n: [] for n in wanted}
    present = pa.schema([pa.field(n, pa.string()) for n in wanted if n in seen]).empty_table()
    _view(present, spec, text=True)  # the whole batch's columns: one missing, or one twice after the compatibility view
    if cells[wanted[0]] or number == 0:
        yield _jsonl_table(cells, spec)


def _json_row(line: str, number: int, wanted: list[str], cells: dict[str, list[str | None]], seen: set[str]) -> None:
    if not line.strip():
        return
    try:
        row = json.loads(line, parse_float=str, parse_int=str, parse_constant=str)
    except json.JSONDecodeError as exc:
        raise UnreadableBatch(f"not readable as JSON Lines: line {number}: {exc.msg}") from exc
    if not isinstance(row, dict):
        raise UnreadableBatch(f"not readable as JSON Lines: line {number} is not an object")
    seen.update(row)
    for name in wanted:
        try:
            cells[name].append(_cell_text(row.get(name)))
        except TypeError as exc:
            raise UnreadableBatch(f"line {number}: column {name!r} holds a nested {exc} value") from exc


def _jsonl_table(cells: dict[str, list[str | None]], spec: SourceSpec) -> pa.Table:
    """Contract columns of some lines; a column's cells come from its name or its alias (the batch holds only one of them)."""
    columns = {}
    for name in spec.contract.column_names:
        sources = [pa.array(cells[n], pa.string()) for n in [name, *(a for a, target in spec.aliases.items() if target == name)]]
        columns[name] = sources[0] if len(sources) == 1 else pc.coalesce(*sources)
    return pa.table(columns, schema=pa.schema([pa.field(n, pa.string()) for n in spec.contract.column_names]))


def _parquet_chunks(open_: Opener, spec: SourceSpec, rows: int) -> Iterator[pa.Table]:
    with open_() as stream:
        source = stream if stream.seekable() else pa.BufferReader(stream.read())  # a stream without seeks: its (compressed) bytes
        try:
            pf = pq.ParquetFile(source)
            schema = pf.schema_arrow
        except (pa.ArrowException, OSError) as exc:
            raise UnreadableBatch(f"not readable as Parquet: {exc}") from exc
        view = _view(schema.empty_table(), spec, text=False)
        naive = naive_timestamps(view, spec.contract)
        if naive:
            raise UnreadableBatch(naive)
        wanted = [n for n in schema.names if spec.aliases.get(n, n) in spec.contract.column_names]
        try:
            yielded = False
            for batch in pf.iter_batches(batch_size=rows, columns=wanted):
                yielded = True
                yield _view(pa.Table.from_batches([batch]), spec, text=False)
        except (pa.ArrowException, OSError) as exc:
            raise UnreadableBatch(f"not readable as Parquet: {exc}") from exc
        if not yielded:
            yield view


def contract_chunks(open_: Opener, spec: SourceSpec, *, rows: int = BATCH_ROWS) -> Iterator[pa.Table]:
    """The batch's contract columns, a record batch at a time (about ``rows`` rows), by the source's landing format."""
    if spec.landing_format == "parquet":
        return _parquet_chunks(open_, spec, rows)
    if spec.landing_format == "jsonl":
        return _jsonl_chunks(open_, spec, rows)
    return _csv_chunks(open_, spec)


def bytes_opener(data: bytes) -> Opener:
    """An :data:`Opener` over bytes in memory."""
    return lambda: io.BytesIO(data)
