"""OpenLineage run events from the Dagster pipeline (landing -> canonical load -> labels -> dataset build -> training) match `dsv lineage`."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from dsv_platform.adapters.lineage import openlineage as ol
from dsv_platform.bootstrap import build_platform
from dsv_platform.core.errors import NotFoundError
from dsv_platform.defs import build_defs
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.examples.fraud.model import MODEL_NAME, TRAINER
from dsv_platform.services.ingest.canonical_load import load_partition
from dsv_platform.services.reproduction.model_run import train_model
from dsv_platform.settings import Settings, load_settings
from dsv_platform_tests.defs.support import FRAUD_SOURCES, drop, range_tags
from dsv_platform_tests.interop.collector import Collector, collector, graph, iceberg_table, node_of, upstream
from dsv_platform_tests.scenarios.support import definition

DAYS = ["2026-06-01", "2026-06-02"]
KINDS = ("raw_batch", "iceberg_snapshot", "realization", "model_run")
RELATIONS = {"loaded_into", "derived_from", "pinned_by", "trained", "succeeded_by"}
MODEL_ASSETS = ["datasets/fraud_training_set/v6", "datasets/fraud_training_set/v6/splits", "models/fraud_model"]


@pytest.fixture(autouse=True, scope="module")
def _openlineage_variables_restored() -> Iterator[None]:
    """The OpenLineage client writes ``OPENLINEAGE__TRANSPORT__*`` variables into the process environment from
    ``OPENLINEAGE_URL``; left there, every later ``dsv`` subprocess of the session would emit events (and warn)."""
    before = {k: v for k, v in os.environ.items() if k.startswith("OPENLINEAGE")}
    yield
    for k in [k for k in os.environ if k.startswith("OPENLINEAGE")]:
        del os.environ[k]
    os.environ.update(before)


def settings_on(home: Path, url: str) -> Settings:
    """The embedded default under ``home``, with OpenLineage on as ``OPENLINEAGE_URL`` makes it."""
    settings = load_settings({"OPENLINEAGE_URL": url}).with_home(home)
    assert settings.openlineage and not load_settings({"OPENLINEAGE_URL": url, "OPENLINEAGE_DISABLED": "true"}).openlineage
    return settings


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Settings, Collector, dict[str, Any]]]:
    """The fraud pipeline run through Dagster with a loopback collector; the model asset's metadata."""
    home = tmp_path_factory.mktemp("openlineage") / "dsv"
    with collector() as found, pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENLINEAGE_URL", found.url)  # the client reads its own configuration
        mp.delenv("OPENLINEAGE_CONFIG", raising=False)
        ol.EMITTER.reset()
        settings = settings_on(home, found.url)
        defs = build_defs(settings)
        assets = [*defs.assets]
        domain = FraudDomain(rows_per_day=120)
        drop(settings.drop_folder, [events.daily_batch(domain, s, dt.date.fromisoformat(d)) for s in FRAUD_SOURCES for d in DAYS])
        with dg.DagsterInstance.ephemeral() as instance:
            run = {"instance": instance, "resources": defs.resources}
            assert dg.materialize(assets, selection="group:raw or group:canonical", tags=range_tags(DAYS[0], DAYS[-1]), **run).success
            assert dg.materialize(assets, selection="labels/fraud", partition_key="v6", **run).success
            result = dg.materialize(assets, selection=MODEL_ASSETS, **run)
            assert result.success
        mats = {e.materialization.asset_key.to_user_string(): e.materialization.metadata for e in result.get_asset_materialization_events()}
        yield settings, found, {k: v.value for k, v in mats["models/fraud_model"].items()} | {"snapshot": mats["datasets/fraud_training_set/v6"]}
        ol.EMITTER.reset()


def by_job(found: Collector) -> dict[str, list[dict[str, Any]]]:
    jobs: dict[str, list[dict[str, Any]]] = {}
    for e in found.events:
        jobs.setdefault(e["job"]["name"], []).append(e)
    return jobs


