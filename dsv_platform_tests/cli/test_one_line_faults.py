"""Issue 25 item 10 (in part): faults that were not one line with a code from the failure table.

A 100k-deep YAML ended in RecursionError, and a garbage Iceberg catalog URL exited 70 (internal error).
"""

from __future__ import annotations

from pathlib import Path

from dsv_platform.core.errors import FailureKind
from dsv_platform_tests.fixtures.cli_runner import run_dsv


def test_a_yaml_nested_too_deeply_is_a_configuration_error_naming_the_file(tmp_path: Path) -> None:
    config = tmp_path / "config"
    (config / "sources").mkdir(parents=True)
    (config / "platform.yaml").write_text("a: " + "[" * 100_000 + "\n")
    done = run_dsv({"DSV_HOME": str(tmp_path / "home"), "DSV_CONFIG_DIR": str(config)}, "build", "x:v1")
    assert done.returncode == 2 and done.stderr.strip() == f"dsv: error: {config / 'platform.yaml'}: not valid YAML: nested too deeply", done.stderr


def test_a_garbage_catalog_url_is_an_environment_error_naming_the_variable(tmp_path: Path) -> None:
    done = run_dsv({"DSV_HOME": str(tmp_path / "home"), "DSV_ICEBERG_CATALOG_URL": "garbage://::nope"}, "build", "fraud_training_set:v6")
    assert done.returncode == FailureKind.ENVIRONMENT.exit_code, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "DSV_ICEBERG_CATALOG_URL: not a usable catalog URL" in done.stderr


def test_a_parquet_batch_with_naive_timestamps_is_refused_naming_the_column(tmp_path: Path) -> None:
    """It was landed (its times read as UTC), though CSV landing and ``dsv hash`` refuse naive times."""
    import datetime as dt

    import pyarrow as pa
    import pyarrow.parquet as pq

    config = tmp_path / "config"
    (config / "sources").mkdir(parents=True)
    (config / "platform.yaml").write_text('partitions: {start: "2026-06-01"}\n')
    (config / "sources" / "clicks.yaml").write_text(
        "name: clicks\nkey: [click_id]\npartition_by: day\nlanding: {format: parquet}\nvalid_time: at\ncolumns:\n"
        "  - {name: click_id, type: int64}\n  - {name: at, type: timestamp, resolution: us}\n  - {name: day, type: date}\n"
    )
    naive = pa.table({"click_id": [1], "at": pa.array([dt.datetime(2026, 6, 1, 12)], pa.timestamp("us")), "day": pa.array([dt.date(2026, 6, 1)])})
    pq.write_table(naive, tmp_path / "clicks.parquet")
    env = {"DSV_HOME": str(tmp_path / "home"), "DSV_CONFIG_DIR": str(config)}
    done = run_dsv(env, "ingest", "clicks", str(tmp_path / "clicks.parquet"))
    assert done.returncode != 0 and "column(s) ['at'] hold timestamps without a time zone" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    aware = naive.set_column(1, "at", pa.array([dt.datetime(2026, 6, 1, 12, tzinfo=dt.UTC)], pa.timestamp("us", tz="UTC")))
    pq.write_table(aware, tmp_path / "clicks.parquet")
    assert run_dsv(env, "ingest", "clicks", str(tmp_path / "clicks.parquet")).returncode == 0
