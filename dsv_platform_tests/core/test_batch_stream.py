"""Issue 22 item 4: a batch prepared in record batches equals the batch prepared whole (rows, failures, positions, duplicates).

The record batches here hold 3 rows, so exact duplicates, repeated keys and bad cells fall in different record batches.
"""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pytest

from dsv_platform.core.config.source import parse_source
from dsv_platform.core.ingest.batch import prepare_batch
from dsv_platform.core.ingest.batch_stream import accepted_chunks, scan_batch
from dsv_platform.core.ingest.landing_format import encode_batch
from dsv_platform.core.ingest.landing_stream import bytes_opener


def source(tmp_path: Path, fmt: str, key: list[str], **extra: object):
    columns = [
        {"name": "id", "type": "string"},
        {"name": "n", "type": "int64"},
        {"name": "day", "type": "date"},
        {"name": "x", "type": "float64", "scale": 4, "nullable": True, "range": {"min": 0, "max": 100}},
    ]
    doc = {"name": "s", "key": key, "partition_by": "day", "valid_time": "day", "columns": columns, "landing": {"format": fmt}, **extra}
    return parse_source(doc, file=tmp_path / "s.yaml")


ROWS = [
    ("a", "1", "2026-06-01", "1.5"),
    ("b", "2", "2026-06-01", "2.5"),
    ("c", "3", "2026-06-02", "-0.0"),
    ("a", "1", "2026-06-01", "1.5"),  # an exact duplicate of row 0, in the second record batch
    ("d", "x4", "2026-06-02", "4"),  # a bad int
    ("b", "9", "2026-06-03", "7"),  # repeats key b (single key), both rejected
    ("e", "5", "2026-06-03", "nan"),
    ("e", "5", "2026-06-03", "nan"),  # NaN rows are never duplicates: key e repeats
    ("f", "6", "2026-06-04", "500"),  # out of range
    ("g", "1", "2026-06-04", "0.0"),
    ("c", "3", "2026-06-02", "0.0"),  # equals row 2 as Python compares text? no: '-0.0' != '0.0' as text, so key c repeats
]


def encoded(fmt: str) -> bytes:
    table = pa.table({name: pa.array([r[i] for r in ROWS], pa.string()) for i, name in enumerate(["id", "n", "day", "x"])})
    return encode_batch(table, fmt) if fmt != "parquet" else b""


@pytest.mark.parametrize("key", [["id"], ["id", "n"]])
@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_streamed_equals_whole(tmp_path, fmt, key):
    spec = source(tmp_path, fmt, key)
    data = encoded(fmt)
    whole = prepare_batch(data, spec)
    scan = scan_batch(bytes_opener(data), spec, rows=3)
    assert scan.malformed_reason is None
    assert scan.failures == whole.report.failures
    assert scan.duplicates_dropped == whole.duplicates_dropped and scan.rejected == whole.rejected.num_rows
    assert scan.rows == whole.report.rows
    assert scan.plan is not None
    streamed = pa.concat_tables(accepted_chunks(bytes_opener(data), spec, scan.plan, rows=3))
    assert streamed.equals(whole.accepted)


def test_typed_parquet_streamed_equals_whole(tmp_path):
    spec = source(tmp_path, "parquet", ["id"])
    table = pa.table({
        "id": ["a", "b", "a", "c", "c", "d", "e"],
        "n": pa.array([1, 2, 1, 3, 4, 5, 6], pa.int64()),
        "day": pa.array([pa.scalar(19509 + i % 3, pa.date32()).as_py() for i in range(7)], pa.date32()),
        "x": [1.0, 2.0, 1.0, None, 3.0, 200.0, float("nan")],
    })  # fmt: skip
    table = table.set_column(2, "day", pa.array([table.column("day")[0].as_py()] * 7, pa.date32()))
    data = encode_batch(table, "parquet")
    whole = prepare_batch(data, spec)
    scan = scan_batch(bytes_opener(data), spec, rows=2)
    assert scan.failures == whole.report.failures and scan.duplicates_dropped == whole.duplicates_dropped == 1
    assert pa.concat_tables(accepted_chunks(bytes_opener(data), spec, scan.plan, rows=2)).equals(whole.accepted)


@pytest.mark.parametrize(
    ("fmt", "data", "reason"),
    [
        ("csv", b"id,n,day\na,1,2026-06-01\n", "missing column(s) ['x']"),
        ("csv", b"", "not readable as CSV"),
        ("csv", b'id,n,day,x\na,1,2026-06-01,1\n"b,2\n', "not readable as CSV"),
        ("jsonl", b'{"id": "a", "n": 1, "day": "2026-06-01", "x": 1}\n[1]\n', "line 2 is not an object"),
        ("jsonl", b'{"id": "a", "n": 1, "day": "2026-06-01"}\n' * 5 + b'{"x": 1}\n', None),
        ("jsonl", b'{"id": "a", "n": 1, "day": "2026-06-01"}\n', "missing column(s) ['x']"),
        ("parquet", b"PAR1 not parquet", "not readable as Parquet"),
    ],
)
def test_unreadable_batches_give_the_same_reason(tmp_path, fmt, data, reason):
    spec = source(tmp_path, fmt, ["id"])
    whole = prepare_batch(data, spec)
    scan = scan_batch(bytes_opener(data), spec, rows=2)
    assert (scan.malformed_reason is None) == (whole.malformed_reason is None)
    if reason is None:  # a column named only late in the batch is present: its earlier cells are null
        assert scan.failures == whole.report.failures and scan.rejected == whole.rejected.num_rows
    else:
        assert reason in scan.malformed_reason and reason in whole.malformed_reason


def test_a_jsonl_alias_fills_its_column(tmp_path):
    spec = source(tmp_path, "jsonl", ["id"], aliases={"value": "x"})
    data = b'{"id": "a", "n": 1, "day": "2026-06-01", "value": 2}\n{"id": "b", "n": 2, "day": "2026-06-01"}\n'
    whole = prepare_batch(data, spec)
    scan = scan_batch(bytes_opener(data), spec, rows=1)
    assert pa.concat_tables(accepted_chunks(lambda: io.BytesIO(data), spec, scan.plan, rows=1)).equals(whole.accepted)
