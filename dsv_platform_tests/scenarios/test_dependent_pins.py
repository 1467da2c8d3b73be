"""Tags named for what depends on them (issue 27 item 10), on the real pyiceberg catalog, GC through the ``dsv`` CLI.

* A model run pins its realization's source snapshots as ``model-<name>-<hash12>``, an artifact as
  ``report-<name>-<hash12>``, with the retained ref age; the realization's own tags stay as they were and resolve.
* GC keeps a pin while a root reaches what it was made for; a tag named like a report pin that the registry does
  not record is scratch and goes.
* Released, a pin ages out: GC writes Iceberg's ``max-ref-age-ms`` so it lasts ``gc.max_ref_age_days`` more; retained
  again, GC restores the retained age; past its age, GC removes it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dsv_platform.adapters.iceberg.duckdb_iceberg import table_location
from dsv_platform.adapters.iceberg.iceberg_refs import pin_snapshot, ref_ages
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.core.retention.dependent_pins import RETAINED_REF_AGE_MS
from dsv_platform.core.retention.policy import DEFAULT_MAX_REF_AGE
from dsv_platform.examples.fraud.model import MODEL_NAME, TRAINER
from dsv_platform.examples.fraud.specs import SOURCES
from dsv_platform.services.privacy.privacy_canonical import delete_canonical
from dsv_platform.services.reproduction.artifacts import produce_artifact
from dsv_platform.services.reproduction.model_run import ModelRun, train_model
from dsv_platform_tests.fixtures.cli_runner import DsvCli
from dsv_platform_tests.scenarios.support import World
from dsv_platform_tests.services.artifact_support import DATASET, PRODUCER

CODE = {"repo": "/srv/reports", "commit": "ab" * 20, "dirty": False}
NO_LOCK = {"lockfile_sha256": "unknown"}


def gc_json(dsv: DsvCli, *args: str) -> dict[str, object]:
    out = dsv("gc", *args, "--json", "--safety-window-hours", "0")
    assert out.code == 0, out.out[-2000:] + out.err[-2000:]
    doc: dict[str, object] = json.loads(out.out)
    return doc


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return World.create(tmp_path_factory.mktemp("pins") / "home", days=3)


@pytest.fixture
def dsv(world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> DsvCli:
    """``dsv`` in this process on the world's home."""
    home = world.settings.home
    return DsvCli(capsys, monkeypatch, {"DSV_HOME": str(home), "DAGSTER_HOME": str(home / "dagster"), "DAGSTER_DISABLE_TELEMETRY": "1"})


def _model_root(world: World, run: ModelRun) -> int:
    roots = [r for r in world.registry.list_retention_roots(datetime.now(UTC)) if r.ref == f"model_run:{run.run_hash}"]
    assert len(roots) == 1
    return int(roots[0].id)


def test_pins_are_named_for_the_model_and_the_report_and_the_realization_pins_still_resolve(world: World) -> None:
    build = world.build()
    run = train_model(world.platform, build.ref, model_name=MODEL_NAME, trainer=TRAINER, seed=7, environment=NO_LOCK)
    sources = {s.table: int(s.snapshot_id) for s in build.manifest.sources}
    model_tag = f"model-{MODEL_NAME}-{run.run_hash[:12]}"
    assert {(p.table, p.snapshot_id, p.tag) for p in run.pins} == {(t, sid, model_tag) for t, sid in sources.items()}
    report = produce_artifact(world.platform, PRODUCER, inputs={DATASET: build.ref}, parameters={"scale": 1}, seed=1, code=CODE)
    report_tag = f"report-{PRODUCER.name}-{report.manifest_hash[:12]}"
    assert {(p.table, p.tag) for p in report.pins} == {(t, report_tag) for t in sources}
    for table, sid in sources.items():
        ages = ref_ages(world.tables, table)
        assert ages[model_tag] == ages[report_tag] == RETAINED_REF_AGE_MS
        realization_tag = next(s.tag for s in build.manifest.sources if s.table == table)
        assert realization_tag is not None and realization_tag.startswith(f"{build.manifest.dataset}-{build.manifest.version}-")
        old, new = table_location(world.tables, table, ref=realization_tag), table_location(world.tables, table, ref=model_tag)
        assert old.snapshot_id == new.snapshot_id == sid, "the realization's own pin still resolves, by name"
    edges = [e for e in world.registry.lineage_edges() if e.src_kind == "iceberg_tag" and e.dst == ("model_run", run.run_hash)]
    assert {e.src_id for e in edges} == {f"{t}#{model_tag}" for t in sources}, "each pin is recorded in the registry"
    assert world.reverify(build) == build.manifest.content_hash


