"""Raw source batches (CSV): the generic code lives in :mod:`dsv_platform.core.batch`; this keeps the old call shape.

``prepare_batch(data, contract, aliases)`` reads CSV bytes, as the fraud
sources send them, while the callers switch to ``core.batch.prepare_batch(data, spec)``.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from dsv_platform.core.batch import (
    PARSE_CHECK,
    BatchFile,
    PreparedBatch,
    RawBatch,
    arrival_time,
    batch_file_name,
    batch_of,
    parse_batch_file,
    parse_batch_file_name,
    prepare_table,
)
from dsv_platform.core.contract import Contract
from dsv_platform.core.landing_format import encode_csv, read_csv_text

__all__ = [
    "PARSE_CHECK",
    "BatchFile",
    "PreparedBatch",
    "RawBatch",
    "arrival_time",
    "batch_file_name",
    "batch_of",
    "encode_csv",
    "parse_batch_file",
    "parse_batch_file_name",
    "prepare_batch",
    "read_raw",
]


def read_raw(data: bytes, contract: Contract, aliases: Mapping[str, str] | None = None) -> pa.Table | str:
    """The CSV batch's cells as strings under contract names, or the reason it cannot be read."""
    return read_csv_text(data, contract, aliases)


def prepare_batch(data: bytes, contract: Contract, aliases: Mapping[str, str] | None = None) -> PreparedBatch:
    """Parse, deduplicate and validate a CSV batch's bytes against ``contract``."""
    return prepare_table(read_csv_text(data, contract, aliases), contract)
