"""`dsv hash --jobs N`: partitions hashed in worker processes give byte-identical output for every N."""

from __future__ import annotations

import datetime as dt
import multiprocessing
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsv_platform.cli.main import main
from dsv_platform.core.contracts.contract import load_contract
from dsv_platform.core.identity.hashing import hash_table

DSV = str(Path(sys.executable).with_name("dsv"))
CONTRACT = """\
name: events
key: [event_id]
{partition}columns:
  - {{name: event_id, type: int64}}
  - {{name: day, type: date}}
  - {{name: user, type: string}}
"""
DAYS = 8


def _table(n: int = 4000) -> pa.Table:
    ids = [(i * 7919) % 100_003 for i in range(n)]
    return pa.table(
        {
            "event_id": pa.array(ids, pa.int64()),
            "day": pa.array([dt.date(2026, 3, 1 + i % DAYS) for i in range(n)], pa.date32()),
            "user": pa.array([f"u{i % 97}\t{'zoë' if i % 5 else 'x'}" for i in range(n)]),
        }
    )


def _write(root: Path, table: pa.Table, *, partitioned: bool = True) -> tuple[Path, Path]:
    data = root / "data"
    data.mkdir()
    third = table.num_rows // 3
    for i, start in enumerate((0, third, 2 * third)):  # rows of every partition spread over three files
        pq.write_table(table.slice(start, third if i < 2 else None), data / f"f{i}.parquet", row_group_size=500)
    contract = root / "contract.yaml"
    contract.write_text(CONTRACT.format(partition="partition_by: day\n" if partitioned else ""), encoding="utf-8")
    return data, contract


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("partitioned", [True, False], ids=["8-partitions", "unpartitioned"])
def test_every_jobs_value_prints_the_serial_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str], partitioned: bool) -> None:
    table = _table()
    data, contract = _write(tmp_path, table, partitioned=partitioned)
    outputs = {}
    for jobs in ("1", "2"):
        for fmt in ((), ("--json",)):
            code, out, err = _run(capsys, "hash", str(data), "--contract", str(contract), "--jobs", jobs, *fmt)
            assert (code, err) == (0, "")
            outputs[jobs, fmt] = out
    assert outputs["1", ()] == outputs["2", ()]
    assert outputs["1", ("--json",)] == outputs["2", ("--json",)]
    expected = hash_table(table, load_contract(contract), partition_by="day" if partitioned else None)
    assert f'"content_hash": "{expected.content_hash}"' in outputs["2", ("--json",)]
    assert outputs["2", ()].count("rows\n") == (DAYS if partitioned else 1)
    assert multiprocessing.active_children() == []


def test_a_failing_partition_fails_the_same_way_for_every_jobs_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A duplicate key found inside a worker: the same one-line error, exit 2, and no worker left running."""
    table = _table()
    ids = table.column("event_id").to_pylist()
    ids[DAYS * 10] = ids[DAYS * 20]  # same day (row index = day mod 8): a duplicate key in one partition only
    data, contract = _write(tmp_path, table.set_column(0, "event_id", pa.array(ids, pa.int64())))
    results = {jobs: _run(capsys, "hash", str(data), "--contract", str(contract), "--jobs", jobs) for jobs in ("1", "2")}
    assert results["1"] == results["2"]
    code, out, err = results["2"]
    assert (code, out) == (2, "")
    assert err.startswith("dsv: error: ") and err.count("\n") == 1 and "duplicate" in err
    assert multiprocessing.active_children() == []


def test_invalid_utf8_in_one_partition_is_one_line_naming_file_column_row(tmp_path: Path) -> None:
    table = _table(800)
    users = pa.array([b"ok"] * 800, pa.binary()).to_pylist()
    users[403] = b"\xff\xfe"
    bad = table.set_column(2, "user", pa.array(users, pa.binary()).view(pa.string()))
    data, contract = _write(tmp_path, bad)
    # the installed dsv, not main(): a worker process's traceback would reach the terminal past this process's capture
    result = subprocess.run([DSV, "hash", str(data), "--contract", str(contract), "--jobs", "2"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "f1.parquet" in result.stderr and "column 'user'" in result.stderr and "row 137 " in result.stderr


def test_jobs_must_be_at_least_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, contract = _write(tmp_path, _table(100))
    with pytest.raises(SystemExit) as exc:
        main(["hash", str(data), "--contract", str(contract), "--jobs", "0"])
    assert exc.value.code == 2
    assert "--jobs" in capsys.readouterr().err
