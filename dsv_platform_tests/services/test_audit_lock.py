"""Issue 24 item 5, last part: audit checkpoints exported to a store the registry's credentials cannot overwrite, an S3 object under Object Lock.

On the suite's real S3 server (moto) and the real registries (SQLite and PostgreSQL): ``dsv audit --export s3://...``
writes the export with COMPLIANCE retention, and refuses a bucket without Object Lock before it signs anything. An insider
with the registry's database and the bucket's write credentials cuts the log's tail, puts a forged (consistent, validly
signed, truncated) export over the key as a newer version and tries to delete the locked one: S3 refuses the delete,
and ``--verify --against s3://...`` reads every locked version, not the latest, and names the cut.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from sqlalchemy import text

from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.cli.main import main
from dsv_platform_tests.fixtures.s3_server import S3Server
from dsv_platform_tests.services.test_audit_seal import home, rows, sql, verify
from dsv_platform_tests.services.test_publisher import backend_url

__all__ = ["backend_url", "home"]

pytestmark = pytest.mark.s3


@pytest.fixture
def s3(s3_env: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    monkeypatch.setenv("DSV_S3_ENDPOINT_URL", s3_env.endpoint_url)
    return s3_env


def locked_bucket(s3: S3Server) -> str:
    name = f"dsv-lock-{uuid.uuid4().hex[:16]}"
    s3.client().create_bucket(Bucket=name, ObjectLockEnabledForBucket=True)
    return name


def checkpoints(url: str) -> int:
    with Registry.from_url(url) as reg, reg.engine.connect() as conn:
        return int(conn.execute(text("SELECT COUNT(*) FROM audit_checkpoints")).scalar_one())


def export(capsys: pytest.CaptureFixture[str], url: str, *extra: str) -> tuple[int, str]:
    code = main(["audit", "--export", url, *extra])
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return code, out.out + out.err


def forged_from(doc: dict[str, Any], keep: int) -> bytes:
    """The insider's export: the honest one cut to ``keep`` entries with the checkpoints behind them; it verifies on its own."""
    cut = dict(doc, entries=doc["entries"][:keep], signatures=[s for s in doc["signatures"] if int(s["seq"]) <= keep])
    cut["checkpoints"] = [c for c in doc["checkpoints"] if int(c["seq"]) <= keep]
    return json.dumps(cut).encode()


def test_an_export_to_s3_is_written_under_compliance_lock(home: str, s3: S3Server, capsys: pytest.CaptureFixture[str]) -> None:
    bucket = locked_bucket(s3)
    code, out = export(capsys, f"s3://{bucket}/audit/export.json", "--lock-days", "3")
    assert code == 0 and f"s3://{bucket}/audit/export.json (version " in out and "COMPLIANCE lock until" in out, out
    head = s3.client().head_object(Bucket=bucket, Key="audit/export.json")
    assert head["ObjectLockMode"] == "COMPLIANCE"
    assert timedelta(days=2) < head["ObjectLockRetainUntilDate"] - datetime.now(UTC) <= timedelta(days=3)
    code, out = verify(capsys, "--against", f"s3://{bucket}/audit/export.json")
    assert code == 0 and "checked against every version of" in out and "under COMPLIANCE lock: 1" in out, out
    code = main(["audit", "--verify-export", f"s3://{bucket}/audit/export.json"])
    assert code == 0 and "audit export verifies" in capsys.readouterr().out


def test_a_bucket_without_object_lock_is_refused_before_anything_is_signed(
    home: str, s3: S3Server, capsys: pytest.CaptureFixture[str]
) -> None:
    bucket = s3.create_bucket()
    before = checkpoints(home)
    code, out = export(capsys, f"s3://{bucket}/export.json")
    assert code == 18 and f"bucket {bucket!r} does not have S3 Object Lock enabled" in out, out
    assert checkpoints(home) == before, "fail closed: no checkpoint was signed for an export that was not written"
    assert "Contents" not in s3.client().list_objects_v2(Bucket=bucket)
    code, out = export(capsys, f"s3://{locked_bucket(s3)}/export.json", "--lock-days", "0")
    assert code == 2 and "at least 1 day" in out, out


