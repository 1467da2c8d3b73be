"""Issue 22 item 6: ``Dataset.iter_batches(split=, columns=, batch_size=)`` streams verified record batches.

On a real realization (the fraud world: partitions by day, a group split): the batches hold exactly what
``to_arrow`` returns, per split too, in partition then key order, never more than ``batch_size`` rows, and an
object that does not hash to its name stops the stream with CORRUPT naming the partition.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from dsv_platform.core.errors import CorruptError, DsvError
from dsv_platform.services.publication.datasets import open_dataset
from dsv_platform_tests.scenarios.support import World


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return World.create(tmp_path_factory.mktemp("iter"), days=3)


@pytest.fixture(scope="module")
def ref(world: World) -> str:
    return world.build().ref


def _key(ds, table: pa.Table) -> pa.Table:
    return table.sort_by([(k, "ascending") for k in ds.contract.key])


def test_the_batches_are_the_dataset_in_partition_order(world: World, ref: str) -> None:
    ds = open_dataset(world.platform, ref)
    batches = list(ds.iter_batches(batch_size=50))
    assert batches and all(b.num_rows <= 50 for b in batches)
    streamed = pa.Table.from_batches(batches)
    assert streamed.equals(ds.to_arrow())
    assert len(ds.partitions) > 1 and sum(p.rows for p in ds.partitions) == streamed.num_rows


def test_each_split_streams_its_examples_and_only_the_columns_asked_for(world: World, ref: str) -> None:
    ds = open_dataset(world.platform, ref)
    names = sorted(set(ds.split_assignment.column("split").to_pylist()))
    assert len(names) > 1
    total = 0
    for split in names:
        streamed = pa.Table.from_batches(list(ds.iter_batches(split=split)))
        assert _key(ds, streamed).to_pylist() == ds.to_arrow(split).to_pylist(), split
        total += streamed.num_rows
        narrow = pa.Table.from_batches(list(ds.iter_batches(split=split, columns=[ds.contract.key[0], "is_fraud"])))
        assert narrow.column_names == [ds.contract.key[0], "is_fraud"] and narrow.num_rows == streamed.num_rows
    assert total == ds.to_arrow().num_rows


def test_unknown_splits_and_columns_are_refused(world: World, ref: str) -> None:
    ds = open_dataset(world.platform, ref)
    with pytest.raises(DsvError, match="no split named 'holdout'"):
        next(ds.iter_batches(split="holdout"))
    with pytest.raises(DsvError, match=r"column\(s\) \['nope'\] are not readable"):
        next(ds.iter_batches(columns=["nope"]))
    with pytest.raises(DsvError, match="batch_size must be at least 1"):
        next(ds.iter_batches(batch_size=0))


def test_a_corrupt_object_stops_the_stream_naming_its_partition(tmp_path: Path) -> None:
    own = World.create(tmp_path, days=2)
    ds = open_dataset(own.platform, own.build().ref)
    last = ds.partitions[-1]
    store = own.platform.store
    sealed = store.keys.sealed(last.object)  # the object is stored encrypted, under the digest of its ciphertext
    path = store.sealed_store.path(sealed) if sealed is not None else store.inner.path(last.object)
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    stream = ds.iter_batches()
    with pytest.raises(CorruptError, match=f"partition {last.key}"):
        for _ in stream:
            pass
