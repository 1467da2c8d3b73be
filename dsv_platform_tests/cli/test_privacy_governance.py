"""Issue 27 item 4: governance of models trained on deleted data, through `dsv privacy delete / status / close` and `dsv audit`.

A deletion opens one obligation per model run trained on a redacted realization, under its family's policy
from platform.yaml (an undeclared family: retrain_required). Closing needs evidence: a run of the same family
trained on a realization begun after the deletion that the subject index finds without the subject, or (for
stop_serving) a recorded decision that the model is no longer served; a grace period that ended is overdue.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from pathlib import Path

import pytest

from dsv_platform.adapters.objects.encrypted_store import EncryptingObjectStore
from dsv_platform.adapters.registry.artifacts import MODEL_RUN, RunRecords
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.bootstrap import build_encrypted_store
from dsv_platform.core import canonical_json
from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.reproduction.model_run import run_manifest, run_manifest_hash
from dsv_platform.examples.fraud import CONFIG_DIR
from dsv_platform.services.lineage.lineage import record_model_lineage
from dsv_platform.services.privacy.privacy import PrivacyCoordinator
from dsv_platform.services.privacy.privacy_key import load_subject_key
from dsv_platform.services.publication.publisher import Publisher
from dsv_platform.settings import Settings, load_settings
from dsv_platform_tests.fixtures.cli_runner import DsvCli
from dsv_platform_tests.services import publisher_worker as pw
from dsv_platform_tests.services.test_privacy import PARTS, SUBJECT
from dsv_platform_tests.services.test_publisher import backend_url, cli_env, dsv

__all__ = ["backend_url"]

GOVERNANCE = """
model_governance:
  families:
    fraud_scorer: {continue_until_retrain: 30d}
    churn_model: stop_serving
