"""Semantic expectations: parsing (one-line typed errors), hashing neutrality, and the evaluator's numbers."""

from __future__ import annotations

import copy
import datetime as dt
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import yaml

from dsv_platform.core import canonical_json
from dsv_platform.core.contracts.contract import load_contract, parse_contract
from dsv_platform.core.contracts.semantic_rules import declared_rules, evaluate, families, passed
from dsv_platform.core.errors import ContractError

BASE = {
    "name": "meters",
    "key": ["reading_id"],
    "partition_by": "day",
    "columns": [
        {"name": "reading_id", "type": "string"},
        {"name": "meter", "type": "string"},
        {"name": "day", "type": "date"},
        {"name": "kwh", "type": "decimal", "precision": 12, "scale": 3, "unit": "kWh", "nullable": True},
        {"name": "tariff", "type": "string", "nullable": True},
    ],
}


def with_rules() -> dict:
    doc = copy.deepcopy(BASE)
    kwh, tariff = doc["columns"][3], doc["columns"][4]
    kwh.update({"typical": {"p50": [1, 10], "p99": [5, 40]}, "max_null_rate": 0.1, "drift": {"p50_max_change": 0.25}, "range": {"min": 0}})
    tariff.update({"unknown_values": ["?", "n/a"], "max_unknown_rate": 0.05, "drift": {"tv_max": 0.2, "psi_max": 0.3}})
    tariff["severity"] = {"max_unknown_rate": "warn"}
    doc["expectations"] = {"unique": True, "population": [{"column": "meter", "not_matching": "^lab-"}], "max_volume_change": 0.5}
    return doc


def table(kwh: list, tariff: list, *, meters: list | None = None, days: int = 2) -> pa.Table:
    n = len(kwh)
    return pa.table(
        {
            "reading_id": [f"r{i}" for i in range(n)],
            "meter": meters or [f"m{i % 7}" for i in range(n)],
            "day": pa.array([dt.date(2026, 1, 1) + dt.timedelta(days=i % days) for i in range(n)], pa.date32()),
            "kwh": pa.array(kwh, pa.float64()).cast(pa.decimal128(12, 3)),
            "tariff": pa.array(tariff, pa.string()),
        }
    )


def by_rule(results, rule: str, column: str | None = None):
    return next(r for r in results if r.rule == rule and (column is None or r.column == column))


def test_semantic_keys_never_change_the_schema_hash_and_round_trip_through_canonical_json():
    plain, ruled = parse_contract(BASE), parse_contract(with_rules())
    assert plain.schema_hash == ruled.schema_hash and plain.to_document() == parse_contract(plain.to_document()).to_document()
    doc = ruled.to_document()
    canonical_json.dumps(doc)  # floats are written as strings: the manifest can hold the contract
    again = parse_contract(doc)
    assert again.to_document() == doc and again.expectations == ruled.expectations and declared_rules(again) == declared_rules(ruled)


def test_declared_rules_families_and_default_severities():
    rules = {(r.rule, r.column): r for r in declared_rules(parse_contract(with_rules()))}
    assert rules[("typical_p50", "kwh")].severity == "block" and rules[("drift_p50", "kwh")].severity == "warn"
    assert rules[("max_unknown_rate", "tariff")].severity == "warn"  # the column's severity override
    assert rules[("max_volume_change", None)].severity == "warn" and rules[("unique", "reading_id")].severity == "block"
    assert families(parse_contract(with_rules())) == {
        "values": True,
        "completeness": True,
        "plausibility": True,
        "drift": False,
        "uniqueness": True,
        "population": True,
        "volume": False,
    }
    assert families(parse_contract(BASE)) == {}


