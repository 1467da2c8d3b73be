"""The dsv-artifact/1 manifest: exact keys, typed errors naming the key, the hash in the footer, comparing a rerun."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dsv_platform.core import canonical_json
from dsv_platform.core.reproduction.artifact_manifest import (
    ArtifactManifestError,
    build_manifest,
    compare_results,
    footer,
    footer_hash,
    manifest_hash,
    validate_manifest,
)

H1, H2 = "a1" * 32, "b2" * 32


def _doc(**over: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "artifact": "quarterly_consumption_report",
        "produced_at": "2026-04-01T06:00:00Z",
        "produced_by": {"identity": "analyst", "producer": "dsv_platform.examples.readings.report:PRODUCER"},
        "code": {"repo": "/srv/dsv", "commit": "c0ffee" * 6 + "abcd", "dirty": False},
        "environment": {
            "lockfile_sha256": "unknown",
            "python": "3.11.9",
            "runner_timezone": "Europe/Berlin",
            "tz_database": {"source": "tzdata", "version": "2025b", "zones": {"Europe/Berlin": "cc" * 32}},
        },
        "inputs": [{"dataset": "readings_hourly:v1", "ref": "readings_hourly:v1", "snapshot_id": H1, "dataset_hash": H2}],
        "parameters": {"quarter": "2026Q1"},
        "seed": 7,
        "watermark": "2026-04-01T00:00:00Z",
        "results": {"total_kwh": {"north": "1234.567"}, "p99_kw": "3.100"},
        "precision": {"default": "exact", "p99_kw": {"abs": "0.001"}},
    }
    fields.update(over)
    return build_manifest(**fields)


def test_manifest_has_exactly_the_contract_keys_and_hashes_its_canonical_json() -> None:
    doc = _doc()
    assert list(sorted(doc)) == sorted(
        ["format", "artifact", "produced_at", "produced_by", "code", "environment", "inputs", "parameters", "seed", "watermark", "results", "precision"]
    )
    assert doc["format"] == "dsv-artifact/1"
    assert manifest_hash(doc) == canonical_json.sha256_hex(doc)
    assert footer(manifest_hash(doc)) == f"manifest sha256:{manifest_hash(doc)}"
    assert manifest_hash(_doc(seed=8)) != manifest_hash(doc)


@pytest.mark.parametrize(
    ("mutate", "names"),
    [
        (lambda d: d.pop("seed"), "missing key(s) ['seed']"),
        (lambda d: d.update(extra=1), "unknown key(s) ['extra']"),
        (lambda d: d["environment"].pop("tz_database"), "environment is missing"),
        (lambda d: d["inputs"][0].update(snapshot_id="nothex"), "inputs[0].snapshot_id"),
        (lambda d: d["code"].update(dirty="no"), "code.dirty"),
        (lambda d: d.update(produced_at="2026-04-01T06:00:00+02:00"), "produced_at"),
        (lambda d: d["results"].update(total=1.5), "floats are not allowed"),
        (lambda d: d["precision"].update(total={"abs": "x"}), "precision.total"),
        (lambda d: d["produced_by"].update(producer="no_colon"), "produced_by.producer"),
    ],
)
def test_a_bad_manifest_is_a_typed_error_naming_the_key(mutate: Any, names: str) -> None:
    doc = copy.deepcopy(_doc())
    mutate(doc)
    with pytest.raises(ArtifactManifestError, match=names.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(").replace(")", r"\)")) as info:
        validate_manifest(doc)
    assert info.value.exit_code == 2  # INVALID (was 9)


def test_footer_hash_accepts_the_footer_line_a_prefix_or_a_bare_hash() -> None:
    digest = manifest_hash(_doc())
    assert footer_hash(footer(digest)) == digest
    assert footer_hash(f"sha256:{digest[:12]}") == digest[:12]
    assert footer_hash(digest.upper()) == digest
    assert footer_hash("abc123") is None  # fewer than 12 hex digits name nothing


def test_compare_results_is_bit_for_bit_where_exact_and_within_the_stated_tolerance_elsewhere() -> None:
    precision = {"default": "exact", "p99_kw": {"abs": "0.001"}, "share": {"rel": "0.01"}}
    recorded = {"total_kwh": {"north": "1234.567"}, "p99_kw": "3.100", "share": "200", "label": "Q1"}
    assert compare_results(recorded, copy.deepcopy(recorded), precision) == []
    assert compare_results(recorded, {**recorded, "p99_kw": "3.1009"}, precision) == []
    assert compare_results(recorded, {**recorded, "share": "201.9"}, precision) == []
    # exact means the same bytes: "1234.5670" is numerically equal, and still a mismatch
    [m] = compare_results(recorded, {**recorded, "total_kwh": {"north": "1234.5670"}}, precision)
    assert (m.result, m.rule, m.recorded, m.rerun) == ("total_kwh", "exact", {"north": "1234.567"}, {"north": "1234.5670"})
    [m] = compare_results(recorded, {**recorded, "p99_kw": "3.102"}, precision)
    assert (m.result, m.rule, m.difference) == ("p99_kw", "abs 0.001", "0.002")
    [m] = compare_results(recorded, {**recorded, "share": "203"}, precision)
    assert m.rule == "rel 0.01" and m.difference == "3"
    missing = compare_results(recorded, {k: v for k, v in recorded.items() if k != "label"}, precision)
    assert [(m.result, m.difference) for m in missing] == [("label", "missing on one side")]


def test_tolerance_applies_to_nested_results_leaf_by_leaf() -> None:
    precision = {"default": {"abs": "0.01"}}
    recorded = {"by_region": {"north": "10.00", "south": "20.00"}, "regions": ["north", "south"]}
    assert compare_results(recorded, {"by_region": {"north": "10.005", "south": "20.00"}, "regions": ["north", "south"]}, precision) == []
    found = compare_results(recorded, {"by_region": {"north": "10.02", "south": "20.00"}, "regions": ["north", "east"]}, precision)
    assert [m.result for m in found] == ["by_region.north", "regions[1]"]
