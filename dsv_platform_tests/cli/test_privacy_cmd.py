"""`dsv privacy delete / status / reconcile` and `dsv resolve` through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.bootstrap import build_encrypted_store
from dsv_platform.settings import load_settings
from dsv_platform_tests.services import publisher_worker as pw
from dsv_platform_tests.services.test_privacy import PARTS, SUBJECT
from dsv_platform_tests.services.test_publisher import backend_url, cli_env, dsv

__all__ = ["backend_url"]


def test_privacy_delete_through_the_cli(backend_url: str, tmp_path: Path) -> None:
    env = cli_env(tmp_path, backend_url)
    store = build_encrypted_store(load_settings(env))
    with Registry.from_url(backend_url) as reg:
        pw.register(reg)
        ref = pw.build(reg, store, "r-cli", parts=PARTS).ref

    dry = dsv("privacy", "delete", "--subject", SUBJECT, "--reason", "GDPR #9", "--dry-run", "--json", env=env)
    assert dry.returncode == 0, dry.stderr
    planned = json.loads(dry.stdout)
    assert planned["applied"] is False and {o["outcome"] for o in planned["outcomes"]} == {"crypto_erased", "deleted"}
    assert dsv("resolve", ref, env=env).returncode == 0  # a dry run changes nothing

    done = dsv("privacy", "delete", "--subject", SUBJECT, "--reason", "GDPR #9", "--json", env=env)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["new_request"] is True and doc["redaction_generation"] == 1 and SUBJECT not in done.stdout

    resolved = dsv("resolve", ref, "--json", env=env)
    assert resolved.returncode == 4, resolved.stderr
    failure = json.loads(resolved.stdout)
    assert failure["error"] == "REDACTED" and failure["detail"]["redaction_generation"] == 1

    rerun = dsv("privacy", "delete", "--subject", SUBJECT, "--reason", "GDPR #9", "--json", env=env)
    assert rerun.returncode == 0, rerun.stderr
    again = json.loads(rerun.stdout)
    assert again["new_request"] is False and again["redaction_generation"] == 1 and again["outcomes"] == doc["outcomes"]

    status = dsv("privacy", "status", "--subject", SUBJECT, "--json", env=env)
    assert status.returncode == 0, status.stderr
    st = json.loads(status.stdout)
    assert st["deleted"] is True and st["registry_generation"] == st["key_store_generation"] == 1
    assert dsv("privacy", "reconcile", env=env).returncode == 0
    bad = dsv("privacy", "delete", "--subject", SUBJECT, "--reason", "x", "--legal-basis", "nonsense", env=env)
    assert bad.returncode == 2 and "KIND=BASIS" in bad.stderr
