"""`dsv hash` and `dsv canonical`: layout never changes the identity.

``dsv hash`` runs in this process (:class:`DsvCli`, in the data's folder); ``dsv canonical`` runs the installed entry
point, whose stdout bytes on a pipe are what ``sha256sum`` hashes."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsv_platform.core.contracts.contract import load_contract
from dsv_platform.core.identity.hashing import hash_table
from dsv_platform_tests.fixtures.cli_runner import DsvCli

DSV = str(Path(sys.executable).with_name("dsv"))
CONTRACT_YAML = """\
name: events
key: [event_id]
partition_by: day
columns:
  - {name: event_id, type: int64}
  - {name: day, type: date}
  - {name: user, type: string}
  - {name: amount, type: decimal, precision: 10, scale: 2, nullable: true}
  - {name: score, type: float64, scale: 3, nullable: true}
  - {name: at, type: timestamp, resolution: ms}
"""


@pytest.fixture
def dsv(dataset: tuple[Path, pa.Table], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> DsvCli:
    """``dsv`` in this process, in the dataset's folder."""
    monkeypatch.chdir(dataset[0])
    return DsvCli(capsys, monkeypatch, {})


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pa.Table]:
    root = tmp_path_factory.mktemp("events")
    rng = random.Random(20260314)
    n = 3000
    base = dt.datetime(2026, 3, 12, tzinfo=dt.UTC)
    ids = rng.sample(range(-(10**12), 10**12), n)
    table = pa.table(
        {
            "event_id": pa.array(ids, pa.int64()),
            "day": pa.array([dt.date(2026, 3, 12 + rng.randint(0, 3)) for _ in range(n)], pa.date32()),
            "user": pa.array([rng.choice(["ann", "bob\tby", "zoë", "zoe\u0308", "back\\slash", "nl\n"]) for _ in range(n)]),
            "amount": pa.array([None if rng.random() < 0.1 else Decimal(rng.randint(-(10**6), 10**6)).scaleb(-2) for _ in range(n)], pa.decimal128(10, 2)),
            "score": pa.array(
                [None if rng.random() < 0.1 else rng.choice([rng.uniform(-5, 5), 0.0005, -0.0005, float("nan")]) for _ in range(n)], pa.float64()
            ),
            "at": pa.array([base + dt.timedelta(milliseconds=rng.randint(0, 10**9)) for _ in range(n)], pa.timestamp("ms", tz="UTC")),
        }
    )
    (root / "contract.yaml").write_text(CONTRACT_YAML, encoding="utf-8")
    pq.write_table(table, root / "original.parquet", row_group_size=1000, compression="snappy")

    copy = root / "copy"
    copy.mkdir()
    order = list(range(n))
    rng.shuffle(order)
    shuffled = table.take(pa.array(order))
    bounds = sorted(rng.sample(range(1, n), 4))
    for i, (start, end) in enumerate(zip([0, *bounds], [*bounds, n], strict=True)):
        sub = copy / f"day_part={i % 2}"
        sub.mkdir(exist_ok=True)
        part = shuffled.slice(start, end - start)
        # different writer settings: row groups, compression, dictionary, large types, int96-free
        if i % 2:
            part = part.cast(pa.schema([f.with_type(pa.large_string()) if f.type == pa.string() else f for f in part.schema]))
        pq.write_table(
            part,
            sub / f"f{i}.parquet",
            row_group_size=rng.randint(7, 500),
            compression=["zstd", "gzip", "none", "brotli", "snappy"][i],
            use_dictionary=bool(i % 2),
        )
    return root, table


def test_hash_cmd_reordered_rechunked_copy_prints_the_same_hash(dataset: tuple[Path, pa.Table], dsv: DsvCli) -> None:
    root, table = dataset
    original = dsv("hash", "original.parquet", "--contract", "contract.yaml")
    copy = dsv("hash", "copy", "--contract", "contract.yaml")
    assert original.code == 0 and copy.code == 0, original.err + copy.err
    assert original.out == copy.out
    assert original.err == ""
    expected = hash_table(table, load_contract(root / "contract.yaml"), partition_by="day")
    assert f"content_hash  {expected.content_hash}" in original.out
    assert f"schema_hash   {expected.schema_hash}" in original.out


def test_hash_cmd_json_output(dataset: tuple[Path, pa.Table], dsv: DsvCli) -> None:
    root, table = dataset
    out = dsv("hash", "copy", "--contract", "contract.yaml", "--json")
    assert out.code == 0, out.err
    doc = json.loads(out.out)
    expected = hash_table(table, load_contract(root / "contract.yaml"), partition_by="day")
    assert doc == expected.to_document()
    assert [p["key"] for p in doc["partitions"]] == ["day=2026-03-12", "day=2026-03-13", "day=2026-03-14", "day=2026-03-15"]
    assert sum(p["rows"] for p in doc["partitions"]) == doc["rows"] == table.num_rows


def test_hash_cmd_partition_by_override(dataset: tuple[Path, pa.Table], dsv: DsvCli) -> None:
    root, table = dataset
    out = dsv("hash", "copy", "--contract", "contract.yaml", "--partition-by", "user", "--json")
    assert out.code == 0, out.err
    doc = json.loads(out.out)
    assert doc == hash_table(table, load_contract(root / "contract.yaml"), partition_by="user").to_document()
    assert "user=bob\\tby" in [p["key"] for p in doc["partitions"]]


def test_hash_cmd_canonical_text_hashes_to_the_partition_hash(dataset: tuple[Path, pa.Table], dsv: DsvCli) -> None:
    root, _ = dataset
    digest = json.loads(dsv("hash", "copy", "--contract", "contract.yaml", "--json").out)
    leaf = digest["partitions"][1]
    text = subprocess.run(
        [DSV, "canonical", "copy", "--contract", "contract.yaml", "--partition", leaf["key"]], capture_output=True, cwd=root, check=True
    ).stdout
    assert hashlib.sha256(text).hexdigest() == leaf["hash"]
    assert text.count(b"\n") == leaf["rows"]
    everything = subprocess.run([DSV, "canonical", "original.parquet", "--contract", "contract.yaml"], capture_output=True, cwd=root, check=True).stdout
    assert everything.count(b"\n") == digest["rows"]
    assert text in everything
