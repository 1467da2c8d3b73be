"""`dsv demo` end to end in a subprocess: old realizations re-hash unchanged, rebuilds change where they should;
run twice on one home it reuses the home; then ``gc apply`` with no safety window and ``rehearse`` reconstruct every
retained model; a home built from another configuration is moved aside, never deleted."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dsv_platform import open_dataset
from dsv_platform.core.errors import RedactedError
from dsv_platform.settings import load_settings

pytestmark = pytest.mark.xdist_group("fraud_demo")  # one worker runs the module: the demo runs once, for every test

_DSV = """
import sys
from dsv_platform.core.publication.manifest import CodePin
from dsv_platform.services.publication import realization
clean = CodePin(realization.code_pin().commit, False)
realization.code_pin = lambda *a, **k: clean  # a dirty working tree would make every build NOT_REPRODUCIBLE_DIRTY
from dsv_platform.services.reproduction import code_pins
checkout_of = code_pins.checkout_of
code_pins.checkout_of = lambda path: {**checkout_of(path), "dirty": False}  # the same for a model run's trainer checkout
from dsv_platform.cli.main import main
sys.exit(main(sys.argv[1:]))
"""
"""`dsv` with the checkout's HEAD pinned clean, so a test run from a working tree with edits still builds reproducibly."""


