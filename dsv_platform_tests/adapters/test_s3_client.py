"""S3 clients share the process's parsed service models, never their credentials, region or ``AWS_DATA_PATH``."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv_platform.adapters.objects.s3_client import s3_client, s3_session
from dsv_platform_tests.fixtures.s3_server import S3Server

pytestmark = pytest.mark.s3


def _loader(session: object) -> object:
    return session._session.get_component("data_loader")  # type: ignore[attr-defined]


def test_sessions_share_one_loader_and_keep_their_own_credentials_and_region(s3_env: S3Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("AWS_DATA_PATH", raising=False)
    ours = s3_session("s3://ours", region=s3_env.region, access_key=s3_env.access_key, secret_key=s3_env.secret_key)
    other = s3_session("s3://other", region="eu-west-1", access_key="another-key", secret_key="another-secret", session_token="t")
    client, other_client = s3_client(ours, "s3://ours", endpoint_url=s3_env.endpoint_url), s3_client(other, "s3://other", endpoint_url=s3_env.endpoint_url)

    loader = _loader(ours)
    assert _loader(other) is loader  # the parsed models (S3's took about 0.3 s a client) are read once
    paths = loader.search_paths  # type: ignore[attr-defined]
    assert len(paths) == len(set(paths)), paths  # boto3 adds its data folder per session: once is kept
    assert ours.get_credentials().access_key == s3_env.access_key and ours.get_credentials().token is None
    assert (other.get_credentials().access_key, other.get_credentials().token) == ("another-key", "t")
    assert (client.meta.region_name, other_client.meta.region_name) == (s3_env.region, "eu-west-1")

    bucket = s3_env.create_bucket()
    client.put_object(Bucket=bucket, Key="k", Body=b"shared models, own credentials")
    assert client.get_object(Bucket=bucket, Key="k")["Body"].read() == b"shared models, own credentials"

    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))  # another data path is another loader, searched first
    elsewhere = s3_session("s3://elsewhere", region=s3_env.region, access_key=s3_env.access_key, secret_key=s3_env.secret_key)
    assert _loader(elsewhere) is not loader and _loader(elsewhere).search_paths[0] == str(tmp_path)  # type: ignore[attr-defined]
