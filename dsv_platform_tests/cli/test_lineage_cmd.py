"""`dsv lineage`: provenance and impact from recorded lineage and manifests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.publication.manifest import Manifest, SourcePin
from dsv_platform.services.lineage.lineage import record_realization_lineage
from dsv_platform_tests.services import gc_support as gs

DSV = str(Path(sys.executable).with_name("dsv"))


def dsv(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DSV_HOME": str(home), "DSV_ACTOR": "tester"}
    return subprocess.run([DSV, *args], env=env, capture_output=True, text=True, timeout=120)


def test_lineage_cmd_provenance_and_impact(tmp_path: Path) -> None:
    reg = Registry.from_url(f"sqlite:///{tmp_path / 'registry.db'}")
    store = LocalObjectStore(tmp_path / "objects", fsync=False)
    h = gs.generate(reg, store, 4)
    _, m = h.published[0]
    doc = m.to_document()
    pinned = Manifest.from_document({**doc, "sources": [SourcePin("transactions", "11", "tag-a").to_document()]})
    # the realization as published, plus what the pipeline recorded around it
    assert record_realization_lineage(reg, m, m.dataset + ":" + m.version) > 0
    assert record_realization_lineage(reg, m) == 0, "idempotent"
    run = "f" * 64
    reg.record_lineage(
        [
            ("iceberg_snapshot", "transactions@11", "realization", m.manifest_hash, "pinned_by", {"tag": "tag-a"}),
            ("raw_batch", "b1@" + "e" * 64, "iceberg_snapshot", "transactions@11", "loaded_into", {}),
            ("realization", m.manifest_hash, "model_run", run, "trained", {}),
        ],
        actor="pipeline",
    )
    reg.add_retention_root("model_version", f"model_run:{run}", "prod fraud model", "ml")
    del pinned

    out = dsv(tmp_path, "lineage", f"model_run:{run}", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    nodes = {n["node"]: n for n in doc["nodes"]}
    assert nodes[f"realization:{m.manifest_hash}"]["state"] == "PUBLISHED"
    assert f"raw_batch:b1@{'e' * 64}" in nodes and "iceberg_snapshot:transactions@11" in nodes
    assert all(f"object:{p.object}" in nodes for p in m.partitions)
    assert [r["reason"] for r in doc["retention_roots"]] == ["prod fraud model"]

    out = dsv(tmp_path, "lineage", f"raw_batch:b1@{'e' * 64}", "--impact", "--json")
    impact = {n["node"] for n in json.loads(out.stdout)["nodes"]}
    assert {f"realization:{m.manifest_hash}", f"model_run:{run}"} <= impact
    shared = next(iter(gs.objects_of(m) & set(h.objects)))
    out = dsv(tmp_path, "lineage", shared, "--impact")
    assert out.returncode == 0 and m.manifest_hash in out.stdout
    assert dsv(tmp_path, "lineage", "nothing-here").returncode == 3
    # issue 23 item 8: the batch id alone names every landed revision; an unknown one is NOT_FOUND, never an empty impact
    by_id = dsv(tmp_path, "lineage", "raw_batch:b1", "--impact", "--json")
    assert by_id.returncode == 0, by_id.stderr
    assert json.loads(by_id.stdout)["start"] == [f"raw_batch:b1@{'e' * 64}"]
    assert {n["node"] for n in json.loads(by_id.stdout)["nodes"]} == impact
    # issue 23 item 10: a summary first, objects counted not listed, --depth and --objects
    text = dsv(tmp_path, "lineage", f"model_run:{run}")
    lines = text.stdout.splitlines()
    assert text.returncode == 0 and lines[1].startswith("  ") and " node(s): " in lines[1] and " object" in lines[1] and "step(s) deep" in lines[1]
    assert not any(line.strip().startswith("object:") for line in lines) and "object(s) not listed: --objects lists them" in text.stdout
    listed = dsv(tmp_path, "lineage", f"model_run:{run}", "--objects").stdout
    assert all(f"object:{p.object}" in listed for p in m.partitions)
    shallow = dsv(tmp_path, "lineage", f"model_run:{run}", "--depth", "1").stdout
    assert f"realization:{m.manifest_hash}" in shallow and "raw_batch:" not in shallow.split("\n", 2)[2]
    for unknown in ("raw_batch:b2", f"raw_batch:b1@{'0' * 64}"):
        missing = dsv(tmp_path, "lineage", unknown, "--impact")
        assert missing.returncode == 3 and "no raw batch" in missing.stderr, missing.stderr
