"""An unpartitioned dataset is never split by partition key: same digest, no key array built."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dsv_platform.core.contracts.contract import parse_contract
from dsv_platform.core.identity import hashing, streaming
from dsv_platform.core.identity.hashing import UNPARTITIONED_KEY, hash_table

CONTRACT = parse_contract({"name": "t", "key": ["id"], "columns": [{"name": "id", "type": "int64"}, {"name": "s", "type": "string", "nullable": True}]})


def _no_keys(*args: object, **kwargs: object) -> None:
    raise AssertionError("partition keys computed for an unpartitioned dataset")


def _batches() -> list[tuple[str, pa.RecordBatch]]:
    table = pa.table({"id": pa.array([5, 3, 9, 1, 7, 2], pa.int64()), "s": ["e", None, "i", "a\tb", "g", "b"]})
    return [("a.parquet", b) for b in table.to_batches(max_chunksize=2)] + [("b.parquet", pa.record_batch(table.slice(0, 0).to_pydict(), schema=table.schema))]


@pytest.mark.parametrize("spill_bytes", [1, 1 << 30])
def test_unpartitioned_streaming_skips_the_split_and_keeps_the_digest(spill_bytes: int) -> None:
    batches = _batches()
    expected = hash_table(pa.Table.from_batches([b for _, b in batches]), CONTRACT)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(streaming, "partition_keys", _no_keys)
        mp.setattr(hashing, "partition_keys", _no_keys)
        digest = streaming.hash_batches(batches, CONTRACT, spill_bytes=spill_bytes)
        assert hash_table(pa.Table.from_batches([b for _, b in batches]), CONTRACT) == expected
    assert digest == expected
    assert [p.key for p in digest.partitions] == [UNPARTITIONED_KEY]


def test_unpartitioned_streaming_of_empty_batches_has_no_partition() -> None:
    empty = [("a.parquet", b) for _, b in _batches()[-1:]]
    assert list(streaming.iter_partitions(empty, CONTRACT)) == []
    digest = streaming.hash_batches(empty, CONTRACT)
    assert digest == streaming.digest_of([], CONTRACT)


def test_partition_keys_of_an_unpartitioned_table_are_all() -> None:
    table = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
    assert hashing.partition_keys(table, CONTRACT, None).to_pylist() == [UNPARTITIONED_KEY] * 3
