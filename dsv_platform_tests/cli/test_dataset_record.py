"""The full dataset record (issue 27, item 5): purpose, retention_until, feature versions and the code's repo.

One home (the meters configuration of config_support, batches through `dsv ingest`): `meter_readings:v1` declares a
purpose and a retention, its `meters` source a contract version; `plain_readings:v1` declares neither. `dsv resolve
--json` shows the record with every earlier key kept; `dsv gc why` shows the retention root keeping a superseded
realization until retention_until, and nothing after it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import subprocess
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsv_platform.cli.main import main
from dsv_platform.core.config.dataset_definition import load_definition
from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.core.errors import FailureKind
from dsv_platform.services.publication.realization_inputs import code_pin, repository_url
from dsv_platform_tests.core.config_support import CALIBRATION, DATASET, METERS, write_config
from dsv_platform_tests.fixtures.cli_runner import CLI_ENV, DsvCli

UTC = dt.UTC
TS = pa.timestamp("us", tz="UTC")
READING = pa.schema(
    [("reading_id", pa.string()), ("meter_id", pa.string()), ("read_at", TS), ("read_day", pa.date32()), ("kwh", pa.decimal128(12, 3)), ("site", pa.string())]
)
CALIBRATION_SCHEMA = pa.schema([("meter_id", pa.string()), ("calibrated_at", TS), ("calibrated_day", pa.date32()), ("factor", pa.float64())])
PURPOSE = "Train the meter anomaly model on calibrated readings."
DECLARED = DATASET.replace("owner: grid\n", f"owner: grid\npurpose: {PURPOSE}\nretention_until: 2099-12-31\n", 1)
PLAIN = DATASET.replace("name: meter_readings", "name: plain_readings")
OLD_KEYS = {"ref", "dataset", "version", "human_version", "state", "manifest_hash", "content_hash", "schema_hash", "created_at",
            "created_by", "published_at", "redaction_generation", "rows", "partitions", "access"}  # fmt: skip
REPO = Path(__file__).resolve().parents[2]


def _readings(day: dt.date) -> pa.Table:
    rows = []
    for meter in ("m-A", "m-B", "m-C"):
        at = dt.datetime(day.year, day.month, day.day, 6, tzinfo=UTC)
        rows.append({"reading_id": f"{meter}/{at:%Y%m%d}", "meter_id": meter, "read_at": at, "read_day": day, "kwh": Decimal("1.500"), "site": None})
    return pa.Table.from_pylist(rows, schema=READING)


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("record")
    files = {
        "sources/meters.yaml": METERS.replace("owner: grid\n", "owner: grid\nversion: 3\n"),
        "sources/calibration.yaml": CALIBRATION.replace("{format: jsonl}", "{format: parquet}"),
        "datasets/meter_readings_v1.yaml": DECLARED,
        "datasets/plain_readings_v1.yaml": PLAIN,
    }
    env = {"DSV_HOME": str(root / "home"), "DSV_CONFIG_DIR": str(write_config(root / "config", files))}
    pq.write_table(_readings(dt.date(2026, 1, 1)), root / "day1.parquet")
    pq.write_table(_readings(dt.date(2026, 1, 2)), root / "day2.parquet")
    at = dt.datetime(2025, 12, 30, tzinfo=UTC)
    calibration = [{"meter_id": "m-A", "calibrated_at": at, "calibrated_day": at.date(), "factor": 1.5}]
    pq.write_table(pa.Table.from_pylist(calibration, schema=CALIBRATION_SCHEMA), root / "cal.parquet")
    env["ROOT"] = str(root)
    return env


def _run(*args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    assert code == 0, (args, err.getvalue()[-3000:])
    return out.getvalue()


@pytest.fixture(scope="module")
def built(home) -> dict[str, str]:
    """Two realizations of meter_readings:v1 (the first superseded by a later batch) and one of plain_readings:v1."""
    root = Path(home["ROOT"])
    with pytest.MonkeyPatch.context() as mp:
        for key in (*CLI_ENV, "DAGSTER_HOME"):
            mp.delenv(key, raising=False)
        for key in ("DSV_HOME", "DSV_CONFIG_DIR"):
            mp.setenv(key, home[key])
        _run("ingest", "meters", str(root / "day1.parquet"))
        _run("ingest", "calibration", str(root / "cal.parquet"))
        first = json.loads(_run("build", "meter_readings:v1", "--json"))["manifest_hash"]
        _run("ingest", "meters", str(root / "day2.parquet"))
        second = json.loads(_run("build", "meter_readings:v1", "--json"))["manifest_hash"]
        plain = json.loads(_run("build", "plain_readings:v1", "--json"))["manifest_hash"]
    assert first != second
    return {"first": first, "second": second, "plain": plain}


@pytest.fixture
def dsv(capsys, monkeypatch, home, built) -> DsvCli:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    return DsvCli(capsys, monkeypatch, {k: v for k, v in home.items() if k != "ROOT"})


def test_resolve_json_shows_the_whole_record_and_keeps_every_earlier_key(dsv, built):
    result = dsv("resolve", "meter_readings:v1", "--json")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert set(doc) >= OLD_KEYS and doc["manifest_hash"] == built["second"]
    assert doc["purpose"] == PURPOSE and doc["owner"] == "grid"
    assert doc["retention_until"] == "2100-01-01T00:00:00+00:00"  # a date: through the end of that UTC day
    assert doc["feature_versions"] == {"meters": "v3"}  # calibration declares no contract version: not listed
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    origin = subprocess.run(["git", "-C", str(REPO), "config", "--get", "remote.origin.url"], capture_output=True, text=True).stdout.strip()
    assert (doc["code"].get("repo"), doc["code"]["commit"]) == (repository_url(origin), head)
    assert {s["table"] for s in doc["sources"]} == {"meters", "calibration"} and doc["watermark"]
    assert doc["splits"]["counts"] and sum(doc["splits"]["counts"].values()) == doc["rows"] == 6
    assert len(doc["quality_report"]) == 64 and doc["recipe_hash"]
    text = dsv("resolve", "meter_readings:v1").out
    assert f"purpose {PURPOSE}" in text and "retained until 2100-01-01" in text and "features meters:v3" in text
    assert f"in {repository_url(origin) or '-'}" in text


def test_a_definition_declaring_neither_key_records_neither(dsv, built):
    doc = json.loads(dsv("resolve", "plain_readings:v1", "--json").out)
    assert doc["purpose"] is None and doc["retention_until"] is None and doc["feature_versions"] == {"meters": "v3"}


def test_retention_until_keeps_a_superseded_realization_until_then(dsv, built):
    node = f"realization:{built['first']}"
    kept = json.loads(dsv("gc", "why", built["first"], "--json", "--safety-window-hours", "0").out)
    realization = next(e for e in kept if e["node"] == node)
    assert realization["keep"] and realization["root"]["kind"] == "definition_retention", realization
    assert (realization["root"]["ref"], realization["root"]["expires_at"]) == ("meter_readings:v1~all", "2100-01-01T00:00:00+00:00")
    later = json.loads(dsv("gc", "why", built["first"], "--json", "--safety-window-hours", "0", "--now", "2100-01-02T00:00:00+00:00").out)
    after = next(e for e in later if e["node"] == node)
    assert not after["keep"] and after["action"] == "expire_realization", after  # the root expired: nothing else keeps it
    by_ref = json.loads(dsv("gc", "why", f"meter_readings:v1@sha256:{built['first']}", "--json", "--safety-window-hours", "0").out)
    assert by_ref == kept, "a dataset reference explains the realization it names"
    newest = json.loads(dsv("gc", "why", "meter_readings:v1", "--json", "--safety-window-hours", "0").out)
    assert f"realization:{built['second']}" in {e["node"] for e in newest}  # NAME:VERSION: its newest readable publication
    missing = dsv("gc", "why", "meter_readings:v9")
    assert missing.code == FailureKind.NOT_FOUND.exit_code and "meter_readings:v9" in missing.err, missing.err
    mistyped = dsv("gc", "why", "model_run:v1")  # no dataset of that name: the kind:id it looks like is not in the inventory
    assert mistyped.code == 2 and "'model_run:v1' is nothing the platform owns" in mistyped.err, mistyped.err


def test_purpose_is_in_the_recipe_only_when_declared_and_retention_never(tmp_path):
    def load(extra: str):
        path = tmp_path / "datasets" / "meter_readings_v1.yaml"
        path.parent.mkdir(exist_ok=True)
        path.write_text(DATASET.replace("seed: 1\n", f"seed: 1\n{extra}"), encoding="utf-8")
        return load_definition(path)

    plain, retained, purposed = load(""), load("retention_until: 2030-01-01T00:00:00Z\n"), load(f"purpose: {PURPOSE}\n")
    assert retained.recipe_hash == plain.recipe_hash and retained.retention_until == dt.datetime(2030, 1, 1, tzinfo=UTC)
    assert purposed.recipe_hash != plain.recipe_hash and purposed.purpose == PURPOSE and plain.purpose is None
    assert plain.recipe() == load("").recipe() and "purpose" not in plain.recipe() and "retention_until" not in retained.recipe()
    for bad in ("retention_until: 2030-01-01T00:00:00", "purpose: ''", "retention_until: soon"):
        with pytest.raises(ConfigError, match=f"meter_readings_v1.yaml: key '{bad.split(':')[0]}'"):
            load(bad + "\n")


def test_the_code_repo_is_the_origin_url_without_credentials_never_a_local_folder(tmp_path):
    """The same repository from every clone: a remote URL (credentials dropped), nothing for a folder or no origin."""
    repo = tmp_path / "code"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("a")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "a"], check=True)
    assert code_pin.__wrapped__(repo).repo is None  # no origin
    subprocess.run([*git, "remote", "add", "origin", str(tmp_path / "elsewhere")], check=True)
    assert code_pin.__wrapped__(repo).repo is None  # a folder: one machine's path
    subprocess.run([*git, "remote", "set-url", "origin", "https://ci:s3cret@git.example.com/team/features.git"], check=True)
    pin = code_pin.__wrapped__(repo)
    assert pin.repo == "https://git.example.com/team/features.git" and "s3cret" not in pin.to_document()["repo"]
    assert repository_url("git@git.example.com:team/features.git") == "git@git.example.com:team/features.git"
    assert repository_url("file:///srv/features.git") is None


def test_versions_takes_a_name_or_one_version_and_names_the_datasets_for_an_unknown_one(dsv, built):
    """`dsv versions NAME:VERSION`, the form every other output prints, lists that version's realizations, not none."""
    every = json.loads(dsv("versions", "meter_readings", "--json").out)
    assert {r["manifest_hash"] for r in every} == {built["first"], built["second"]}
    one = dsv("versions", "meter_readings:v1", "--json")
    assert one.code == 0 and json.loads(one.out) == every, one.err
    assert json.loads(dsv("versions", "meter_readings:v2", "--json").out) == []
    assert dsv("versions", "meter_readings:v2").out == "no realizations of meter_readings:v2\n"
    unknown = dsv("versions", "meter_reading")
    assert unknown.code == 0 and unknown.out == "no realizations of meter_reading (datasets of the configuration: meter_readings, plain_readings)\n"
    assert [line.split()[0] for line in dsv("versions", "plain_readings:v1").out.splitlines()] == ["v1"]
