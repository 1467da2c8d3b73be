"""`dsv resolve / versions / verify` through the real CLI: every resolution failure kind with its exit code."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import update

from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.publication.states import RealizationState
from dsv_platform_tests.services import publisher_worker as pw
from dsv_platform_tests.services.test_datasets import flip_byte
from dsv_platform_tests.services.test_publisher import backend_url, cli_env, dsv

__all__ = ["backend_url"]

S = RealizationState
BASE = f"{pw.NAME}:{pw.VERSION}"


def failure(result: subprocess.CompletedProcess[str], kind: str, code: int) -> dict[str, object]:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("dsv: error:"), result.stderr
    doc = json.loads(result.stdout)
    assert doc["error"] == kind and doc["exit_code"] == code
    return doc


def test_resolution_failures_through_the_cli(backend_url: str, tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "objects")
    with Registry.from_url(backend_url) as reg:
        pw.register(reg)
        built = {
            tag: pw.build(reg, store, f"r-{tag}", logical_key=tag, parts=pw.partitions(seed=seed))
            for tag, seed in [("redact", 3), ("expire", 5), ("good", 7), ("tamper", 9)]
        }
        h = {tag: b.manifest.manifest_hash for tag, b in built.items()}
        reg.approve(built["good"].realization.id, reason="reviewed", actor="t")  # production points only at ELIGIBLE realizations
        reg.set_alias(pw.NAME, pw.VERSION, "production", h["good"], expect=None, actor="t")
        gen = reg.raise_redaction_generation("subject-hash", reason="erasure request", actor="privacy")
        reg.transition(built["redact"].realization.id, S.REDACTED, reason="erasure", actor="privacy", redaction_generation=gen)
        reg.transition(built["expire"].realization.id, S.EXPIRED, reason="retention", actor="gc")
        with reg.engine.begin() as conn:
            conn.execute(
                update(s.manifests)
                .where(s.manifests.c.manifest_hash == h["tamper"])
                .values(
                    canonical_json=conn.execute(s.manifests.select().where(s.manifests.c.manifest_hash == h["tamper"]))
                    .mappings()
                    .one()["canonical_json"]
                    .replace('"rows":', '"rows": ', 1)
                )
            )
    env = cli_env(tmp_path, backend_url)

    ok = dsv("resolve", f"{BASE}@production", "--json", env=env)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["manifest_hash"] == h["good"]
    versions = dsv("versions", pw.NAME, "--json", env=env)
    assert versions.returncode == 0, versions.stderr
    assert {(v["manifest_hash"], v["state"]) for v in json.loads(versions.stdout)} == {
        (h["redact"], "REDACTED"),
        (h["expire"], "EXPIRED"),
        (h["good"], "ELIGIBLE"),  # approved before production pointed at it
        (h["tamper"], "PUBLISHED"),
    }

    unknown_hash = "0" * 64
    for ref in ["no_such_dataset:v1", f"{pw.NAME}:v9", f"{BASE}@sha256:{unknown_hash}", f"{BASE}@staging"]:
        failure(dsv("resolve", ref, "--json", env=env), "NOT_FOUND", 3)
    doc = failure(dsv("resolve", f"{BASE}@sha256:{h['redact']}", "--json", env=env), "REDACTED", 4)
    assert doc["detail"]["redaction_generation"] == gen  # type: ignore[index]
    failure(dsv("resolve", f"{BASE}@sha256:{h['expire']}", "--json", env=env), "EXPIRED", 5)
    failure(dsv("resolve", f"{BASE}@sha256:{h['tamper']}", "--json", env=env), "CORRUPT", 6)

    good = dsv("verify", f"{BASE}@production", "--json", env=env)
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["content_hash"] == built["good"].manifest.content_hash
    victim = built["good"].manifest.partitions[-1]
    flip_byte(store.path(victim.object))
    bad = dsv("verify", f"{BASE}@production", env=env)
    assert bad.returncode == 6, (bad.stdout, bad.stderr)
    assert victim.key in bad.stderr and victim.object in bad.stderr and bad.stderr.count("\n") == 1
    failure(dsv("verify", f"{BASE}@production", "--json", env=env), "CORRUPT", 6)

    with Registry.from_url(backend_url) as reg:
        reg.set_allowed_readers(pw.NAME, pw.VERSION, ["fraud-team"])
    for name in ("intruder", "fraud-team"):  # readers are proven identities (a DSV_ACTOR claim names no one, docs/trust.md)
        assert dsv("identity", "create", name, env=env).returncode == 0
        grant = dsv("grants", "add", name, "consumer", "--definition", BASE, "--reason", "reads the protocol", env=env)
        assert grant.returncode == 0, grant.stderr
    failure(dsv("resolve", f"{BASE}@production", "--json", env={**env, "DSV_IDENTITY": "intruder"}), "ACCESS_DENIED", 7)
    allowed = dsv("resolve", f"{BASE}@sha256:{h['tamper']}", env={**env, "DSV_IDENTITY": "fraud-team"})
    assert allowed.returncode == 6  # the reader is allowed; the manifest is still corrupt


@pytest.mark.s3
def test_verify_flipped_byte_on_s3(s3_server, s3_bucket: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from dsv_platform.adapters.objects.object_store import object_key
    from dsv_platform.adapters.objects.s3_store import S3ObjectStore

    url = f"sqlite:///{tmp_path / 'registry.db'}"
    store = S3ObjectStore(
        s3_bucket, "dsv", endpoint_url=s3_server.endpoint_url, region=s3_server.region, access_key=s3_server.access_key, secret_key=s3_server.secret_key
    )
    with Registry.from_url(url) as reg:
        pw.register(reg)
        built = pw.build(reg, store, "r-s3")
    env = {**cli_env(tmp_path, url), **s3_server.env(), "DSV_OBJECT_STORE": f"s3://{s3_bucket}/dsv", "DSV_S3_ENDPOINT_URL": s3_server.endpoint_url}
    ok = dsv("verify", built.ref, env=env)
    assert ok.returncode == 0, ok.stderr
    victim = built.manifest.partitions[0]
    key = store.key(object_key(victim.object))
    client = s3_server.client()
    data = bytearray(client.get_object(Bucket=s3_bucket, Key=key)["Body"].read())
    data[len(data) // 2] ^= 0xFF
    client.put_object(Bucket=s3_bucket, Key=key, Body=bytes(data))
    bad = dsv("verify", built.ref, env=env)
    assert bad.returncode == 6, (bad.stdout, bad.stderr)
    assert victim.key in bad.stderr and victim.object in bad.stderr
