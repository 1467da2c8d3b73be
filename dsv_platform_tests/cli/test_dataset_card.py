"""A dataset card for every realization (issue 27, item 12): `dsv card REF` and the snapshot asset's materialization.

One home (the meters configuration of config_support through `dsv ingest` and `dsv build`): the definition declares a
purpose, a retention, a label column (for the balance) and a restricted column. The card's sections carry the real
values (rows and split sizes equal the manifest's, every gate of the stored quality report with its observed value,
the pinned snapshots, the consumers and approvals recorded after the build); the card stored at publication is the
object the signed statement names; the Dagster materialization of the snapshot carries the card as Markdown.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import io
import json
from decimal import Decimal
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsv_platform.bootstrap import build_platform
from dsv_platform.cli.main import main
from dsv_platform.core.publication.card import SECTIONS
from dsv_platform.core.trust import dsse
from dsv_platform_tests.core.config_support import CALIBRATION, DATASET, METERS, write_config
from dsv_platform_tests.defs.support import settings_at
from dsv_platform_tests.fixtures.cli_runner import CLI_ENV, DsvCli

UTC = dt.UTC
TS = pa.timestamp("us", tz="UTC")
READING = pa.schema(
    [("reading_id", pa.string()), ("meter_id", pa.string()), ("read_at", TS), ("read_day", pa.date32()), ("kwh", pa.decimal128(12, 3)), ("site", pa.string())]
)
CALIBRATION_SCHEMA = pa.schema([("meter_id", pa.string()), ("calibrated_at", TS), ("calibrated_day", pa.date32()), ("factor", pa.float64())])
PURPOSE = "Train the meter anomaly model on calibrated readings."
EXTRA = f"purpose: {PURPOSE}\nretention_until: 2099-12-31\nintegrity: {{label_column: meter_id}}\naccess: {{restricted_columns: [kwh]}}\n"
CARDED = DATASET.replace("seed: 1\n", "seed: 1\n" + EXTRA, 1)
METERS_IN = {"m-A": 3, "m-B": 2, "m-C": 1}  # readings per meter: the label balance of meter_id


def _readings() -> pa.Table:
    rows = []
    for meter, n in METERS_IN.items():
        for day in range(1, n + 1):
            at = dt.datetime(2026, 1, day, 6, tzinfo=UTC)
            rows.append({"reading_id": f"{meter}/{day}", "meter_id": meter, "read_at": at, "read_day": at.date(), "kwh": Decimal("1.500"), "site": None})
    return pa.Table.from_pylist(rows, schema=READING)


def _run(*args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    assert code == 0, (args, err.getvalue()[-3000:])
    return out.getvalue()


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("card")
    files = {
        "sources/meters.yaml": METERS.replace("owner: grid\n", "owner: grid\nversion: 2\n"),
        "sources/calibration.yaml": CALIBRATION.replace("{format: jsonl}", "{format: parquet}"),
        "datasets/meter_readings_v1.yaml": CARDED,
    }
    env = {"DSV_HOME": str(root / "home"), "DSV_CONFIG_DIR": str(write_config(root / "config", files))}
    pq.write_table(_readings(), root / "meters.parquet")
    at = dt.datetime(2025, 12, 30, tzinfo=UTC)
    calibration = [{"meter_id": "m-A", "calibrated_at": at, "calibrated_day": at.date(), "factor": 1.5}]
    pq.write_table(pa.Table.from_pylist(calibration, schema=CALIBRATION_SCHEMA), root / "cal.parquet")
    with pytest.MonkeyPatch.context() as mp:
        for key in (*CLI_ENV, "DAGSTER_HOME"):
            mp.delenv(key, raising=False)
        for key, value in env.items():
            mp.setenv(key, value)
        _run("ingest", "meters", str(root / "meters.parquet"))
        _run("ingest", "calibration", str(root / "cal.parquet"))
        built = json.loads(_run("build", "meter_readings:v1", "--json"))
        _run("consumers", "add", "meter_readings:v1", "--name", "anomaly_model", "--columns", "reading_id,meter_id")
    return {**env, "manifest_hash": built["manifest_hash"]}


@pytest.fixture
def dsv(capsys, monkeypatch, home) -> DsvCli:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    return DsvCli(capsys, monkeypatch, {k: home[k] for k in ("DSV_HOME", "DSV_CONFIG_DIR")})


def test_dsv_card_json_has_every_section_with_the_real_values(dsv, home):
    resolved = json.loads(dsv("resolve", "meter_readings:v1", "--json").out)
    result = dsv("card", "meter_readings:v1", "--json")
    assert result.code == 0, result.err
    card = json.loads(result.out)
    assert set(SECTIONS) <= set(card) and card["format"] == "dsv-card/1" and card["manifest_hash"] == home["manifest_hash"]
    assert card["purpose"] == {"purpose": PURPOSE, "description": "Readings with the calibration in force when read.", "owner": "grid"}
    comp = card["composition"]
    assert comp["rows"] == resolved["rows"] == sum(METERS_IN.values()) and comp["partitions"] == resolved["partitions"]
    assert comp["split_sizes"] == resolved["splits"]["counts"] and sum(comp["split_sizes"].values()) == comp["rows"]
    assert comp["label_balance"] == {"meter_id": METERS_IN}
    coll = card["collection"]
    assert {(s["table"], s["snapshot_id"]) for s in coll["sources"]} == {(s["table"], s["snapshot_id"]) for s in resolved["sources"]}
    assert next(s for s in coll["sources"] if s["table"] == "meters")["version"] == "v2" and coll["feature_versions"] == {"meters": "v2"}
    assert coll["watermark"] == resolved["watermark"] and coll["lateness"] == [{"source": "calibration", "lag": "0d"}]
    assert card["preprocessing"]["recipe_hash"] == resolved["recipe_hash"] and card["preprocessing"]["base"] == "meters"
    report = json.loads(_object(home, resolved["quality_report"]))
    assert card["quality"]["report"] == resolved["quality_report"] and card["quality"]["passed"] is report["passed"]
    assert [g["name"] for g in card["quality"]["gates"]] == [g["name"] for g in report["gates"]] and card["quality"]["gates"]
    rows_gate = next(g for g in card["quality"]["gates"] if g["name"] == "rows_at_least")
    assert str(comp["rows"]) in rows_gate["observed"], rows_gate
    assert card["privacy"] == {"redaction_generation": resolved["redaction_generation"], "restricted_columns": ["kwh"], "excluded_batches": None}
    assert card["uses"] == {"consumers": ["anomaly_model"], "models": [], "artifacts": []}
    maint = card["maintenance"]
    assert maint["state"] == "PUBLISHED" and maint["retention_until"] == "2100-01-01T00:00:00+00:00" and "meter_readings:v1@candidate" in maint["aliases"]


def _object(home: dict[str, str], digest: str) -> bytes:
    settings = dataclasses.replace(settings_at(Path(home["DSV_HOME"])), config_dir=Path(home["DSV_CONFIG_DIR"]))
    with build_platform(settings) as platform:
        return platform.store.get(digest)


def test_dsv_card_prints_the_sections_as_markdown(dsv, home):
    text = dsv("card", "meter_readings:v1").out
    for heading in ("## Purpose and owner", "## Composition", "## Collection", "## Preprocessing", "## Quality", "## Privacy", "## Uses", "## Maintenance"):
        assert heading in text, heading
    assert f"- purpose: {PURPOSE}" in text and f"- rows: {sum(METERS_IN.values())}" in text and "- label balance of meter_id: m-A 3, m-B 2, m-C 1" in text
    assert "| rows_at_least | passed | yes |" in text and "- restricted columns: kwh" in text and "- consumers: anomaly_model" in text


def test_the_card_stored_at_publication_is_named_in_the_signed_statement(dsv, home):
    card = json.loads(dsv("card", "meter_readings:v1", "--json").out)
    stored = json.loads(_object(home, card["stored_card"]))
    assert stored["manifest_hash"] == home["manifest_hash"] and stored["composition"] == card["composition"]
    assert stored["uses"] == {"consumers": [], "models": [], "artifacts": []} and stored["maintenance"]["state"] is None  # as of publication
    verified = json.loads(dsv("verify", "meter_readings:v1", "--json").out)
    envelope = dsse.parse_envelope(_object(home, verified["signature"]["envelope_object"]))
    assert dsse.parse_statement(envelope).predicate["dataset_card"] == card["stored_card"]


def test_the_snapshot_materialization_carries_the_card(home):
    with dg.DagsterInstance.from_config(str(Path(home["DSV_HOME"]) / "dagster")) as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey.from_user_string("datasets/meter_readings/v1"))
    assert event is not None and event.asset_materialization is not None
    metadata = event.asset_materialization.metadata
    card = metadata["dataset_card"]
    assert isinstance(card, dg.MarkdownMetadataValue)
    text = card.md_str or ""
    assert text.startswith(f"# Dataset card: meter_readings:v1@sha256:{home['manifest_hash']}") and "## Maintenance" in text
    assert f"- rows: {metadata['rows'].value}" in text and "- label balance of meter_id: m-A 3, m-B 2, m-C 1" in text
    assert metadata["dataset_card_object"].value == json.loads(_cli_card(home))["stored_card"]


def _cli_card(home: dict[str, str]) -> str:
    with pytest.MonkeyPatch.context() as mp:
        for key in (*CLI_ENV, "DAGSTER_HOME"):
            mp.delenv(key, raising=False)
        for key in ("DSV_HOME", "DSV_CONFIG_DIR"):
            mp.setenv(key, home[key])
        return _run("card", "meter_readings:v1", "--json")
