"""Contract violations: typed errors naming the column, row key and file, never a hash."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsv_platform.core.contracts.contract import parse_contract
from dsv_platform.core.errors import ContractViolationError, DsvError
from dsv_platform.core.identity.hashing import hash_table
from dsv_platform.core.identity.streaming import hash_batches

DSV = str(Path(sys.executable).with_name("dsv"))
CONTRACT_DOC: dict[str, Any] = {
    "name": "orders",
    "key": ["order_id"],
    "columns": [
        {"name": "order_id", "type": "int64"},
        {"name": "region", "type": "string"},
        {"name": "amount", "type": "decimal", "precision": 8, "scale": 2},
        {"name": "placed_at", "type": "timestamp", "resolution": "us"},
    ],
}
CONTRACT = parse_contract(CONTRACT_DOC)
T0 = dt.datetime(2026, 3, 14, tzinfo=dt.UTC)


def good_columns() -> dict[str, pa.Array]:
    return {
        "order_id": pa.array([3, 1, 2], pa.int64()),
        "region": pa.array(["eu", "us", "eu"]),
        "amount": pa.array([Decimal("1.00"), Decimal("-2.50"), Decimal("0.05")], pa.decimal128(8, 2)),
        "placed_at": pa.array([T0, T0, T0], pa.timestamp("us", tz="UTC")),
    }


def bad(**changes: pa.Array | None) -> pa.Table:
    cols = good_columns()
    for name, array in changes.items():
        if array is None:
            del cols[name]
        else:
            cols[name] = array
    return pa.table(cols)


CASES = {
    "null-key": (bad(order_id=pa.array([3, None, 2], pa.int64())), ["'order_id'", "null"]),
    "duplicate-key": (bad(order_id=pa.array([3, 2, 3], pa.int64())), ["duplicate", "row key 3"]),
    "naive-timestamp": (bad(placed_at=pa.array([T0.replace(tzinfo=None)] * 3, pa.timestamp("us"))), ["'placed_at'", "naive"]),
    "sub-resolution": (bad(placed_at=pa.array([0, 1_000, 1_500], pa.timestamp("ns", tz="UTC"))), ["'placed_at'", "row key 2", "truncate"]),
    "missing-column": (bad(region=None), ["region"]),
    "null-not-nullable": (bad(region=pa.array(["eu", None, "eu"])), ["'region'", "row key 1"]),
    "wrong-type": (bad(amount=pa.array(["1", "2", "3"])), ["'amount'", "decimal"]),
    "decimal-overflow": (bad(amount=pa.array([Decimal("1000000.00"), Decimal("1"), Decimal("2")], pa.decimal128(12, 2))), ["'amount'", "decimal(8,2)"]),
}


@pytest.mark.parametrize(("table", "mentions"), CASES.values(), ids=list(CASES))
def test_canonical_violation_is_typed_and_names_column_and_row(table: pa.Table, mentions: list[str]) -> None:
    with pytest.raises(ContractViolationError) as info:
        hash_table(table, CONTRACT)
    for text in mentions:
        assert text in str(info.value)


@pytest.mark.parametrize(("table", "mentions"), CASES.values(), ids=list(CASES))
def test_canonical_violation_in_a_stream_is_typed(table: pa.Table, mentions: list[str]) -> None:
    with pytest.raises(ContractViolationError) as info:
        hash_batches(
            [("good.parquet", good_batch) for good_batch in pa.table(good_columns()).slice(0, 0).to_batches()]
            + [("bad.parquet", b) for b in table.to_batches()],
            CONTRACT,
        )
    assert any(text in str(info.value) for text in mentions)


STREAM_FILE_NAMED = ["null-key", "naive-timestamp", "missing-column", "null-not-nullable"]


@pytest.mark.parametrize("case", STREAM_FILE_NAMED)
def test_canonical_violation_caught_per_batch_names_the_file(case: str) -> None:
    table, _ = CASES[case]
    with pytest.raises(ContractViolationError, match=r"bad\.parquet"):
        hash_batches([("bad.parquet", b) for b in table.to_batches()], CONTRACT)


def test_canonical_violation_error_carries_fields() -> None:
    with pytest.raises(ContractViolationError) as info:
        hash_table(CASES["sub-resolution"][0], CONTRACT)
    assert info.value.column == "placed_at"
    assert info.value.row_key == 2
    assert isinstance(info.value, DsvError)


# --- the command line: one line on stderr, nothing on stdout, non-zero exit -------


@pytest.fixture(scope="module")
def bad_inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bad")
    (root / "contract.yaml").write_text(
        "name: orders\nkey: [order_id]\ncolumns:\n"
        "  - {name: order_id, type: int64}\n  - {name: region, type: string}\n"
        "  - {name: amount, type: decimal, precision: 8, scale: 2}\n  - {name: placed_at, type: timestamp, resolution: us}\n",
        encoding="utf-8",
    )
    for name, (table, _) in CASES.items():
        pq.write_table(table, root / f"{name}.parquet")
    (root / "unknown-type.yaml").write_text("name: x\nkey: [k]\ncolumns:\n  - {name: k, type: int64}\n  - {name: v, type: varchar}\n", encoding="utf-8")
    (root / "junk.parquet").write_bytes(b"this is not parquet")
    return root


CLI_CASES = {name: ([f"{name}.parquet"], mentions[0]) for name, (_, mentions) in CASES.items()}
CLI_CASES |= {
    "unknown-type-contract": (["null-key.parquet", "--contract", "unknown-type.yaml"], "'v'"),
    "missing-contract": (["null-key.parquet", "--contract", "nope.yaml"], "nope.yaml"),
    "missing-path": (["nowhere"], "nowhere"),
    "unknown-partition-column": (["null-key.parquet", "--partition-by", "zone"], "'zone'"),
    "not-parquet": (["junk.parquet"], "junk.parquet"),
}


def _args(argv: list[str]) -> list[str]:
    return [argv[0], "--contract", "contract.yaml", *argv[1:]] if "--contract" not in argv else argv


@pytest.mark.parametrize(("argv", "mention"), CLI_CASES.values(), ids=list(CLI_CASES))
def test_canonical_cli_hash_error_is_one_line_on_stderr(
    bad_inputs: Path, argv: list[str], mention: str, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dsv_platform.cli.main import main

    monkeypatch.chdir(bad_inputs)
    code = main(["hash", *_args(argv)])  # in process; one case below also runs the installed dsv
    out, err = capfd.readouterr()
    assert code != 0 and out == "", "partial output on error"
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("dsv: error: ") and mention in lines[0]


def test_a_file_that_is_not_parquet_is_one_line_from_the_installed_dsv(bad_inputs: Path) -> None:
    """The whole process, not ``main``: a crash in native code or anything printed at interpreter exit shows only there."""
    argv, mention = CLI_CASES["not-parquet"]
    proc = subprocess.run([DSV, "hash", *_args(argv)], cwd=bad_inputs, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", proc
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("dsv: error: ") and mention in line


@pytest.mark.parametrize(("argv", "mention"), CLI_CASES.values(), ids=list(CLI_CASES))
def test_canonical_cli_canonical_error_is_one_line_on_stderr(
    bad_inputs: Path, argv: list[str], mention: str, capfdbinary: pytest.CaptureFixture[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dsv_platform.cli.main import main

    monkeypatch.chdir(bad_inputs)
    code = main(["canonical", *_args(argv)])  # in process: an unexpected exception fails the test with its traceback
    out, err = capfdbinary.readouterr()
    assert code != 0 and out == b""
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dsv: error: ") and mention in lines[0]
