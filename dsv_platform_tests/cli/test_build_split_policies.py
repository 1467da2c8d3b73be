"""Every registered split policy is buildable through `dsv build` of a dataset definition (issue 28, item 2).

One configuration (the meters dataset of config_support) carries one definition per policy; the batches
go in once through `dsv ingest`. Each test builds its policy's definition with the real `dsv build` (one
recorded Dagster run: snapshot and splits) and checks the assignment the realization stores: every example
in exactly one split, and the policy's rule recomputed here from its spec (SHA-256 buckets, time bounds).
One more definition is keyed [meter_id, read_at] (a composite key, split by its group; issue 23, item 5).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import datetime as dt
import hashlib
import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from dsv_platform import open_dataset
from dsv_platform.cli.main import main
from dsv_platform.core.errors import CorruptError
from dsv_platform.core.splits.policy import REGISTRY
from dsv_platform.services.publication.split_verify import verify_splits
from dsv_platform_tests.core.config_support import CALIBRATION, DATASET, write_config
from dsv_platform_tests.fixtures.cli_runner import CLI_ENV, DsvCli

UTC = dt.UTC
TS = pa.timestamp("us", tz="UTC")
READING = pa.schema(
    [("reading_id", pa.string()), ("meter_id", pa.string()), ("read_at", TS), ("read_day", pa.date32()), ("kwh", pa.decimal128(12, 3)), ("site", pa.string())]
)
CALIBRATION_SCHEMA = pa.schema([("meter_id", pa.string()), ("calibrated_at", TS), ("calibrated_day", pa.date32()), ("factor", pa.float64())])
GROUP = 'split_policy:\n  policy: group-split/1\n  group_column: meter_id\n  salt: meters\n  bounds: "train=80,test=100"\n'
TRAIN_UNTIL = dt.datetime(2026, 1, 2, 6, tzinfo=UTC)
VALIDATION_UNTIL = dt.datetime(2026, 1, 3, 11, tzinfo=UTC)  # written 12:00+01:00 below


def _bucket(message: str, modulus: int) -> int:
    return int.from_bytes(hashlib.sha256(message.encode("utf-8")).digest(), "big") % modulus


def _first_range(bucket: int, uppers: dict[str, int]) -> str:
    return next(name for name, upper in uppers.items() if bucket < upper)


@dataclass(frozen=True)
class Case:
    """A definition of ``policy`` and the rule its assignment must follow: (example row, assignment row) -> (split, bucket or None)."""

    name: str
    policy: dict
    rule: Callable[[dict, dict], tuple[str, int | None]]
    gates: tuple[str, ...]

    @property
    def ref(self) -> str:
        return f"{self.name}:v1"


def _hash_rule(row: dict, _: dict) -> tuple[str, int]:
    bucket = _bucket(f"readings-2026:{row['reading_id']}", 100)
    return _first_range(bucket, {"train": 70, "validation": 85, "test": 100}), bucket


def _group_rule(row: dict, _: dict) -> tuple[str, int]:
    bucket = _bucket(f"meters:{row['meter_id']}", 100)
    return _first_range(bucket, {"train": 80, "test": 100}), bucket


def _time_rule(row: dict, _: dict) -> tuple[str, None]:
    t = row["read_at"]
    return ("train" if t < TRAIN_UNTIL else "validation" if t < VALIDATION_UNTIL else "test"), None


def _seeded_rule(row: dict, _: dict) -> tuple[str, int]:
    bucket = _bucket(f"seeded-random/1:7:{row['reading_id']}", 10)  # modulus: 8 + 1 + 1 parts
    return _first_range(bucket, {"train": 8, "validation": 9, "test": 10}), bucket


ERAS = {"train": ["m-A", "m-B", "m-C"], "validation": ["m-D"], "test": ["m-E"]}  # the meter stands for the serving policy


def _era_rule(row: dict, _: dict) -> tuple[str, None]:
    return next(split for split, eras in ERAS.items() if row["meter_id"] in eras), None


CASES = {
    "hash-split/1": Case(
        "readings_by_hash",
        {"policy": "hash-split/1", "salt": "readings-2026", "bounds": "train=70,validation=85,test=100"},
        _hash_rule,
        ("proportions_within_tolerance",),
    ),
    "group-split/1": Case("meter_readings", {}, _group_rule, ("proportions_within_tolerance",)),  # the base definition, as written
    "time-split/1": Case(
        "readings_by_time",
        {"policy": "time-split/1", "column": "read_at", "train_until": "2026-01-02T06:00:00Z", "validation_until": "2026-01-03T12:00:00+01:00"},
        _time_rule,
        ("time_boundaries_respected",),
    ),
    "seeded-random/1": Case(
        "readings_seeded",
        {"policy": "seeded-random/1", "seed": 7, "parts": {"train": 8, "validation": 1, "test": 1}, "key_column": "reading_id"},
        _seeded_rule,
        ("proportions_within_tolerance",),
    ),
    "era-split/1": Case("readings_by_era", {"policy": "era-split/1", "column": "meter_id", "eras": ERAS}, _era_rule, ("eras_respected",)),
}


COMPOSITE = "readings_composite"


def _readings() -> list[dict]:
    rows = []
    for day in (dt.date(2025, 12, 31), dt.date(2026, 1, 1), dt.date(2026, 1, 2), dt.date(2026, 1, 3)):
        for meter in ("m-A", "m-B", "m-C", "m-D", "m-E"):
            for hour in (0, 5, 6, 7, 11, 12, 23):  # 06:00 on Jan 2 and 11:00 UTC on Jan 3 are the time split's bounds
                at = dt.datetime(day.year, day.month, day.day, hour, tzinfo=UTC)
                kwh = Decimal(f"{hour + 0.5:.3f}")
                rows.append({"reading_id": f"{meter}/{at:%Y%m%dT%H}", "meter_id": meter, "read_at": at, "read_day": day, "kwh": kwh, "site": None})
    return rows


def _definitions() -> dict[str, str]:
    files = {}
    for case in CASES.values():
        if case.policy:
            text = DATASET.replace("name: meter_readings", f"name: {case.name}").replace(GROUP, yaml.safe_dump({"split_policy": case.policy}, sort_keys=False))
            files[f"datasets/{case.name}_v1.yaml"] = text
    composite = DATASET.replace("name: meter_readings", f"name: {COMPOSITE}")
    composite = composite.replace("  key: [reading_id]\n  partition_by", "  key: [meter_id, read_at]\n  partition_by")
    files[f"datasets/{COMPOSITE}_v1.yaml"] = composite  # group-split/1 on meter_id, keyed [meter_id, read_at] (issue 23, item 5)
    return files


def _run(*args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    assert code == 0, (args, err.getvalue()[-3000:])
    return out.getvalue()


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> dict[str, str]:
    """A home with the meters and calibration batches ingested through `dsv ingest`; the environment the CLI runs in."""
    root = tmp_path_factory.mktemp("split-policies")
    config = write_config(root / "config", {"sources/calibration.yaml": CALIBRATION.replace("{format: jsonl}", "{format: parquet}"), **_definitions()})
    env = {"DSV_HOME": str(root / "home"), "DSV_CONFIG_DIR": str(config)}
    pq.write_table(pa.Table.from_pylist(_readings(), schema=READING), root / "meters.parquet")
    at = dt.datetime(2025, 12, 30, tzinfo=UTC)
    calibration = [{"meter_id": "m-A", "calibrated_at": at, "calibrated_day": at.date(), "factor": 1.5}]
    pq.write_table(pa.Table.from_pylist(calibration, schema=CALIBRATION_SCHEMA), root / "cal.parquet")
    with pytest.MonkeyPatch.context() as mp:
        for key in (*CLI_ENV, "DAGSTER_HOME"):
            mp.delenv(key, raising=False)
        for key, value in env.items():
            mp.setenv(key, value)
        _run("ingest", "meters", str(root / "meters.parquet"))
        _run("ingest", "calibration", str(root / "cal.parquet"), "--recorded-at", "2026-01-05T00:00:00+00:00")
    return env


@pytest.fixture
def dsv(capsys, monkeypatch, home) -> DsvCli:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    return DsvCli(capsys, monkeypatch, home)


def test_every_registered_policy_has_a_build_case():
    assert set(CASES) == set(REGISTRY)


@pytest.mark.parametrize("policy", sorted(CASES))
def test_dsv_build_materializes_the_assignment_the_policy_says(dsv, policy):
    case = CASES[policy]
    built = dsv("build", case.ref)
    assert built.code == 0, built.err[-3000:]
    ref = re.search(r"^  ref\s+(\S+)", built.out, re.M)
    assert ref is not None, built.out
    printed = dict(item.split("=") for item in re.search(r"^  splits\s+(.+)$", built.out, re.M).group(1).split(", "))  # type: ignore[union-attr]
    gates = dict(re.findall(r"^  gate (\S+): (\w+)", built.out, re.M))
    assert gates["splits_are_entity_disjoint"] == gates["rows_at_least"] == "passed", built.out
    assert {g for g in gates if g in ("proportions_within_tolerance", "time_boundaries_respected", "eras_respected")} == set(case.gates), built.out
    for blocking in ("time_boundaries_respected", "eras_respected"):  # the proportions gate only warns (5 meters make coarse shares)
        assert gates.get(blocking, "passed") == "passed", built.out
    assert f"check datasets/{case.name}/v1/splits.splits_are_entity_disjoint: passed" in built.out, built.out  # the _splits asset re-read the stored assignment

    with open_dataset(ref.group(1)) as ds:
        rows = {r["reading_id"]: r for r in ds.to_arrow().to_pylist()}
        assignment = ds.split_assignment
        manifest = ds.manifest
        by_split = {s: ds.to_arrow(split=s)["reading_id"].to_pylist() for s in printed}
    assert assignment is not None and manifest.splits is not None
    assert manifest.splits.policy["policy"] == policy
    assert len(rows) == 3 * 5 * 7  # the observation window's days Jan 1-3 x 5 meters x 7 hours
    assigned = assignment.to_pylist()
    ids = [a["reading_id"] for a in assigned]
    assert len(ids) == len(set(ids)) and set(ids) == set(rows), "every example is in exactly one split"
    counts = collections.Counter(a["split"] for a in assigned)
    assert {k: int(v) for k, v in printed.items()} == dict(manifest.splits.counts) == {s: counts.get(s, 0) for s in manifest.splits.counts}
    assert sorted(x for split in by_split.values() for x in split) == sorted(rows), "the splits read back partition the rows"
    for a in assigned:
        split, bucket = case.rule(rows[a["reading_id"]], a)
        assert a["split"] == split, (a, rows[a["reading_id"]])
        assert a.get("bucket") == bucket, a
    if policy == "time-split/1":  # the rows on the bounds: half-open ranges
        assert {a["reading_id"]: a["split"] for a in assigned if a["reading_id"] in ("m-A/20260102T06", "m-A/20260103T11", "m-A/20260103T07")} == {
            "m-A/20260102T06": "validation",
            "m-A/20260103T07": "validation",
            "m-A/20260103T11": "test",
        }
    if policy == "group-split/1":
        assert all(len({a["split"] for a in assigned if a["meter_id"] == m}) == 1 for m in {a["meter_id"] for a in assigned})
    _recomputes(dsv, ref.group(1), manifest.splits)


def _recomputes(dsv, ref: str, splits) -> None:  # type: ignore[no-untyped-def]
    """`dsv verify --splits`: the stored assignment recomputed from the manifest's policy is the stored one (issue 27, item 6)."""
    verified = dsv("verify", ref, "--splits", "--json")
    assert verified.code == 0, verified.err[-3000:]
    doc = json.loads(verified.out)["splits"]
    stored = {"assignment_object": splits.assignment_object, "assignment_hash": splits.assignment_hash, "counts": dict(splits.counts)}
    assert doc["ok"] is True and doc["stored"] == doc["recomputed"] == stored and doc["differing"] == [], doc
    assert doc["policy"] == splits.policy["policy"] and doc["rows"] == sum(splits.counts.values())
    text = dsv("verify", ref, "--splits")
    assert text.code == 0 and f"split assignment recomputed from its policy {doc['policy']}" in text.out, text.out