"""


def with_governance(folder: Path, governance: str) -> Path:
    """A copy of the fraud configuration at ``folder`` whose ``model_governance`` section is ``governance`` (the example's own dropped)."""
    shutil.copytree(CONFIG_DIR, folder)
    path = folder / "platform.yaml"
    path.write_text(re.sub(r"(?m)^model_governance:.*\n", "", path.read_text(encoding="utf-8")) + governance, encoding="utf-8")
    return folder


def config_dir(tmp_path: Path) -> Path:
    """The fraud configuration with a model_governance section (the ranker family declares nothing)."""
    return with_governance(tmp_path / "config", GOVERNANCE)


def train(reg: Registry, store: EncryptingObjectStore, model: str, ref: str, *, seed: int = 1) -> str:
    """Record a complete model run of ``model`` on ``ref`` as train_model records one (run manifest object, run row, trained edge)."""
    manifest_hash = ref.split("@sha256:")[1]
    doc = run_manifest(model=model, trainer="tests:trainer", ref=ref, manifest_hash=manifest_hash, code={}, environment={},
                       parameters={}, seed=seed, metrics={"auc_ppm": 900_000}, weights_hash=f"{seed:064x}")  # fmt: skip
    run_hash = run_manifest_hash(doc)
    run_object = store.put(canonical_json.dumps(doc))
    runs = RunRecords(reg)
    run_id = runs.start(MODEL_RUN, model, producer="tests:trainer", intent=doc, actor="trainer")
    runs.complete(run_id, manifest_hash=run_hash, manifest=doc, files={"run_manifest.json": run_object})
    record_model_lineage(reg, manifest_hash, run_hash, model=model, ref=ref, run_object=run_object, actor="trainer")
    return run_hash


def publish(reg: Registry, store: EncryptingObjectStore, request_id: str, parts: list, **kw: object) -> str:
    return Publisher(reg, store, actor="builder", **kw).build(pw.request(request_id, logical_key=request_id, parts=parts)).ref  # type: ignore[arg-type]


def coordinator(reg: Registry, store: EncryptingObjectStore, settings: Settings) -> PrivacyCoordinator:
    config = load_config(settings.config_dir)
    return PrivacyCoordinator(reg, store, actor="privacy-officer", config=config, subject_key=load_subject_key(settings.subject_key_path))


def json_of(result) -> dict:  # type: ignore[no-untyped-def]
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def in_process(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> DsvCli:
    """``dsv`` in this process on ``env``'s ``DSV_*`` configuration (a :func:`cli_env`)."""
    return DsvCli(capsys, monkeypatch, {k: v for k, v in env.items() if k.startswith("DSV_")})


def by_family(doc: dict) -> dict[str, dict]:
    return {o["family"]: o for o in doc["model_obligations"]}


@pytest.mark.slow  # about 20 dsv processes (~75 s)
def test_deletion_obligations_through_the_cli(backend_url: str, tmp_path: Path) -> None:
    env = cli_env(tmp_path, backend_url, DSV_CONFIG_DIR=str(config_dir(tmp_path)), DSV_SUBJECT_KEY_FILE=str(tmp_path / "subject-key"))
    settings = load_settings(env)
    store = build_encrypted_store(settings)
    with Registry.from_url(backend_url) as reg:
        pw.register(reg)
        before = publish(reg, store, "r-before", PARTS)
        affected = {m: train(reg, store, m, before) for m in ("fraud_scorer", "churn_model", "ranker")}

        deleted = json_of(dsv("privacy", "delete", "--subject", SUBJECT, "--reason", "GDPR #27", "--json", env=env))
        opened = by_family(deleted)
        assert {f: (o["model_run"], o["policy"], o["grace_days"]) for f, o in opened.items()} == {
            "fraud_scorer": (affected["fraud_scorer"], "continue_until_retrain", 30),
            "churn_model": (affected["churn_model"], "stop_serving", None),
            "ranker": (affected["ranker"], "retrain_required", None),  # declares nothing: the fail-closed default
        }
        assert opened["ranker"]["policy_source"].startswith("built-in default")
        assert opened["churn_model"]["policy_source"] == "model_governance.families.churn_model"
        scorer = opened["fraud_scorer"]
        due = dt.datetime.fromisoformat(scorer["due_at"]) - dt.datetime.fromisoformat(scorer["opened_at"])
        assert due == dt.timedelta(days=30) and scorer["opened_by"] == "admin"  # the proven identity, not DSV_ACTOR
        rid = scorer["request_id"]
        rerun = json_of(dsv("privacy", "delete", "--subject", SUBJECT, "--reason", "GDPR #27", "--json", env=env))
        assert [o["obligation_id"] for o in rerun["model_obligations"]] == [o["obligation_id"] for o in deleted["model_obligations"]]

        status = json_of(dsv("privacy", "status", "--subject", SUBJECT, "--json", env=env))
        assert {o["family"]: o["state"] for o in status["model_obligations"]} == {"fraud_scorer": "open", "churn_model": "open", "ranker": "open"}

        # evidence that does not hold is refused, naming why, and nothing is recorded
        day, rows = PARTS[0]  # built after the deletion without the exclusion filter (other bytes than the erased part): still holds the subject
        leaky = publish(reg, store, "r-leaky", [(day, rows.slice(0, rows.num_rows - 1))])
        clean = publish(reg, store, "r-clean", PARTS, row_filter=coordinator(reg, store, settings).exclusion_filter())
        refusals = {
            "still holds the deleted subject": train(reg, store, "fraud_scorer", leaky, seed=2),
            "which is REDACTED": train(reg, store, "fraud_scorer", before, seed=3),
            "of family 'ranker'": train(reg, store, "ranker", clean, seed=4),
            "is the affected model itself": affected["fraud_scorer"],
            "no complete model run": "f" * 64,
        }
        for message, run in refusals.items():
            out = dsv("privacy", "close", "--subject", SUBJECT, "--model", affected["fraud_scorer"][:16], "--retrained-by", run, env=env)
            assert out.returncode == 2 and message in out.stderr, (message, out.stderr)
        wrong = dsv("privacy", "close", "--request-id", rid, "--model", affected["fraud_scorer"], "--not-served", env=env)
        assert wrong.returncode == 2 and "closed by --retrained-by" in wrong.stderr, wrong.stderr
        wrong = dsv("privacy", "close", "--request-id", rid, "--model", affected["churn_model"], "--retrained-by", affected["ranker"], env=env)
        assert wrong.returncode == 2 and "closed by --not-served" in wrong.stderr, wrong.stderr
        still = json_of(dsv("privacy", "status", "--subject", SUBJECT, "--json", env=env))
        assert {o["state"] for o in still["model_obligations"]} == {"open"}

        # a retrain of the family on a realization without the subject closes it; stop_serving closes on the decision
        retrained = train(reg, store, "fraud_scorer", clean, seed=5)
        closed = json_of(dsv("privacy", "close", "--subject", SUBJECT, "--model", affected["fraud_scorer"], "--retrained-by", retrained[:20],
                             "--reason", "retrained on the clean rebuild", "--json", env=env))  # fmt: skip
        decision = closed["decision"]
        assert closed["state"] == "closed" and decision["retrained_run"] == retrained and decision["decided_by"] == "admin"
        assert decision["detail"]["trained_on"] == clean.split("@sha256:")[1] and decision["detail"]["subject_in_training_data"] is False
        assert decision["detail"]["built_at_generation"] >= decision["detail"]["request_generation"] == 1
        again = dsv("privacy", "close", "--request-id", rid, "--model", affected["fraud_scorer"], "--retrained-by", retrained, env=env)
        assert again.returncode == 2 and "was closed by admin" in again.stderr, again.stderr
        assert dsv("privacy", "close", "--request-id", rid, "--model", affected["churn_model"], "--not-served", env=env).returncode == 0

        final = dsv("privacy", "status", "--subject", SUBJECT, env=env)
        assert final.returncode == 0 and "1 open, 0 overdue, 2 closed" in final.stdout, final.stdout
        assert f"OPEN     model {affected['ranker'][:16]} (ranker)" in final.stdout and "closed by retrained" in final.stdout

        audit = json_of(dsv("audit", "--json", env=env))
        entries = [(e["action"], e["target"]) for e in audit if e["action"].startswith("privacy.model_obligation")]
        assert sorted(entries) == sorted(
            [("privacy.model_obligation.open", f"model_run:{h}") for h in affected.values()]
            + [("privacy.model_obligation.close", f"model_run:{affected[f]}") for f in ("fraud_scorer", "churn_model")]
        )
        close = next(e for e in audit if e["action"] == "privacy.model_obligation.close" and e["detail"]["evidence"] == "retrained")
        assert close["identity"] == "admin" and close["detail"]["retrained_run"] == retrained and SUBJECT not in json.dumps(audit)


def test_a_grace_period_that_ended_is_overdue(backend_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    env = cli_env(tmp_path, backend_url, DSV_CONFIG_DIR=str(config_dir(tmp_path)), DSV_SUBJECT_KEY_FILE=str(tmp_path / "subject-key"))
    settings = load_settings(env)
    store = build_encrypted_store(settings)
    back = dt.datetime.now(dt.UTC) - dt.timedelta(days=31)
    with Registry.from_url(backend_url, clock=lambda: back) as reg:  # the deletion happened 31 days ago
        pw.register(reg)
        ref = publish(reg, store, "r-old", PARTS)
        run = train(reg, store, "fraud_scorer", ref)
        coordinator(reg, store, settings).delete(SUBJECT, "GDPR #31")
    cli = in_process(capsys, monkeypatch, env)
    done = cli("privacy", "status", "--subject", SUBJECT, "--json")
    assert done.code == 0, done.err
    (obligation,) = json.loads(done.out)["model_obligations"]
    assert obligation["model_run"] == run and obligation["state"] == "overdue"
    assert dt.datetime.fromisoformat(obligation["due_at"]) < dt.datetime.now(dt.UTC)
    text = cli("privacy", "status", "--subject", SUBJECT)
    assert "0 open, 1 overdue, 0 closed" in text.out and "OVERDUE" in text.out, text.out


def test_a_bad_policy_is_a_configuration_error_naming_file_key_and_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = with_governance(tmp_path / "config", "model_governance: {families: {fraud_scorer: keep_serving}}\n")  # more: core/test_model_governance.py
    cli = in_process(capsys, monkeypatch, cli_env(tmp_path, f"sqlite:///{tmp_path / 'r.db'}", DSV_CONFIG_DIR=str(folder)))
    out = cli("privacy", "status", "--subject", "x")
    assert out.code == 2 and f"{folder / 'platform.yaml'}: key 'model_governance.families.fraud_scorer'" in out.err, out.err
    assert "'keep_serving'" in out.err and "retrain_required, stop_serving or {continue_until_retrain: 30d}" in out.err, out.err
