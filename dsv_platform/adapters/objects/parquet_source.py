"""Read a Parquet file, or a folder of them in any layout, as a stream of record batches."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dsv_platform.core.errors import InputError

BATCH_ROWS = 1 << 17


def discover_parquet(path: str | Path) -> list[Path]:
    """The Parquet files at ``path``: the file itself, or every ``*.parquet`` below a folder, in path order."""
    root = Path(path)
    if root.is_file():
        return [root]
    if root.is_dir():
        files = sorted(p for p in root.rglob("*.parquet") if p.is_file() and not p.name.startswith((".", "_")))
        if not files:
            raise InputError(f"{root}: no .parquet files in this folder")
        return files
    raise InputError(f"{root}: no such file or folder")


def read_schema(file: Path) -> pa.Schema:
    try:
        return pq.read_schema(file)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"{file}: not a readable Parquet file ({exc})") from exc


def count_rows(files: Sequence[Path]) -> int:
    """Rows in all ``files``, from their footers (for progress bars)."""
    total = 0
    for file in files:
        try:
            total += pq.ParquetFile(file).metadata.num_rows
        except (pa.ArrowInvalid, OSError) as exc:
            raise InputError(f"{file}: not a readable Parquet file ({exc})") from exc
    return total


def iter_batches(files: Sequence[Path], columns: Sequence[str]) -> Iterator[tuple[str, pa.RecordBatch]]:
    """``(file name, batch)`` for every batch of every file, reading only ``columns``."""
    for file in files:
        schema = read_schema(file)
        missing = [c for c in columns if c not in schema.names]
        if missing:
            raise InputError(f"{file}: missing column(s) {missing}; the file has {schema.names}")
        try:
            reader = pq.ParquetFile(file)
            for batch in reader.iter_batches(batch_size=BATCH_ROWS, columns=list(columns)):
                yield str(file), batch
        except (pa.ArrowInvalid, OSError) as exc:
            raise InputError(f"{file}: cannot read Parquet data ({exc})") from exc
