"""Semantic rules of a source contract as asset checks on its canonical asset (issue 13): one per family, per loaded partition.

A configuration-only source (meters) declares range, null-rate, typical, drift, population and unique rules. A good
partition passes every check; a partition with leaked test meters fails the blocking population check, which names the
rule, column, observed value and bound, stops the downstream asset of the same run, and leaves main unchanged: the
append stays on the load's staging branch, which the check names (write-audit-publish, issue 26 item 14).
Real Dagster instance, real embedded stores (pyiceberg catalog, landing zone).
"""

import dataclasses
import datetime as dt
import io
from decimal import Decimal

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsv_platform.bootstrap import build_tables
from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.ingest.batch import RawBatch
from dsv_platform.defs import build_defs
from dsv_platform_tests.core.config_support import METERS, write_config
from dsv_platform_tests.defs.support import drop, settings_at

UTC = dt.UTC
READING = pa.schema(
    [
        ("reading_id", pa.string()),
        ("meter_id", pa.string()),
        ("read_at", pa.timestamp("us", tz="UTC")),
        ("read_day", pa.date32()),
        ("kwh", pa.decimal128(12, 3)),
        ("site", pa.string()),
    ]
)
SEMANTIC_METERS = METERS.replace(
    "  - {name: meter_id, type: string}\n",
    "  - {name: meter_id, type: string, unknown_values: [test-X], max_unknown_rate: 0.1, severity: {max_unknown_rate: warn}}\n",
).replace(
    "  - {name: kwh, type: decimal, precision: 12, scale: 3}\n",
    "  - {name: kwh, type: decimal, precision: 12, scale: 3, range: {min: 0, max: 1000},\n"
    "     typical: {p50: [0.5, 50], severity: warn}, drift: {p50_max_change: 0.1}}\n",
).replace("  - {name: site, type: string, nullable: true}\n", "  - {name: site, type: string, nullable: true, max_null_rate: 0.9}\n") + (
    "expectations:\n  unique: true\n  population:\n    - {column: meter_id, not_matching: '^test-'}\n  max_volume_change: 0.1\n"
)
GOOD, BAD = dt.date(2026, 1, 1), dt.date(2026, 1, 2)
CANONICAL = "canonical/meters"


def _batch(day: dt.date, meters: tuple[str, ...]) -> RawBatch:
    rows = []
    for meter in meters:
        for hour in (0, 6, 12, 18):
            at = dt.datetime(day.year, day.month, day.day, hour, tzinfo=UTC)
            rows.append({"reading_id": f"{meter}/{at:%Y%m%dT%H}", "meter_id": meter, "read_at": at, "read_day": day, "kwh": Decimal(f"{hour + 1.5:.3f}")})
            rows[-1]["site"] = None if hour else "roof"
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=READING), sink)
    recorded = dt.datetime(day.year, day.month, day.day, 23, tzinfo=UTC)
    return RawBatch("meters", day, f"b{day:%d}", recorded, sink.getvalue(), "parquet")


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    root = tmp_path_factory.mktemp("canonical-semantic")
    settings = dataclasses.replace(settings_at(root / "dsv"), config_dir=write_config(root / "config", {"sources/meters.yaml": SEMANTIC_METERS}))
    defs = build_defs(settings)
    canonical = next(a for a in defs.assets if isinstance(a, dg.AssetsDefinition) and dg.AssetKey.from_user_string(CANONICAL) in a.keys)

    @dg.asset(name="meters_downstream", deps=[canonical.key], partitions_def=canonical.partitions_def, backfill_policy=dg.BackfillPolicy.single_run())
    def downstream() -> None:
        """A consumer of the canonical table, in the same run: a failed blocking check must stop it."""

    drop(settings.drop_folder, [_batch(GOOD, ("m-A", "m-B")), _batch(BAD, ("m-A", "test-X"))])
    with dg.DagsterInstance.ephemeral() as instance:

        def run(day: dt.date) -> dg.ExecuteInProcessResult:
            assets = [*defs.assets, downstream]
            selection = f'key:"raw/meters" or key:"{CANONICAL}" or key:meters_downstream'
            return dg.materialize(assets, selection=selection, partition_key=day.isoformat(), instance=instance, resources=defs.resources, raise_on_error=False)

        yield defs, canonical, run, settings