@pytest.mark.slow  # the module's pipeline: a whole ingest-build-train run
def test_every_step_emits_start_then_complete_in_our_namespace(pipeline: tuple[Settings, Collector, dict[str, Any]]) -> None:
    settings, found, _ = pipeline
    jobs = by_job(found)
    expected = {f"land.{s}" for s in FRAUD_SOURCES} | {f"canonical_load.{s}" for s in FRAUD_SOURCES}
    assert expected | {"label_build.fraud.v6", "dataset_build.fraud_training_set.v6", "train.fraud_model"} <= set(jobs)
    assert set(found.paths) == {"/api/v1/lineage"}
    for name, evs in jobs.items():
        runs: dict[str, list[str]] = {}
        for e in evs:
            runs.setdefault(e["run"]["runId"], []).append(e["eventType"])
            assert e["job"]["namespace"] == f"dsv://{settings.home / 'registry.db'}", "no credentials, the registry names the namespace"
        assert all(states == ["START", "COMPLETE"] for states in runs.values()), (name, runs)


@pytest.mark.slow  # the whole pipeline
def test_dataset_facets_carry_hashes_and_snapshot_ids(pipeline: tuple[Settings, Collector, dict[str, Any]]) -> None:
    _, found, model = pipeline
    snap = model["snapshot"]
    build = next(e for e in found.completed() if e["job"]["name"] == "dataset_build.fraud_training_set.v6")
    [out] = build["outputs"]
    assert out["name"] == "fraud_training_set:v6" and out["facets"]["version"]["datasetVersion"] == snap["manifest_hash"].value
    dsv = out["facets"]["dsv"]
    assert dsv["_producer"] == ol.PRODUCER and dsv["_schemaURL"] == ol.FACET_SCHEMA
    assert dsv["properties"]["manifest_hash"] == snap["manifest_hash"].value and dsv["properties"]["content_hash"] == snap["content_hash"].value
    assert [(f["name"], f["type"]) for f in out["facets"]["schema"]["fields"]] == [(c.name, c.type.value) for c in definition("v6").contract.columns]
    pins = {(p["table"], str(p["snapshot_id"]), p["tag"]) for p in dsv["properties"]["pinned_snapshots"]}
    ins = {(iceberg_table(i), i["facets"]["version"]["datasetVersion"], i["facets"]["dsv"]["properties"]["tag"]) for i in build["inputs"]}
    assert ins == pins and {t for t, _, _ in pins} == {"transactions", "account_features", "labels_fraud_v6"}
    train = next(e for e in found.completed() if e["job"]["name"] == "train.fraud_model")
    assert train["outputs"][0]["facets"]["version"]["datasetVersion"] == model["run_manifest_hash"]
    assert train["inputs"][0]["facets"]["dsv"]["properties"]["content_hash"] == model["trained_on_content_hash"]
    loads = [e for e in found.completed() if e["job"]["name"] == "canonical_load.transactions"]
    assert all(o["facets"]["dsv"]["properties"]["content_hash"] and o["facets"]["schema"]["fields"] for e in loads for o in e["outputs"])