def test_an_assignment_its_policy_does_not_give_is_corrupt_naming_the_examples(dsv):
    """The check can fail: the same stored rows and assignment, but a manifest whose policy says another salt."""
    built = dsv("build", CASES["hash-split/1"].ref)
    assert built.code == 0, built.err[-3000:]
    ref = re.search(r"^  ref\s+(\S+)", built.out, re.M)
    assert ref is not None, built.out
    with open_dataset(ref.group(1)) as ds:
        splits = ds.manifest.splits
        assert splits is not None
        salted = dataclasses.replace(splits, policy={**splits.policy, "salt": "another-salt"})
        forged = dataclasses.replace(ds, manifest=dataclasses.replace(ds.manifest, splits=salted))
        with pytest.raises(CorruptError) as caught:
            verify_splits(ds.owner, forged)  # type: ignore[arg-type]  # the Platform the top-level open_dataset built
    message = str(caught.value)
    assert message.startswith(f"CORRUPT: {ds.ref}: the stored split assignment is not what its policy hash-split/1 gives"), message
    assert "assignment_object, assignment_hash" in message and "examples assigned differently: m-" in message, message
    assert caught.value.exit_code == 6 and len(caught.value.detail["splits"]["differing"]) == 5


def test_dsv_build_splits_a_composite_key_by_its_group(dsv):
    built = dsv("build", f"{COMPOSITE}:v1")
    assert built.code == 0, built.err[-3000:]
    ref = re.search(r"^  ref\s+(\S+)", built.out, re.M)
    assert ref is not None, built.out
    assert f"check datasets/{COMPOSITE}/v1/splits.splits_are_entity_disjoint: passed" in built.out, built.out
    with open_dataset(ref.group(1)) as ds:
        rows = ds.to_arrow().to_pylist()
        assignment = ds.split_assignment
        by_split = {s: ds.to_arrow(split=s).to_pylist() for s in ("train", "test")}
    assert assignment is not None and assignment.column_names == ["example_id", "meter_id", "read_at", "split", "bucket"]
    for a in assignment.to_pylist():
        assert a["example_id"] == f"{a['meter_id']}\t{int(a['read_at'].timestamp()) * 1_000_000}"
        assert (a["split"], a["bucket"]) == _group_rule(a, a)
    assert sorted(r["reading_id"] for split in by_split.values() for r in split) == sorted(r["reading_id"] for r in rows)
    assert all(_group_rule(r, r)[0] == split for split, chosen in by_split.items() for r in chosen)
    with open_dataset(ref.group(1)) as ds:
        splits = ds.manifest.splits
    _recomputes(dsv, ref.group(1), splits)