def test_gc_keeps_retained_pins_removes_scratch_ages_out_released_ones(world: World, dsv: DsvCli) -> None:
    build = world.build()
    run = train_model(world.platform, build.ref, model_name=MODEL_NAME, trainer=TRAINER, seed=8, environment=NO_LOCK)
    table, sid = run.pins[0].table, run.pins[0].snapshot_id
    tag = run.pins[0].tag
    forged = f"report-{PRODUCER.name}-{'0' * 12}"  # named like a report's pin; the registry records no such pin
    pin_snapshot(world.tables, table, forged, sid, max_ref_age_ms=RETAINED_REF_AGE_MS)
    plan = gc_json(dsv, "plan")
    collectable = {c["node"]: c for c in plan["collectable"]}  # type: ignore[union-attr, index]
    assert f"iceberg_tag:{table}#{tag}" not in collectable
    assert "registry records no such pin (scratch)" in collectable[f"iceberg_tag:{table}#{forged}"]["reason"]
    applied = gc_json(dsv, "apply", "--yes")
    assert f"{table}#{forged}" in applied["tags_removed"] and not applied["ref_ages_set"]  # type: ignore[operator]
    assert ref_ages(world.tables, table)[tag] == RETAINED_REF_AGE_MS

    root = _model_root(world, run)
    world.registry.release_retention_root(root, "tester", "model retired")
    applied = gc_json(dsv, "apply", "--yes")
    assert f"{table}#{tag}" in applied["ref_ages_set"] and f"{table}#{tag}" not in applied["tags_removed"]  # type: ignore[operator]
    snap = world.tables.load(table).snapshot_by_id(sid)
    assert snap is not None
    age = ref_ages(world.tables, table)[tag]
    assert age is not None and age < RETAINED_REF_AGE_MS
    until = datetime.fromtimestamp((snap.timestamp_ms + age) / 1000, UTC)
    assert abs(until - (datetime.now(UTC) + DEFAULT_MAX_REF_AGE)) < timedelta(minutes=5), "Iceberg's ref age: max_ref_age_days from now"
    why = json.loads(dsv("gc", "why", f"iceberg_tag:{table}#{tag}", "--json", "--safety-window-hours", "0").out)
    assert why[0]["keep"] and why[0]["root"]["kind"] == "ageing_pin" and "no longer retained" in why[0]["reason"]

    world.registry.add_retention_root("model_version", f"model_run:{run.run_hash}", "back in service", "ml")
    applied = gc_json(dsv, "apply", "--yes")
    assert f"{table}#{tag}" in applied["ref_ages_set"] and ref_ages(world.tables, table)[tag] == RETAINED_REF_AGE_MS
    for r in world.registry.list_retention_roots(datetime.now(UTC)):
        if r.ref == f"model_run:{run.run_hash}":
            world.registry.release_retention_root(r.id, "tester", "retired for good")
    gc_json(dsv, "apply", "--yes")
    later = (datetime.now(UTC) + DEFAULT_MAX_REF_AGE + timedelta(days=1)).isoformat()
    plan = gc_json(dsv, "plan", "--now", later)
    reasons = {c["node"]: c["reason"] for c in plan["collectable"]}  # type: ignore[union-attr, index]
    assert "past its max ref age" in reasons[f"iceberg_tag:{table}#{tag}"]
    applied = gc_json(dsv, "apply", "--yes", "--now", later)
    assert f"{table}#{tag}" in applied["tags_removed"]  # type: ignore[operator]
    assert tag not in ref_ages(world.tables, table)


def test_a_privacy_deletion_releases_a_model_pin_with_the_realizations_protecting_its_snapshot(tmp_path: Path) -> None:
    """A model's pin keeps no subject's rows the realizations pinning the same snapshot do not: protected with them, released with them."""
    world = World.create(tmp_path / "home", days=3)
    build = world.build()
    run = train_model(world.platform, build.ref, model_name=MODEL_NAME, trainer=TRAINER, seed=9, environment=NO_LOCK)
    spec = SOURCES["transactions"]
    own = next(s.tag for s in build.manifest.sources if s.table == spec.name)
    model_tag = next(p.tag for p in run.pins if p.table == spec.name)
    subject = str(world.tables.read(spec).column("account_id")[0])
    assert own is not None
    kept = delete_canonical(world.tables, spec, subject, {own: RealizationState.PUBLISHED.value})
    assert model_tag not in kept["removed_tags"] and model_tag in world.tables.tags(spec)
    protecting = {p["tag"]: p["realization_state"] for tags in kept["protected_snapshots"].values() for p in tags}
    assert protecting[model_tag] == protecting[own] == "PUBLISHED"
    released = delete_canonical(world.tables, spec, subject, {own: RealizationState.REDACTED.value})
    assert {own, model_tag} <= set(released["removed_tags"]) and not {own, model_tag} & set(world.tables.tags(spec))
