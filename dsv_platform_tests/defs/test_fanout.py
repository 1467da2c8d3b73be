"""``fan_out: N`` in a dataset file: the snapshot built by a plan step, parallel prepare steps and a seal (issue 22, item 5).

The fanned-out build runs through the ``dagster`` CLI on the multiprocess executor; its manifest must be byte-identical
to a single-step build of the same pinned snapshots (a second registry over the same tables and object store), and the
prepare steps must have run in different processes.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import dagster as dg
import pytest

from dsv_platform.core.config.dataset_definition import DatasetDefinitionError, load_definition
from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.defs import build_defs
from dsv_platform.defs.resources import PlatformResource
from dsv_platform.examples.fraud import CONFIG_DIR, events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.services.publication.fanout import FanOutError, plan_fanout, prepare_group, seal_fanout
from dsv_platform.settings import Settings, load_settings
from dsv_platform_tests.defs.support import FRAUD_SOURCES, drop, range_tags

ROOT = Path(__file__).resolve().parents[2]
DATASET = "fraud_training_set_v6"  # its file name; its asset key:
SNAPSHOT, SPLITS, NODE = "datasets/fraud_training_set/v6", "datasets/fraud_training_set/v6/splits", "datasets__fraud_training_set__v6"
DAYS = ["2026-06-01", "2026-06-02", "2026-06-03"]
ROWS_PER_DAY = 100


def fanned_config(folder: Path, fan_out: object, *, executor: str | None = None) -> Path:
    """A copy of the fraud configuration whose v6 definition has ``fan_out`` (and whose platform.yaml names ``executor``)."""
    shutil.copytree(CONFIG_DIR, folder)
    with (folder / "datasets" / f"{DATASET}.yaml").open("a") as f:
        f.write(f"fan_out: {fan_out}\n")
    if executor is not None:
        with (folder / "platform.yaml").open("a") as f:
            f.write(f"executor: {executor}\n")
    return folder


@pytest.mark.parametrize("value", ["0", "-2", "'3'", "true", "1.5", "1000", "[2]"])
def test_a_wrong_fan_out_is_one_line_naming_the_file_and_key(tmp_path, value):
    folder = fanned_config(tmp_path / "config", value)
    with pytest.raises(DatasetDefinitionError) as err:
        load_definition(folder / "datasets" / f"{DATASET}.yaml")
    assert err.value.key == "fan_out" and f"{DATASET}.yaml" in str(err.value) and "\n" not in str(err.value)


def test_fan_out_is_how_a_build_runs_not_what_it_is(tmp_path):
    fanned = load_definition(fanned_config(tmp_path / "config", 3) / "datasets" / f"{DATASET}.yaml")
    single = load_definition(CONFIG_DIR / "datasets" / f"{DATASET}.yaml")
    assert (fanned.fan_out, single.fan_out) == (3, 1)
    assert fanned.recipe_hash == single.recipe_hash  # same logical key, same manifest: a rebuild after switching reuses


def test_the_fanned_out_snapshot_keeps_its_key_dependencies_and_checks(tmp_path):
    def snapshot(config: Path) -> dg.AssetsDefinition:
        settings = load_settings({"DSV_HOME": str(tmp_path / "dsv"), "DSV_CONFIG_DIR": str(config)})
        defs = build_defs(settings, load_config(config))
        return next(a for a in defs.assets if isinstance(a, dg.AssetsDefinition) and dg.AssetKey.from_user_string(SNAPSHOT) in a.keys)

    fanned, single = snapshot(fanned_config(tmp_path / "fanned", 2)), snapshot(CONFIG_DIR)
    assert isinstance(fanned.node_def, dg.GraphDefinition) and not isinstance(single.node_def, dg.GraphDefinition)
    assert fanned.keys == single.keys and fanned.check_keys == single.check_keys
    assert set(fanned.asset_deps[dg.AssetKey.from_user_string(SNAPSHOT)]) == set(single.asset_deps[dg.AssetKey.from_user_string(SNAPSHOT)])
    assert {n.name for n in fanned.node_def.node_defs} == {f"{DATASET}_{op}" for op in ("plan", "prepare", "seal")}


def ingest(settings: Settings) -> None:
    """The batches and the v6 label, in process (the build is what runs on the executor)."""
    domain = FraudDomain(rows_per_day=ROWS_PER_DAY)
    drop(settings.drop_folder, [events.daily_batch(domain, s, dt.date.fromisoformat(d)) for s in FRAUD_SOURCES for d in DAYS])
    defs = build_defs(settings)
    assets = [*defs.assets]
    with dg.DagsterInstance.ephemeral() as instance:
        tags = range_tags(DAYS[0], DAYS[-1])
        assert dg.materialize(assets, selection="group:raw or group:canonical", tags=tags, instance=instance, resources=defs.resources).success
        assert dg.materialize(assets, selection="labels/fraud", partition_key="v6", instance=instance, resources=defs.resources).success


def single_step(settings: Settings, tmp_path: Path) -> dict[str, object]:
    """The single-step build of the same pinned snapshots: the same tables and objects, a second registry."""
    second = replace(settings, registry_url=f"sqlite:///{tmp_path / 'single-step-registry.db'}", config_dir=CONFIG_DIR)
    defs = build_defs(second)
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([*defs.assets], selection=SNAPSHOT, instance=instance, resources=defs.resources)
        assert result.success
        return {k: v.value for k, v in result.asset_materializations_for_node(NODE)[0].metadata.items()}


def dagster_env(settings: Settings, dagster_home: Path) -> dict[str, str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("DSV_", "DAGSTER_", "PYTHONPATH"))}
    dagster_home.mkdir(parents=True, exist_ok=True)
    (dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    paths = {"DSV_HOME": settings.home, "DSV_CONFIG_DIR": settings.config_dir, "DSV_DROP_FOLDER": settings.drop_folder, "DAGSTER_HOME": dagster_home}
    return inherited | {k: str(v) for k, v in paths.items()} | {"PYTHONPATH": str(ROOT), "DSV_ACTOR": "fanout-test"}


def step_pids(instance: dg.DagsterInstance, run_id: str) -> dict[str, int]:
    """step key -> the pid of the process that ran it (its STEP_START event); the run's own pid under ``run``."""
    pids = {}
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is not None and event.event_type_value in ("RUN_START", "STEP_START"):
            pids[event.step_key or "run"] = event.pid
    return pids


