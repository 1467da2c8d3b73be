"""Issue 27 item 4 end to end on a fraud world: a trained fraud model, `dsv privacy delete`, a rebuild and a real retrain close its obligation.

The model is trained by the fraud trainer (train_model); the deletion runs through the CLI on the world's home;
`dsv build`'s service (build_realization) rebuilds the dataset with the deleted subject excluded, the model is
retrained on it, and `dsv privacy close --retrained-by` accepts that run (after refusing the wrong kind of
evidence). The subject index, not the timing alone, proves the new training data lacks the subject.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from dsv_platform import open_dataset
from dsv_platform.examples.fraud import CONFIG_DIR
from dsv_platform.examples.fraud.model import MODEL_NAME, TRAINER
from dsv_platform.services.reproduction.model_run import train_model
from dsv_platform.settings import load_settings
from dsv_platform_tests.scenarios.support import World
from dsv_platform_tests.services.test_publisher import DSV

pytestmark = pytest.mark.slow  # a fraud world, two builds, two trainings, five dsv processes (~60 s)


def test_a_real_retrain_without_the_subject_closes_the_obligation(tmp_path: Path) -> None:
    config = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, config)
    yaml = config / "platform.yaml"  # the example's own model_governance replaced by a grace period
    kept = re.sub(r"(?m)^model_governance:.*\n", "", yaml.read_text(encoding="utf-8"))
    yaml.write_text(kept + f"model_governance: {{families: {{{MODEL_NAME}: {{continue_until_retrain: 14d}}}}}}\n", encoding="utf-8")
    env = {**os.environ, "DSV_HOME": str(tmp_path / "home"), "DSV_CONFIG_DIR": str(config), "DSV_SUBJECT_KEY_FILE": str(tmp_path / "subject-key")}
    for name in ("DSV_REGISTRY_URL", "DSV_OBJECT_STORE", "DSV_IDENTITY"):
        env.pop(name, None)
    world = World.create(settings=load_settings(env), days=3)
    before = world.build("v6")
    subject = str(open_dataset(before.ref, settings=world.settings).to_arrow().column("account_id")[0])
    affected = train_model(world.platform, before.ref, model_name=MODEL_NAME, trainer=TRAINER, seed=7).run_hash

    def dsv(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([DSV, *args], env=env, capture_output=True, text=True, timeout=300)

    deleted = dsv("privacy", "delete", "--subject", subject, "--reason", "GDPR #274", "--json")
    assert deleted.returncode == 0, deleted.stderr
    (obligation,) = json.loads(deleted.stdout)["model_obligations"]
    assert (obligation["model_run"], obligation["family"]) == (affected, MODEL_NAME)
    assert (obligation["policy"], obligation["grace_days"], obligation["state"]) == ("continue_until_retrain", 14, "open")

    after = world.build("v6")  # begun after the deletion: the subject is excluded
    assert after.manifest_hash != before.manifest_hash
    assert subject not in set(open_dataset(after.ref, settings=world.settings).to_arrow().column("account_id").to_pylist())
    retrained = train_model(world.platform, after.ref, model_name=MODEL_NAME, trainer=TRAINER, seed=7).run_hash
    world.platform.close()

    close = ("privacy", "close", "--subject", subject, "--model", affected[:16])
    refused = dsv(*close, "--not-served")
    assert refused.returncode == 2 and "closed by --retrained-by" in refused.stderr, refused.stderr
    closed = dsv(*close, "--retrained-by", retrained, "--reason", "retrained on the rebuild", "--json")
    assert closed.returncode == 0, closed.stderr
    doc = json.loads(closed.stdout)
    assert doc["state"] == "closed" and doc["decision"]["detail"]["trained_on"] == after.manifest_hash
    assert doc["decision"]["detail"]["subject_column"] == "account_id" and doc["decision"]["decided_by"] == "admin"
    status = dsv("privacy", "status", "--subject", subject)
    assert status.returncode == 0 and "0 open, 0 overdue, 1 closed" in status.stdout, status.stdout

    # the deletion's canonical snapshots are linked to those they replaced: a walk from a feature batch loaded before it reaches the rebuild
    provenance = json.loads(dsv("lineage", before.ref, "--json").stdout)
    features = sorted(n["node"] for n in provenance["nodes"] if n["kind"] == "raw_batch" and (n["via"] or "").startswith("iceberg_snapshot:account_features@"))
    reached = {n["node"] for n in json.loads(dsv("lineage", "--impact", features[0], "--json").stdout)["nodes"]}
    assert {f"realization:{before.manifest_hash}", f"realization:{after.manifest_hash}", f"model_run:{retrained}"} <= reached
