"""Issue 23 item 4: a source without ``partition_by`` gets unpartitioned raw_/canonical_ assets that materialize in process.

Their drop-folder files land whatever day their name carries, in ``reference_ingest_job`` (the daily jobs keep the
partitioned sources only); the canonical data version is the content hash of partition ``all``; a bad reference
source is still a one-line error naming the file and key.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsv_platform.bootstrap import build_platform
from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.core.identity.hashing import hash_table
from dsv_platform.defs import build_defs
from dsv_platform.defs.automation import REFERENCE_JOB, drop_request
from dsv_platform.defs.partitions import daily_partitions
from dsv_platform_tests.core.config_support import write_config
from dsv_platform_tests.defs.support import settings_at
from dsv_platform_tests.scenarios.test_reference_source import FIRST, LOOKUP, REFERENCE, REGIONS, SCHEMA


@pytest.fixture
def world(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    (tmp_path / "dagster").mkdir()
    config = write_config(tmp_path / "config", {"sources/calibration.yaml": REFERENCE.replace("FORMAT", "parquet")})
    settings = dataclasses.replace(settings_at(tmp_path / "dsv"), config_dir=config)
    with dg.DagsterInstance.ephemeral() as instance:
        yield settings, build_defs(settings), instance


def test_reference_assets_are_unpartitioned_and_materialize(world):
    settings, defs, instance = world
    graph = defs.resolve_asset_graph()
    assert graph.get(dg.AssetKey.from_user_string("raw/calibration")).partitions_def is None
    assert graph.get(dg.AssetKey.from_user_string("canonical/calibration")).partitions_def is None
    assert isinstance(graph.get(dg.AssetKey.from_user_string("canonical/meters")).partitions_def, dg.DailyPartitionsDefinition)
    assert REFERENCE_JOB in {j.name for j in defs.jobs}
    dg.Definitions.validate_loadable(defs)
    settings.drop_folder.mkdir(parents=True)
    path = settings.drop_folder / "calibration__2026-01-05__cal1.parquet"  # any day: a reference table has one partition
    pq.write_table(pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in FIRST], schema=SCHEMA), path)
    os.utime(path, (dt.datetime(2026, 1, 5, tzinfo=dt.UTC).timestamp(),) * 2)
    result = dg.materialize([*defs.assets], selection=["raw/calibration", "canonical/calibration"], instance=instance, resources=defs.resources)
    assert result.success
    [raw] = result.asset_materializations_for_node("raw__calibration")
    [canonical] = result.asset_materializations_for_node("canonical__calibration")
    assert raw.partition is None and canonical.partition is None and canonical.metadata["rows"].value == 3
    assert all(c.passed for c in result.get_asset_check_evaluations())
    days = [r.data["day"] for r in canonical.metadata["days"].value.records]
    assert days == ["all"] and "0001-01-01" not in str(raw.metadata["object_digests"].value.records), "the one partition shows as all"
    with build_platform(settings) as p:
        spec = p.config.sources["calibration"]
        expected = hash_table(p.tables.read(spec), spec.contract)  # one partition, keyed "all"
    assert [part.key for part in expected.partitions] == ["all"]
    assert canonical.metadata["content_hash"].value == expected.content_hash
    again = dg.materialize([*defs.assets], selection=["raw/calibration", "canonical/calibration"], instance=instance, resources=defs.resources)
    [twice] = again.asset_materializations_for_node("canonical__calibration")
    assert twice.tags["dagster/data_version"] == canonical.tags["dagster/data_version"], "the same files again change nothing"


def test_a_reference_drop_file_runs_the_reference_job(world, tmp_path):
    settings, _, _ = world
    sources = load_config(settings.config_dir).sources
    path = tmp_path / "calibration__1999-01-01__c.parquet"  # before the first daily partition: still a reference batch
    path.write_bytes(b"")
    request = drop_request(path, "d" * 64, sources, daily_partitions(dt.date(2025, 1, 1)))
    assert request is not None and request.job_name == REFERENCE_JOB and request.partition_key is None
    daily = drop_request(tmp_path / "meters__2026-01-02__m.parquet", "e" * 64, sources, daily_partitions(dt.date(2025, 1, 1)))
    assert daily is not None and daily.job_name == "daily_ingest_job" and daily.partition_key == "2026-01-02"


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (lambda t: t.replace("valid_time: calibrated_at\n", "") + "partition_by: calibrated_at\n", "valid_time"),
        (lambda t: t.replace("valid_time: calibrated_at", "valid_time: factor"), "valid_time"),
        (lambda t: t + "partition_by: valid_from\n", "partition_by"),
        (lambda t: t.replace("landing: {format: parquet}\n", ""), "landing"),
    ],
)
def test_a_bad_reference_source_names_the_file_and_key(tmp_path, change, key):
    config = write_config(tmp_path / "config", {"sources/calibration.yaml": change(REFERENCE.replace("FORMAT", "parquet"))})
    with pytest.raises(ConfigError) as err:
        load_config(config)
    text = str(err.value)
    assert "calibration.yaml" in text and key in text and "\n" not in text, text
    if "partition_by: calibrated_at" in change(REFERENCE):
        assert "partitioned source" in text and "reference table" in text, "the error says only a reference table may omit valid_time"


@pytest.mark.parametrize(
    ("join", "key", "words"),
    [
        ("{source: regions, on: [meter_id], time: read_at, max_age: 1d}", "as_of_joins[1].max_age", "has none"),
        ("{source: calibration, on: [meter_id]}", "as_of_joins[1].time", "has valid time 'calibrated_at'"),
    ],
)
def test_a_join_that_cannot_work_on_a_reference_table_names_the_file_and_key(tmp_path, join, key, words):


    dataset = LOOKUP.replace("  - {source: regions, on: [meter_id]}\n", f"  - {join}\n")
    files = {"sources/calibration.yaml": REFERENCE.replace("FORMAT", "parquet"), "sources/regions.yaml": REGIONS, "datasets/meter_readings_v1.yaml": dataset}
    with pytest.raises(ConfigError) as err:
        load_config(write_config(tmp_path / "config", files))
    text = str(err.value)
    assert "meter_readings_v1.yaml" in text and f"key {key!r}" in text and words in text and "\n" not in text, text
