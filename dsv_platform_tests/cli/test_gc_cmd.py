"""`dsv gc` and `dsv retention` end to end through the console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform_tests.services import gc_support as gs

DSV = str(Path(sys.executable).with_name("dsv"))


def dsv(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DSV_HOME": str(home), "DSV_ACTOR": "tester"}
    return subprocess.run([DSV, *args], env=env, capture_output=True, text=True, timeout=120)


def test_gc_cmd_plan_why_apply_and_retention(tmp_path: Path) -> None:
    reg = Registry.from_url(f"sqlite:///{tmp_path / 'registry.db'}")
    store = LocalObjectStore(tmp_path / "objects", fsync=False)
    h = gs.generate(reg, store, 12)
    kept = h.published[0][1]
    later = (datetime.now(UTC) + timedelta(days=2)).isoformat()
    out = dsv(tmp_path, "retention", "add", "legal_hold", f"realization:{kept.manifest_hash}", "--reason", "case 1", "--owner", "legal", "--json")
    assert out.returncode == 0, out.stderr
    listed = json.loads(dsv(tmp_path, "retention", "list", "--json").stdout)
    assert [r["kind"] for r in listed] == ["legal_hold"]

    plan_file = tmp_path / "plan.json"
    out = dsv(tmp_path, "gc", "plan", "--json", "--now", later, "--out", str(plan_file))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["figures"]["object.collectable"] > 0

    kept_obj = next(iter(gs.objects_of(kept) - set(h.objects)))
    why = json.loads(dsv(tmp_path, "gc", "why", kept_obj, "--now", later, "--json").stdout)
    assert why[0]["keep"] and why[0]["root"]["kind"] == "legal_hold" and why[0]["root"]["reason"] == "case 1"
    assert [p["node"] for p in why[0]["path"]] == [f"realization:{kept.manifest_hash}", f"object:{kept_obj}"]
    gone = h.published[1][1]
    gone_obj = next(iter(gs.objects_of(gone) - set(h.objects)))
    why = json.loads(dsv(tmp_path, "gc", "why", gone_obj, "--now", later, "--json").stdout)
    assert not why[0]["keep"] and why[0]["action"] == "delete_object"
    assert f"realization:{gone.manifest_hash}" in why[0]["referenced_by"]
    text = dsv(tmp_path, "gc", "why", gone_obj, "--now", later).stdout
    assert "COLLECTABLE" in text

    dry = dsv(tmp_path, "gc", "apply", "--plan", str(plan_file))
    assert dry.returncode == 0 and "DRY RUN" in dry.stdout and store.exists(gone_obj)
    cost = json.loads(dsv(tmp_path, "gc", "cost", "--json", "--now", later).stdout)
    assert any(c["kind"] == "legal_hold" and c["bytes"] > 0 for c in cost)

    reg.add_retention_root("report", f"realization:{gone.manifest_hash}", "late report", "analytics")
    stale = dsv(tmp_path, "gc", "apply", "--plan", str(plan_file), "--yes")
    assert stale.returncode == 2 and "stale" in stale.stderr
    done = dsv(tmp_path, "gc", "apply", "--yes", "--now", later, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["objects_deleted"]
    assert store.exists(kept_obj) and store.exists(gone_obj)
    rid = listed[0]["id"]
    released = dsv(tmp_path, "retention", "release", str(rid), "--reason", "case closed")
    assert released.returncode == 0 and released.stdout.startswith(f"released retention root #{rid} (legal_hold "), released.stderr
    again = dsv(tmp_path, "retention", "release", str(rid), "--reason", "twice")
    assert again.returncode == 0 and "was released already" in again.stdout
    audited = [e for e in json.loads(dsv(tmp_path, "audit", "--json").stdout) if e["action"] == "retention.release"]  # once, by the proven identity
    expected = [(f"retention_root:{rid}", "case closed", "admin", "legal_hold")]
    assert [(e["target"], e["reason"], e["identity"], e["detail"]["kind"]) for e in audited] == expected