def _dsv(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSV_") and k != "DAGSTER_HOME"}
    env["DSV_HOME"] = str(home)
    return subprocess.run([sys.executable, "-c", _DSV, *args], env=env, capture_output=True, text=True, timeout=900)


def _run_demo(home: Path) -> str:
    result = _dsv(home, "demo", "--days", "4", "--rows-per-day", "40")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    home = tmp_path_factory.mktemp("demo") / "home"
    return home, _run_demo(home)


def _events(stdout: str) -> dict[str, tuple[str, str, str, str, str]]:
    pattern = re.compile(
        r"== (?P<title>[^:\n]+)[^\n]*\n  old (?P<old>\S+)\n\s+content hash (?P<oldc>[0-9a-f]{64})  re-read from storage: (?P<reread>[0-9a-f]{64}) .*\n"
        r"  new (?P<new>\S+)\n\s+content hash (?P<newc>[0-9a-f]{64})"
    )
    return {m["title"]: (m["old"], m["oldc"], m["reread"], m["new"], m["newc"]) for m in pattern.finditer(stdout)}


def test_demo_old_hashes_unchanged_and_new_ones_changed_where_they_should(demo):
    _, stdout = demo
    found = _events(stdout)
    assert set(found) == {"late events", "backfill", "label definition v5 -> v6 applied to history (fraud_training_set", "renamed column", "malformed batch"}
    for _old, old_content, reread, _new, _new_content in found.values():
        assert reread == old_content
    for title in ("late events", "backfill"):
        old, old_content, _, new, new_content = found[title]
        assert new != old and new_content != old_content and new.startswith("fraud_training_set:v6@sha256:")
    label = next(v for k, v in found.items() if k.startswith("label definition"))
    assert label[0].startswith("fraud_training_set:v5@") and label[3].startswith("fraud_training_set:v6@") and label[1] != label[4]
    for title in ("renamed column", "malformed batch"):
        old, old_content, _, new, new_content = found[title]
        assert new_content == old_content
    assert "all checks ok" in stdout and "make ui" in stdout
    assert re.search(r"approval\n  fraud_training_set:v6@sha256:[0-9a-f]{64}: ELIGIBLE; approved by reviewer: ", stdout), "approved before production moved"
    assert "to fraud_training_set:v6@production" in stdout
    assert re.search(r"-> pinned snapshots:\n\s+\| transactions \| \d+ \| fraud_training_set-v6-[0-9a-f]{20} \|", stdout)


def test_demo_realizations_resolve_again_from_a_fresh_process(demo):
    home, stdout = demo
    settings = load_settings({"DSV_HOME": str(home)})
    first, final = re.search(r"fraud_training_set:v6 -> (\S+)", stdout)[1], re.findall(r"-> (fraud_training_set:v6@\S+)", stdout)[-1]
    ds = open_dataset(final, settings=settings)
    assert ds.verify_content() == ds.content_hash
    with pytest.raises(RedactedError):  # the demo's privacy deletion redacted every realization holding the account
        open_dataset(first, settings=settings)
    assert (home / "dagster").is_dir()


def test_demo_landing_goes_through_recorded_runs_with_their_checks(demo):
    import dagster as dg

    home, _ = demo
    with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
        runs = instance.get_runs()
        evaluations = [e for r in runs for e in instance.all_logs(r.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)]
        checks = {e.dagster_event.event_specific_data.check_name for e in evaluations}
        assert {"batch_is_readable", "rows_satisfy_contract", "splits_are_entity_disjoint"} <= checks
        ranged = [r for r in runs if r.tags.get("dagster/asset_partition_range_start") == "2026-06-01"]
        events = instance.all_logs(ranged[0].run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
        materialized = {e.dagster_event.asset_key.to_user_string() for e in events}
        assert {f"{kind}/{s}" for kind in ("raw", "canonical") for s in ("transactions", "chargebacks", "account_features")} <= materialized


def test_demo_impact_reaches_the_deployment_and_the_deletion_is_closed_by_the_retrain(demo):
    """Issue 27 items 1 and 4 in the demo: the bad batch's impact reaches the deployment; the deletion's obligation on the served
    model opens, a retrain closes it, the retrain is released and deployed; the CLI on the demo home reads the same."""
    home, stdout = demo
    served = re.search(r"deployed on fraud-scoring: deployment #1 by admin \(dsv deploy record fraud_model@sha256:([0-9a-f]{12})", stdout)[1]
    walk = stdout[stdout.index("incident walk: dsv lineage --impact raw_batch:daily@") :]
    assert re.search(r"datasets that included it \(\d+ realizations.*\n    fraud_training_set:v5@sha256: .*\n    fraud_training_set:v6@sha256: ", walk)
    assert re.search(rf"models trained on them \(\d+\):\n(    .*\n)*    fraud_model@sha256:{served}… \[ELIGIBLE, fraud_model@production\]", walk)
    deployed = re.search(rf"deployments that served them \(1\):\n    fraud-scoring: fraud_model@sha256:({served}[0-9a-f]{{52}}) \(serving now", walk)
    assert deployed, walk[:3000]
    subject = re.search(r"== privacy deletion: account (\S+) ", stdout)[1]
    opened = re.search(r"model obligations: (\d+) open, 0 overdue, 0 closed", stdout)
    assert opened and int(opened[1]) >= 1 and f"OPEN    fraud_model@sha256:{served}… (served on fraud-scoring): retrain_required" in stdout
    retrain = re.search(r"retrained fraud_model on it: run ([0-9a-f]{12})…", stdout)[1]
    closed = f"CLOSED  fraud_model@sha256:{served}… (served on fraud-scoring): retrain_required; retrained as {retrain}…, decided by admin"
    assert f"model obligations: 0 open, 0 overdue, {opened[1]} closed" in stdout and closed in stdout
    assert f"fraud_model@production: {served}… -> {retrain}… by compare-and-swap (generation 2" in stdout
    assert re.search(rf"deployed on fraud-scoring: deployment #2 by admin \(dsv deploy record fraud_model@sha256:{retrain}…", stdout)
    assert "released" in re.search(r"retired the \d+ superseded model\(s\) trained on REDACTED realizations: (.*)", stdout)[1]

    status = json.loads(_dsv(home, "privacy", "status", "--subject", subject, "--json").stdout)
    assert {o["state"] for o in status["model_obligations"]} == {"closed"}
    assert {o["decision"]["retrained_run"][:12] for o in status["model_obligations"]} == {retrain}
    query = re.search(r"incident walk: dsv lineage --impact (raw_batch:daily@[0-9a-f]+)…", stdout)[1]
    [batch] = [n for n in json.loads(_dsv(home, "lineage", "--impact", "raw_batch:daily", "--json").stdout)["start"] if n.startswith(query)]
    impact = json.loads(_dsv(home, "lineage", "--impact", batch, "--json").stdout)
    assert ("fraud-scoring", deployed[1], False) in [(d["target"], d["run_hash"], d["current"]) for d in impact["deployments"]]  # replaced by the retrain
    [current] = json.loads(_dsv(home, "deploy", "list", "--current", "--json").stdout)
    assert (current["target"], current["run_hash"][:12]) == ("fraud-scoring", retrain)


def test_demo_twice_on_one_home_reuses_it(demo):
    home, first = demo
    assert first.startswith("fresh DSV_HOME=")
    second = _run_demo(home)
    assert second.startswith(f"reusing DSV_HOME={home.resolve()} (") and "all checks ok" in second
    assert "ELIGIBLE; already ELIGIBLE (approved by reviewer" in second and "to fraud_training_set:v6@production" in second
    assert "already deleted on this home: request privacy-" in second and re.search(r"model obligations: 0 open, 0 overdue, [1-9]\d* closed", second)
    assert re.search(r"closed 0; [1-9]\d* already closed", second) and "already serving on fraud-scoring" in second
    base = re.search(r"fraud_training_set:v6 -> (\S+)", second)[1]
    final = re.findall(r"-> (fraud_training_set:v6@\S+)", first)[-1]
    assert base == final, "the same pinned inputs give the same realization"


def test_gc_apply_then_rehearse_on_the_demo_home_reconstructs_every_retained_model(demo):
    """After the demo (and its second run): GC with a zero safety window keeps every retained model's closure."""
    home, _ = demo
    applied = _dsv(home, "gc", "apply", "--yes", "--safety-window-hours", "0")
    assert applied.returncode == 0, applied.stderr[-2000:]
    rehearsed = _dsv(home, "rehearse", "--json")
    assert rehearsed.returncode == 0, rehearsed.stdout[-3000:] + rehearsed.stderr[-2000:]
    doc = json.loads(rehearsed.stdout)
    assert doc["retained_models"] >= 1
    assert doc["rehearsed"] == doc["retained_models"] == doc["reconstructable"], doc


def test_a_home_built_from_another_configuration_is_moved_aside(tmp_path, monkeypatch, capsys):
    """Moved aside, the old home's canonical tables are relocated there: they read while a fresh home is made in its place."""
    from dsv_platform.bootstrap import build_tables
    from dsv_platform.cli.context import open_platform
    from dsv_platform.examples.fraud.demo_home import prepare_home
    from dsv_platform.examples.fraud.specs import TRANSACTIONS
    from dsv_platform_tests.scenarios.support import World

    home = tmp_path / "home"
    rows = World.create(home, rows_per_day=10, days=2).tables.read(TRANSACTIONS).num_rows
    monkeypatch.setenv("DSV_HOME", str(home))
    for name in ("DSV_CONFIG_DIR", "DAGSTER_HOME"):
        monkeypatch.delenv(name, raising=False)
    with open_platform() as platform:
        d = platform.config.dataset("fraud_training_set", "v6")
        platform.registry.register_definition(d.name, d.version, contract=d.contract.to_document(), recipe={**d.recipe(), "seed": 999}, owner=d.owner)
    assert prepare_home() is False
    out = capsys.readouterr().out
    assert out.startswith(f"DSV_HOME={home.resolve()} is incompatible") and "fraud_training_set:v6" in out
    [moved] = [p for p in tmp_path.iterdir() if p.name.startswith("home.old-")]
    assert (moved / "registry.db").exists() and f"moved it aside to {moved}" in out and f"it reads as DSV_HOME={moved}" in out
    World.create(home, rows_per_day=10, days=1)  # the demo's fresh home, in the old one's place
    assert build_tables(load_settings({"DSV_HOME": str(moved)})).read(TRANSACTIONS).num_rows == rows