def _checks(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations() if e.asset_key.to_user_string() == CANONICAL}


def test_one_check_per_family_without_drift_and_volume_and_none_for_a_source_without_semantic_keys(pipeline):
    defs, canonical, _, _ = pipeline
    specs = {s.name: s.blocking for s in canonical.check_specs}
    expected = {"semantic_values": True, "semantic_completeness": True, "semantic_plausibility": False, "semantic_uniqueness": True}
    assert specs == {"rows_satisfy_contract": False, "semantic_population": True, **expected}
    calibration = next(a for a in defs.assets if isinstance(a, dg.AssetsDefinition) and dg.AssetKey.from_user_string("canonical/calibration") in a.keys)
    assert [s.name for s in calibration.check_specs] == ["rows_satisfy_contract"]


def test_a_good_partition_passes_every_check_and_reaches_downstream(pipeline):
    _, canonical, run, _ = pipeline
    result = run(GOOD)
    assert result.success
    checks = _checks(result)
    assert set(checks) == {s.name for s in canonical.check_specs} and all(c.passed for c in checks.values())
    unknown_rate, null_rate = checks["semantic_completeness"].metadata["results"].value
    assert unknown_rate["rule"] == "max_unknown_rate" and unknown_rate["observed"] == "0.0" and unknown_rate["severity"] == "warn"
    assert null_rate == {
        "day": "2026-01-01",
        "family": "completeness",
        "rule": "max_null_rate",
        "column": "site",
        "severity": "block",
        "observed": "0.75",
        "bound": "<= 0.9",
        "passed": True,
    }
    assert [m.asset_key.to_user_string() for m in result.get_asset_materialization_events()][-1] == "meters_downstream"


def test_a_leak_fails_the_population_check_naming_the_rule_stops_downstream_and_leaves_main_unchanged(pipeline):
    _, _, run, settings = pipeline
    result = run(BAD)
    assert not result.success
    checks = _checks(result)
    population = checks["semantic_population"]
    assert not population.passed and population.severity is dg.AssetCheckSeverity.ERROR
    [rule] = population.metadata["results"].value
    assert (rule["rule"], rule["column"], rule["passed"]) == ("population", "meter_id", False)
    assert rule["observed"] == "4 rows, e.g. 'test-X'" and rule["bound"] == "no value matching /^test-/"
    assert "2026-01-02: column 'meter_id': rule population (block): observed 4 rows, e.g. 'test-X', bound no value matching /^test-/" in population.description
    completeness = checks["semantic_completeness"]  # a blocking family whose only failure is a warn rule: a WARN failure
    assert not completeness.passed and completeness.severity is dg.AssetCheckSeverity.WARN
    assert [r["rule"] for r in completeness.metadata["results"].value if not r["passed"]] == ["max_unknown_rate"]
    assert all(c.passed for name, c in checks.items() if name not in ("semantic_population", "semantic_completeness"))
    materialized = [m.asset_key.to_user_string() for m in result.get_asset_materialization_events()]
    assert CANONICAL in materialized and "meters_downstream" not in materialized
    canonical_md = result.asset_materializations_for_node("canonical__meters")[0].metadata
    branch, head = population.metadata["staging_branch"].value, int(population.metadata["staged_snapshot_id"].value)
    assert branch.startswith("wap-") and canonical_md["staging_branch"].value == branch
    assert population.description.startswith(f"main unchanged: the load is staged on Iceberg branch {branch} (snapshot {head})")
    assert canonical_md["rows"].value == 0  # main is unchanged: the day has none of the batch's rows
    tables = build_tables(settings)
    meters = load_config(settings.config_dir).sources["meters"]
    assert tables.read(meters, partition=BAD).num_rows == 0 and tables.current_snapshot_id(meters) != head
    assert tables.read(meters, partition=BAD, snapshot_id=head).num_rows == 8  # the test meter's rows, on the branch
    assert tables.table(meters).refs()[branch].snapshot_id == head