def test_values_completeness_plausibility_population_and_uniqueness():
    rng = np.random.default_rng(7)
    kwh = [*list(rng.gamma(2.0, 2.5, 999).round(3)), None]
    tariff = list(rng.choice(["day", "night", "?"], 1000, p=[0.6, 0.37, 0.03]))
    t = table(kwh, tariff)
    results = evaluate(t, parse_contract(with_rules()))
    nums = np.array([v for v in kwh if v is not None])
    assert by_rule(results, "typical_p50").observed == pytest.approx(np.percentile(nums, 50), rel=1e-5)
    assert by_rule(results, "typical_p99").observed == pytest.approx(np.percentile(nums, 99), rel=1e-5)
    assert by_rule(results, "max_null_rate").observed == pytest.approx(0.001)
    assert by_rule(results, "max_unknown_rate").observed == pytest.approx(tariff.count("?") / 1000)
    assert passed(results) and all(r.passed for r in results)
    leaked = t.set_column(1, "meter", pa.array(["lab-1", "lab-2", *t.column("meter").to_pylist()[2:]]))
    dup = pa.concat_tables([leaked, leaked.slice(0, 3)])
    bad = {(r.rule, r.column): r for r in evaluate(dup, parse_contract(with_rules())) if not r.passed}
    assert bad[("population", "meter")].observed == "4 rows, e.g. 'lab-1', 'lab-2'"  # two of them duplicated
    assert bad[("unique", "reading_id")].observed == "3 duplicate rows"


def test_the_cents_bug_breaks_the_band_not_the_range():
    kwh = list(np.linspace(1, 20, 400).round(3))
    results = evaluate(table([k * 100 for k in kwh], ["day"] * 400), parse_contract(with_rules()))
    failed = {r.rule for r in results if not r.passed}
    assert failed == {"typical_p50", "typical_p99"} and not passed(results)
    line = by_rule(results, "typical_p50").line()
    assert line.startswith("column 'kwh': rule typical_p50 (block): observed 1050") and line.endswith("bound [1, 10]")


def test_drift_against_a_baseline_psi_and_total_variation_by_hand():
    base = table([2.0] * 500 + [4.0] * 500, ["day"] * 600 + ["night"] * 400)
    cur = table([3.0] * 1000, ["day"] * 300 + ["night"] * 600 + ["weekend"] * 100)
    results = evaluate(cur, parse_contract(with_rules()), base)
    p, q = np.array([0.3, 0.6, 0.1]), np.array([0.6, 0.4, 1e-4])
    assert by_rule(results, "drift_tv").observed == pytest.approx(0.5 * (0.3 + 0.2 + 0.1), rel=1e-6)
    assert by_rule(results, "drift_psi").observed == pytest.approx(float(((p - q) * np.log(p / q)).sum()), rel=1e-5)
    assert by_rule(results, "drift_p50").observed == pytest.approx(0.0)  # the median of {2, 4} halves is 3
    assert not by_rule(results, "drift_tv").passed and by_rule(results, "drift_tv").severity == "warn"
    assert [r.rule for r in results if r.blocking and not r.passed] == ["typical_p99"]  # 3 kWh everywhere: below the p99 band
    half = evaluate(cur.slice(0, 400), parse_contract(with_rules()), base)
    assert by_rule(half, "max_volume_change").observed == pytest.approx(0.6)
    first = evaluate(cur, parse_contract(with_rules()))
    assert {r.observed for r in first if r.family in ("drift", "volume")} == {"no baseline"}


