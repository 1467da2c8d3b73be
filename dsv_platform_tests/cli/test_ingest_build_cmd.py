"""`dsv ingest` and `dsv build` refuse bad input with one line (exit 2) before any run; `dsv demo` needs a configured demo.

The successful paths run as real subprocesses in dsv_platform_tests/scenarios/test_config_only_source.py.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsv_platform.cli.main import main
from dsv_platform_tests.core.config_support import write_config


@pytest.fixture
def env(tmp_path, monkeypatch):
    config = write_config(tmp_path / "config")
    monkeypatch.setenv("DSV_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DSV_CONFIG_DIR", str(config))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    return tmp_path


def _error(capsys, *argv: str) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dsv: error: ")
    return err


def test_unknown_source_names_the_known_ones(env, capsys):
    err = _error(capsys, "ingest", "gas", str(env / "x.parquet"))
    assert "unknown source 'gas'" in err and "['calibration', 'meters']" in err


def test_each_file_is_checked_before_the_run(env, capsys):
    assert "no such file" in _error(capsys, "ingest", "meters", str(env / "missing.parquet"))
    (env / "readings.csv").write_text("reading_id\nr1\n")
    err = _error(capsys, "ingest", "meters", str(env / "readings.csv"))
    assert "readings.csv" in err and "lands parquet files" in err
    (env / "garbled.parquet").write_bytes(b"not parquet at all")
    assert "garbled.parquet: not readable as Parquet" in _error(capsys, "ingest", "meters", str(env / "garbled.parquet"))
    pq.write_table(pa.table({"reading_id": ["r1"]}), env / "narrow.parquet")
    assert "narrow.parquet: missing column(s)" in _error(capsys, "ingest", "meters", str(env / "narrow.parquet"))
    assert not (env / "home" / "dagster").exists(), "no run was started"


def test_batch_id_names_one_file(env, capsys):
    readings = pa.table({"x": [1]})
    for name in ("a.parquet", "b.parquet"):
        pq.write_table(readings, env / name)
    assert "--batch-id" in _error(capsys, "ingest", "meters", str(env / "a.parquet"), str(env / "b.parquet"), "--batch-id", "b1")


def test_unknown_dataset_lists_the_known_ones(env, capsys):
    err = _error(capsys, "build", "meter_readings:v9")
    assert "unknown dataset 'meter_readings:v9'" in err and "['meter_readings:v1']" in err


def test_demo_needs_a_configured_demo_module(env, capsys):
    err = _error(capsys, "demo")
    assert "platform.yaml" in err and "demo" in err


def test_only_demo_takes_extra_arguments(env, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["build", "meter_readings:v1", "--days", "3"])
    assert exit_info.value.code == 2 and "unrecognized arguments: --days 3" in capsys.readouterr().err
