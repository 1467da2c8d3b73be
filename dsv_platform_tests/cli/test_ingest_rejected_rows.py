"""Issue 23 item 2: a batch with rejected rows exits ROWS_REJECTED and says which rows, why, and where the full list is.

Before: ``dsv ingest`` printed ``rows accepted 367, rejected 83`` and ``rows_satisfy_contract: FAILED`` and exited 0;
the reasons existed only in the Dagster UI. The accepted rows still land (append-only).

``dsv`` runs in this process (:class:`DsvCli`): what it prints off a terminal and its exit code are those of the
process (stage lines, not bars: stderr is not a terminal either way).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsv_platform.core.errors import FailureKind
from dsv_platform_tests.fixtures.cli_runner import DsvCli, without_progress

SOURCE = """name: labs
key: [result_id]
partition_by: day
landing: {format: csv}
valid_time: day
columns:
  - {name: result_id, type: int64}
  - {name: day, type: date}
  - {name: analyte, type: string, allowed_values: [Na, K, Cl]}
  - {name: value, type: float64, scale: 2, range: {min: 0, max: 500}}
"""


def _setup(tmp_path: Path) -> tuple[dict[str, str], Path]:
    config = tmp_path / "config"
    (config / "sources").mkdir(parents=True)
    (config / "sources" / "labs.yaml").write_text(SOURCE)
    (config / "platform.yaml").write_text('partitions: {start: "2026-06-01"}\n')
    rows = ["1,2026-06-01,Na,140.0", "2,2026-06-01,K,4.1", "3,2026-06-01,Xx,1.0", "4,2026-06-01,Cl,9999", "5,2026-06-01,Na,abc", "6,2026-06-02,K,3.9"]
    batch = tmp_path / "labs-2026-06-01.csv"
    batch.write_text("result_id,day,analyte,value\n" + "\n".join(rows) + "\n\x1b[31mx,2026-06-01,Na,1\n")
    return {"DSV_HOME": str(tmp_path / "home"), "DSV_CONFIG_DIR": str(config)}, batch


@pytest.fixture
def labs(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[DsvCli, Path]:
    """``dsv`` on the labs home, and the batch file."""
    env, batch = _setup(tmp_path)
    return DsvCli(capsys, monkeypatch, env), batch


def test_rejected_rows_exit_non_zero_naming_key_column_rule_value_and_the_full_list(labs: tuple[DsvCli, Path]) -> None:
    dsv, batch = labs
    done = dsv("ingest", "labs", str(batch))
    assert done.code == FailureKind.ROWS_REJECTED.exit_code == 20, done.err
    assert "rows accepted 3, rejected 4" in done.out, done.out
    assert "key [3] column analyte: isin(['Na', 'K', 'Cl']), value 'Xx'" in done.out, done.out
    assert "key [4] column value: in_range(0, 500), value 9999.0" in done.out
    assert "\x1b" not in done.out + done.err, "a hostile cell is echoed escaped, never raw"
    [err] = without_progress(done.err)  # the stages it ran, then one error line
    assert err.startswith("dsv: error: 4 row(s) of labs rejected by its contract; the accepted rows are landed; see ")
    listed = Path(err.rsplit("see ", 1)[1])
    failures = [json.loads(line) for line in listed.read_text().splitlines()]
    assert {f["column"] for f in failures} >= {"analyte", "value", "result_id"} and all(f["file"] == str(batch) for f in failures)
    again = dsv("ingest", "labs", str(batch), "--json")
    assert again.code == 20, again.err
    [doc] = json.loads(again.out)["files"]
    assert (doc["rows_accepted"], doc["rows_rejected"], doc["rejected_file"]) == (3, 4, str(listed))
    assert len(doc["rejected"]) == len(failures)


def test_a_clean_batch_exits_zero(tmp_path: Path, labs: tuple[DsvCli, Path]) -> None:
    dsv, batch = labs
    batch.write_text("result_id,day,analyte,value\n1,2026-06-01,Na,140.0\n")
    done = dsv("ingest", "labs", str(batch))
    assert done.code == 0 and without_progress(done.err) == [], done.err  # its stages only
    assert not (tmp_path / "home" / "rejected").exists()


def test_a_batch_whose_every_row_is_rejected_is_one_line_and_exit_20(labs: tuple[DsvCli, Path]) -> None:
    """Issue 25 item 10: it was exit 70, DagsterUnknownPartitionError (the batch was mapped to today, not yet a partition)."""
    dsv, batch = labs
    batch.write_text("result_id,day,analyte,value\n1,2026-06-01,Xx,1\n2,2026-06-01,Na,-5\n")
    done = dsv("ingest", "labs", str(batch))
    assert done.code == 20, done.err
    [err] = without_progress(done.err)  # the stages it ran, then one error line
    assert "2 row(s) of labs rejected by its contract; no file had a row to land" in err
    assert "not landed: no row satisfies the contract" in done.out and "key [1] column analyte" in done.out
    as_json = dsv("ingest", "labs", str(batch), "--json")
    doc = json.loads(as_json.out)
    assert as_json.code == 20 and doc["run_id"] is None and doc["files"][0]["rows_rejected"] == 2