@pytest.mark.parametrize(
    ("path", "value", "needle"),
    [
        (("columns", 4, "typical"), {"p50": [1, 2]}, "'typical' must be a mapping of p50/p99 bands on a numeric column"),
        (("columns", 4, "drift"), {"p99_max_change": 0.1}, "needs a numeric column"),
        (("columns", 3, "typical"), {"p50": [10, 1]}, "low 10 is above high 1"),
        (("columns", 3, "max_null_rate"), -0.5, "'max_null_rate' must be a finite number >= 0"),
        (("columns", 4, "max_unknown_rate"), 0.1, "'max_unknown_rate' and 'unknown_values' go together"),
        (("columns", 4, "severity"), {"typical": "fatal"}, "severity must be 'block' or 'warn'"),
        (("expectations",), {"population": [{"column": "nope", "not_in": ["x"]}]}, "needs a 'column' of the contract"),
        (("expectations",), {"volume": 1}, "'expectations' must be a mapping of"),
        (("expectations",), {"unique": ["kwh", "zzz"]}, "'expectations.unique' must name contract columns"),
        (("expectations",), {"population": [{"column": "meter", "not_matching": "(lab"}]}, "not_matching is not a regular expression"),
    ],
)
def test_a_malformed_rule_is_a_one_line_contract_error(path, value, needle):
    doc = copy.deepcopy(BASE)
    target = doc
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    with pytest.raises(ContractError) as info:
        parse_contract(doc, source="meters.yaml")
    assert needle in str(info.value) and str(info.value).startswith("meters.yaml") and "\n" not in str(info.value)


def test_allowed_values_ref_resolves_relative_to_the_contract_file(tmp_path: Path):
    (tmp_path / "ref").mkdir()
    (tmp_path / "ref" / "tariffs.txt").write_text("# tariffs\nday\nnight  # off-peak\n\n")
    doc = copy.deepcopy(BASE)
    doc["columns"][4]["allowed_values_ref"] = "ref/tariffs.txt"
    (tmp_path / "meters.yaml").write_text(yaml.safe_dump(doc))
    contract = load_contract(tmp_path / "meters.yaml")
    assert contract.column("tariff").allowed_values == ("day", "night")
    assert contract.to_document()["columns"][4]["allowed_values"] == ["day", "night"]  # the manifest records the values themselves
    result = by_rule(evaluate(table([1.0, 2.0, 3.0], ["day", "weekend", None]), contract), "allowed_values")
    assert not result.passed and result.observed == "1 rows, e.g. 'weekend'"
    doc["columns"][4]["allowed_values"] = ["day"]
    (tmp_path / "meters.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(ContractError, match="not both"):
        load_contract(tmp_path / "meters.yaml")
    assert by_rule(evaluate(table([1.0], ["day"]), contract), "allowed_values").observed == "0 rows"


def test_range_applies_to_numeric_columns_and_values_must_fit_the_column_type():
    doc = copy.deepcopy(BASE)
    doc["columns"][2]["range"] = {"min": "2026-01-01"}  # a date range stays a Pandera check, not a gate rule
    doc["columns"][3]["allowed_values"] = ["one", "two"]
    contract = parse_contract(doc)
    assert [r.rule for r in declared_rules(contract)] == ["allowed_values"]
    with pytest.raises(ContractError, match=r"column 'kwh'.*do not fit the column's type decimal128\(12, 3\)"):
        evaluate(table([1.0], ["day"]), contract)


def test_duplicate_rows_by_sort_equals_the_group_by_count() -> None:
    import numpy as np
    import pyarrow as pa

    from dsv_platform.core.contracts.semantic_rules import duplicate_rows

    rng = np.random.default_rng(3)
    for values in (rng.integers(0, 50, 400), rng.permutation(300), np.array([], dtype=np.int64), np.array([7, 7, 7])):
        for arrow in (pa.array(values, pa.int64()), pa.array(values, pa.uint8()) if len(values) and values.max() < 256 else pa.array(values, pa.int32()),
                      pa.array(values.astype("datetime64[us]")).cast(pa.timestamp("us", tz="UTC"))):
            table = pa.table({"k": pa.chunked_array([arrow[: len(arrow) // 2], arrow[len(arrow) // 2 :]], type=arrow.type)})
            groups = table.group_by(["k"]).aggregate([([], "count_all")])
            expected = int(sum(c - 1 for c in groups.column("count_all").to_pylist()))
            assert duplicate_rows(table, ["k"]) == expected
    with_nulls = pa.table({"k": pa.array([1, None, None, 1, 2], pa.int64())})
    assert duplicate_rows(with_nulls, ["k"]) == 2  # nulls form one group, as in the group-by
