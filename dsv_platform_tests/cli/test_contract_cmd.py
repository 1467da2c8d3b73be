"""`dsv contract check` through the installed entry point, on a sensor-readings table (not the fraud example)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsv_platform.cli.main import main

DSV = str(Path(sys.executable).with_name("dsv"))
CONTRACT = """\
name: readings
key: [reading_id]
partition_by: day
expectations:
  unique: true
  population:
    - {column: sensor_id, not_in: [SIM-0, SIM-1]}
  max_volume_change: {max: 0.5, severity: block}
columns:
  - {name: reading_id, type: int64}
  - {name: sensor_id, type: string}
  - {name: day, type: date}
  - name: temp_c
    type: float64
    scale: 2
    unit: degC
    range: {min: -60, max: 80}
    typical: {p50: [5, 35], p99: [10, 60]}
    drift: {p50_max_change: 0.2, p99_max_change: 0.5}
  - {name: humidity, type: float64, scale: 1, nullable: true, max_null_rate: 0.05}
  - {name: status, type: string, allowed_values_ref: statuses.csv, unknown_values: [unknown], max_unknown_rate: 0.02, drift: {psi_max: 0.1}}
"""


def dsv(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DSV, *args], capture_output=True, text=True)


@pytest.fixture
def inproc(capsys):
    """``dsv`` run in this process (the same ``main`` the entry point calls; it starts in seconds on a loaded machine)."""

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        code = main(list(args))
        out = capsys.readouterr()
        return subprocess.CompletedProcess(list(args), code, out.out, out.err)

    return run


def readings(n: int, *, seed: int, kelvin: bool = False, sim: int = 0, days: int = 4, status_p: tuple[float, float, float] = (0.9, 0.09, 0.01)) -> pa.Table:
    rng = np.random.default_rng(seed)
    temp = rng.normal(21, 6, n).round(2) + (273.15 if kelvin else 0)
    humidity = rng.uniform(20, 90, n).round(1)
    sensors = [f"S-{i:03d}" for i in rng.integers(0, 50, n)]
    sensors[:sim] = ["SIM-1"] * sim
    return pa.table(
        {
            "reading_id": pa.array(np.arange(n), pa.int64()),
            "sensor_id": pa.array(sensors),
            "day": pa.array([dt.date(2026, 3, 1) + dt.timedelta(days=int(i) % days) for i in range(n)], pa.date32()),
            "temp_c": pa.array(temp),
            "humidity": pa.array(np.where(rng.random(n) < 0.01, np.nan, humidity)).cast(pa.float64()),
            "status": pa.array(rng.choice(["ok", "degraded", "unknown"], n, p=list(status_p))),
        }
    )


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "contract.yaml").write_text(CONTRACT)
    (tmp_path / "statuses.csv").write_text("status\nok\ndegraded\nunknown\n")
    return tmp_path


def write(folder: Path, name: str, table: pa.Table, parts: int = 1) -> Path:
    out = folder / name
    out.mkdir()
    for i, chunk in enumerate(np.array_split(np.arange(table.num_rows), parts)):
        pq.write_table(table.take(pa.array(chunk)), out / f"part-{i}.parquet")
    return out


def check(folder: Path, data: Path, *extra: str, run=dsv) -> subprocess.CompletedProcess[str]:
    return run("contract", "check", str(data), "--contract", str(folder / "contract.yaml"), *extra)


def test_good_data_passes_every_rule(inproc, folder):
    data = write(folder, "good", readings(4000, seed=1), parts=3)
    run = check(folder, data, "--json", "--baseline", str(write(folder, "base", readings(4000, seed=2))), run=inproc)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["passed"] is True and all(r["passed"] for r in doc["rules"])
    names = {(r["rule"], r["column"]) for r in doc["rules"]}
    assert {("typical_p50", "temp_c"), ("allowed_values", "status"), ("max_null_rate", "humidity"), ("population", "sensor_id")} <= names
    assert {("unique", "reading_id"), ("drift_psi", "status"), ("max_volume_change", None)} <= names
    assert set(doc["rules"][0]) == {"rule", "family", "column", "severity", "passed", "observed", "bound"}


def test_kelvin_and_simulated_sensors_fail_with_one_line_per_rule(folder):
    data = write(folder, "bad", readings(2000, seed=3, kelvin=True, sim=7))
    run = check(folder, data)
    assert run.returncode == 9, run.stdout + run.stderr
    failed = [line for line in run.stdout.splitlines() if line.startswith("FAILED")]
    assert any("'temp_c'" in line and "typical_p50" in line and "bound [5, 35]" in line for line in failed), run.stdout
    assert any("'temp_c'" in line and "rule range" in line for line in failed), run.stdout
    assert any("'sensor_id'" in line and "population" in line and "7 rows, e.g. 'SIM-1'" in line for line in failed), run.stdout
    assert "Traceback" not in run.stderr


def test_json_is_one_object_and_drift_is_a_warning_unless_declared_blocking(inproc, folder):
    base = write(folder, "base", readings(3000, seed=4))
    shifted = write(folder, "shifted", readings(3000, seed=5, status_p=(0.5, 0.49, 0.01)))
    run = check(folder, shifted, "--json", "--baseline", str(base), run=inproc)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)  # exactly one object: json.loads refuses trailing text
    psi = next(r for r in doc["rules"] if r["rule"] == "drift_psi")
    assert psi["severity"] == "warn" and psi["passed"] is False and psi["observed"] > 0.1 and doc["passed"] is True
    contract = folder / "contract.yaml"
    contract.write_text(CONTRACT.replace("drift: {psi_max: 0.1}", "drift: {psi_max: 0.1, severity: block}"))
    blocked = check(folder, shifted, "--json", "--baseline", str(base), run=inproc)
    assert blocked.returncode == 9 and json.loads(blocked.stdout)["passed"] is False


def test_volume_change_against_the_baseline(inproc, folder):
    base = write(folder, "base", readings(4000, seed=6))
    small = write(folder, "small", readings(1000, seed=7))
    run = check(folder, small, "--json", "--baseline", str(base), run=inproc)
    volume = next(r for r in json.loads(run.stdout)["rules"] if r["rule"] == "max_volume_change")
    assert run.returncode == 9 and volume["observed"] == 0.75 and volume["bound"].startswith("<= 0.5")
    no_baseline = json.loads(check(folder, small, "--json", run=inproc).stdout)
    assert next(r for r in no_baseline["rules"] if r["rule"] == "max_volume_change")["observed"] == "no baseline"


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (("max_null_rate: 0.05", "max_null_rate: lots"), "'max_null_rate' must be a number"),
        (("statuses.csv", "missing.csv"), "cannot read reference set"),
        (("severity: block}", "severity: fatal}"), "severity must be 'block' or 'warn'"),
        (("not_in: [SIM-0, SIM-1]", "not_in: [SIM-0], in: [x]"), "needs exactly one of"),
    ],
)
def test_a_bad_contract_is_one_line_naming_the_file(inproc, folder, edit, needle):
    data = write(folder, "good", readings(200, seed=8))
    (folder / "contract.yaml").write_text(CONTRACT.replace(*edit))
    run = check(folder, data, run=inproc)
    assert run.returncode == 2 and needle in run.stderr and "contract.yaml" in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_unreadable_data_is_a_typed_error(inproc, folder):
    run = check(folder, folder / "nowhere", run=inproc)
    assert run.returncode == 2 and "no such file or folder" in run.stderr
    bad = folder / "bad.parquet"
    pq.write_table(readings(10, seed=9).drop_columns(["humidity"]), bad)
    run = check(folder, bad, run=inproc)
    assert run.returncode == 2 and "missing column(s) ['humidity']" in run.stderr