@pytest.mark.slow  # the whole pipeline
def test_the_openlineage_graph_is_the_dsv_lineage_of_the_model(pipeline: tuple[Settings, Collector, dict[str, Any]]) -> None:
    settings, found, model = pipeline
    start = f"model_run:{model['run_manifest_hash']}"
    env = {**os.environ, "DSV_HOME": str(settings.home)}
    env.pop("OPENLINEAGE_URL", None)
    out = subprocess.run([sys.executable, "-m", "dsv_platform.cli.main", "lineage", start, "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    ours = {n["node"] for n in json.loads(out.stdout)["nodes"] if n["kind"] in KINDS} | {start}
    with build_platform(settings) as platform:
        recorded = {(f"{e.src_kind}:{e.src_id}", f"{e.dst_kind}:{e.dst_id}", e.relation) for e in platform.registry.lineage_edges()}
    our_edges = {(s, d) for s, d, rel in recorded if rel in RELATIONS and s in ours and d in ours}
    theirs = graph(found.events)
    assert upstream(theirs, start) == ours, "same nodes"
    assert {(s, d) for s, d in theirs if d in ours} == our_edges, "same edges"
    assert sum(n.startswith("raw_batch:") for n in ours) >= 4 and any(n.startswith("iceberg_snapshot:labels_fraud_v6@") for n in ours)
    for event in found.completed():
        for ds in event["inputs"] + event["outputs"]:
            assert node_of(ds) in (None, ds["facets"].get("dsv", {}).get("node")), "the dsv facet names the same node"
    landed = {node_of(o) for e in found.completed() if e["job"]["name"].startswith("land.") for o in e["outputs"]}
    files = {i["name"] for e in found.completed() if e["job"]["name"].startswith("land.") for i in e["inputs"]}
    assert {n for n in ours if n.startswith("raw_batch:")} <= landed, "every raw batch came out of a landing run"
    assert files and all(Path(f).parent == settings.drop_folder.resolve() for f in files)


@pytest.mark.slow  # the whole pipeline
def test_a_failing_step_emits_fail_with_the_error(pipeline: tuple[Settings, Collector, dict[str, Any]]) -> None:
    settings, found, _ = pipeline
    before = len(found.events)
    with pytest.MonkeyPatch.context() as mp, build_platform(settings) as platform:
        mp.setenv("OPENLINEAGE_URL", found.url)
        ol.EMITTER.reset()
        with pytest.raises(NotFoundError):
            train_model(platform, "fraud_training_set:v99", model_name=MODEL_NAME, trainer=TRAINER, seed=1)
    new = found.events[before:]
    assert [(e["job"]["name"], e["eventType"]) for e in new] == [("train.fraud_model", "START"), ("train.fraud_model", "FAIL")]
    assert new[0]["run"]["runId"] == new[1]["run"]["runId"]
    assert "NotFoundError" in new[1]["run"]["facets"]["errorMessage"]["message"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_collector_that_is_down_is_a_warning_not_a_failure(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = tmp_path / "openlineage.yml"  # the OPENLINEAGE_CONFIG route, with the client's retries bounded (docs/interop.md)
    config.write_text(f"transport:\n  type: http\n  url: http://127.0.0.1:{_closed_port()}\n  timeout: 2\n  retry:\n    total: 1\n")
    settings = load_settings({"OPENLINEAGE_CONFIG": str(config)}).with_home(tmp_path / "down")
    assert settings.openlineage
    domain = FraudDomain(rows_per_day=20)
    day = domain.start
    with pytest.MonkeyPatch.context() as mp, build_platform(settings) as platform, caplog.at_level(logging.WARNING):
        mp.delenv("OPENLINEAGE_URL", raising=False)
        mp.setenv("OPENLINEAGE_CONFIG", str(config))
        ol.EMITTER.reset()
        spec = platform.config.sources["transactions"]
        platform.landing.land(events.daily_batch(domain, "transactions", day), spec)
        load = load_partition(platform, spec, day)
        started = time.monotonic()
        again = load_partition(platform, spec, day)
        paused = time.monotonic() - started
    ol.EMITTER.reset()
    assert load.rows == 20 and again.snapshot_id == load.snapshot_id, "the pipeline ran as without lineage"
    warnings = [r.getMessage() for r in caplog.records if "OpenLineage" in r.getMessage()]
    assert len(warnings) == 1 and "could not emit START of canonical_load.transactions" in warnings[0], "one warning, then paused"
    assert paused < 5, f"emission paused after the first failure (took {paused:.1f}s)"


@pytest.mark.slow  # a fresh interpreter runs the pipeline
def test_off_by_default_and_never_imported(tmp_path: Path) -> None:
    code = (
        "import sys; from pathlib import Path\n"
        "from dsv_platform_tests.scenarios.support import World\n"
        "w = World.create(Path(sys.argv[1]), days=1, rows_per_day=10)\n"
        "assert not w.settings.openlineage\n"
        "print(sorted(m for m in sys.modules if m.startswith('openlineage')))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE")}
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, capture_output=True, text=True, timeout=300, cwd=Path(__file__).parents[2])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