def latest_snapshot(instance: dg.DagsterInstance) -> dict[str, object]:
    event = instance.get_latest_materialization_event(dg.AssetKey.from_user_string(SNAPSHOT))
    assert event is not None and event.asset_materialization is not None
    return {k: v.value for k, v in event.asset_materialization.metadata.items()}


@pytest.mark.slow
def test_a_fanned_out_build_on_the_multiprocess_executor_equals_the_single_step_build(tmp_path):
    config = fanned_config(tmp_path / "config", 2, executor="multiprocess")
    settings = load_settings({"DSV_HOME": str(tmp_path / "dsv"), "DSV_CONFIG_DIR": str(config), "DSV_DROP_FOLDER": str(tmp_path / "drop")})
    ingest(settings)
    env = dagster_env(settings, tmp_path / "dagster")
    for _ in range(2):  # the second run: the same pinned inputs, the same realization (reused, nothing prepared)
        cmd = [sys.executable, "-m", "dagster", "job", "execute", "-j", f"publish_{DATASET}", "-m", "dsv_platform.definitions", "-a", "defs"]
        out = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, (out.stdout[-3000:], out.stderr[-5000:])
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        first, again = reversed(instance.get_runs())  # newest first
        pids, rerun = step_pids(instance, first.run_id), step_pids(instance, again.run_id)
        fanned = latest_snapshot(instance)
        splits = instance.get_latest_materialization_event(dg.AssetKey.from_user_string(SPLITS))
    prepares = {k: pid for k, pid in pids.items() if "_prepare[" in k}
    others = {pid for k, pid in pids.items() if "_prepare[" not in k}  # the run, plan and seal steps
    assert len(prepares) == 2 and len(set(prepares.values())) == 2 and not others & set(prepares.values()), pids  # two groups, two processes
    assert not any("_prepare[" in k for k in rerun) and fanned["reused"] is True, rerun
    assert splits is not None and splits.asset_materialization is not None and splits.asset_materialization.metadata["ref"].value == fanned["ref"]

    single = single_step(settings, tmp_path)
    assert single["reused"] is False
    assert (fanned["manifest_hash"], fanned["content_hash"], fanned["rows"]) == (single["manifest_hash"], single["content_hash"], single["rows"])
    assert fanned["partitions"] == single["partitions"]
    gates = [{(g["name"], g["passed"], g["blocking"]) for g in m["gate_results"]} for m in (fanned, single)]  # type: ignore[attr-defined]
    assert ("integrity:raw_agreement", True, False) in gates[0]  # the fanned build's batches agree with their landed raw batches
    # The single-step build's second registry holds no landing records (the landing index lives in the registry since
    # migration 22), so its raw_agreement finds no raw batch for any canonical batch: every other gate must be the same.
    assert {g for g in gates[0] if g[0] != "integrity:raw_agreement"} == {g for g in gates[1] if g[0] != "integrity:raw_agreement"}


def test_a_seal_without_every_group_fails_the_candidate_closed(tmp_path):
    config = fanned_config(tmp_path / "config", 3)
    settings = load_settings({"DSV_HOME": str(tmp_path / "dsv"), "DSV_CONFIG_DIR": str(config), "DSV_DROP_FOLDER": str(tmp_path / "drop")})
    ingest(settings)
    resource = PlatformResource.for_settings(settings)
    platform = resource.get()
    try:
        definition = next(d for d in platform.config.datasets if d.fan_out == 3)
        plan = plan_fanout(platform, definition)
        groups = plan.groups(definition.fan_out)
        assert [len(g) for g in groups] == [1, 1, 1] and plan.candidate is not None
        leaves = [prepare_group(platform, definition, plan, keys) for keys in groups[:-1]]  # the last prepare step never ran
        with pytest.raises(FanOutError, match="do not cover the plan"):
            seal_fanout(platform, definition, plan, leaves)
        assert platform.registry.get(plan.candidate).state is RealizationState.FAILED
        assert platform.registry.get_alias(definition.name, definition.version, "candidate") is None  # nothing published, no alias moved
    finally:
        platform.close()