def test_the_insider_overwrites_the_key_and_cannot_delete_the_locked_version(
    home: str, s3: S3Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bucket, key = locked_bucket(s3), "audit/export.json"
    url = f"s3://{bucket}/{key}"
    assert export(capsys, url)[0] == 0
    honest = s3.client().list_object_versions(Bucket=bucket, Prefix=key)["Versions"][0]["VersionId"]
    doc = json.loads(s3.client().get_object(Bucket=bucket, Key=key)["Body"].read())
    n = len(rows(home))
    # the insider: cut the tail and its checkpoints, put a consistent export of the cut log over the key, delete the honest version
    sql(home, f"DELETE FROM audit_log WHERE seq >= {n - 1}", f"DELETE FROM audit_signatures WHERE seq >= {n - 1}",
        f"DELETE FROM audit_checkpoints WHERE seq >= {n - 1}")  # fmt: skip
    s3.client().put_object(Bucket=bucket, Key=key, Body=forged_from(doc, n - 2))
    with pytest.raises(ClientError) as refused:
        s3.client().delete_object(Bucket=bucket, Key=key, VersionId=honest)
    assert refused.value.response["Error"]["Code"] == "AccessDenied"
    (tmp_path / "latest.json").write_bytes(s3.client().get_object(Bucket=bucket, Key=key)["Body"].read())
    code, out = verify(capsys, "--against", str(tmp_path / "latest.json"))
    assert code == 0, "the latest version agrees with the cut log: reading only it would miss the cut"
    code, out = verify(capsys, "--against", url)
    assert code == 13, out
    assert f"does not verify against {url} version {honest}" in out and f"entry {n - 1} of the export is not in the registry" in out, out


def test_a_forged_newer_locked_version_does_not_extend_the_older_one(home: str, s3: S3Server, capsys: pytest.CaptureFixture[str]) -> None:
    bucket, key = locked_bucket(s3), "export.json"
    url = f"s3://{bucket}/{key}"
    assert export(capsys, url)[0] == 0
    doc = json.loads(s3.client().get_object(Bucket=bucket, Key=key)["Body"].read())
    n = len(doc["entries"])
    body = forged_from(doc, n - 2)  # locked too: the insider holds write credentials, and a lock does not say who wrote it
    s3.client().put_object(Bucket=bucket, Key=key, Body=body, ObjectLockMode="COMPLIANCE", ObjectLockRetainUntilDate=_tomorrow())
    assert main(["audit", "--verify-export", url]) == 13
    err = capsys.readouterr().err
    assert "does not extend" in err and f"entry {n - 1} of the export is not in the later version" in err, err


def test_a_key_with_no_locked_version_anchors_nothing(home: str, s3: S3Server, capsys: pytest.CaptureFixture[str]) -> None:
    bucket = locked_bucket(s3)
    assert export(capsys, f"s3://{bucket}/honest.json")[0] == 0
    body = s3.client().get_object(Bucket=bucket, Key="honest.json")["Body"].read()
    s3.client().put_object(Bucket=bucket, Key="unlocked.json", Body=body)  # the same bytes, without a lock
    code, out = verify(capsys, "--against", f"s3://{bucket}/unlocked.json")
    assert code == 13 and "none of its 1 version(s) is under COMPLIANCE Object Lock retention" in out, out
    code, out = verify(capsys, "--against", f"s3://{bucket}/missing.json")
    assert code == 11 and "no such object" in out, out


def _tomorrow() -> datetime:
    return datetime.now(UTC) + timedelta(days=1)


def test_the_retention_defaults_to_the_platform_setting(
    home: str, s3: S3Server, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bucket = locked_bucket(s3)
    monkeypatch.setenv("DSV_AUDIT_LOCK_DAYS", "2")
    assert export(capsys, f"s3://{bucket}/export.json")[0] == 0
    until = s3.client().head_object(Bucket=bucket, Key="export.json")["ObjectLockRetainUntilDate"]
    assert timedelta(days=1) < until - datetime.now(UTC) <= timedelta(days=2)
    monkeypatch.setenv("DSV_AUDIT_LOCK_DAYS", "a year")
    code, out = export(capsys, f"s3://{bucket}/export.json")
    assert code == 18 and "DSV_AUDIT_LOCK_DAYS must be a whole number >= 1, not 'a year'" in out, out
