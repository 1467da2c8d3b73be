"""The S3 client every S3 adapter uses (object store, object lock, drop prefix), with a connection failure typed:
:class:`ServiceUnreachableError` (exit 10).

botocore raises ``EndpointConnectionError`` (a ``ConnectionError``; timeouts are ``HTTPClientError``) when the endpoint does not answer; left
alone it reached the CLI as an internal error (exit 70). The message names the endpoint, never the credentials.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import botocore.session
from botocore.config import Config
from botocore.exceptions import ConnectionError as BotoConnectionError
from botocore.exceptions import HTTPClientError
from botocore.loaders import Loader, create_loader

from dsv_platform.core.errors import EnvironmentSetupError, ServiceUnreachableError

_LOADERS: dict[str | None, Loader] = {}
_LOADERS_LOCK = threading.Lock()


class _SearchPaths(list[str]):
    """A shared loader's search paths: boto3 appends its own data folder for every session made on the loader; once is enough."""

    def append(self, path: str) -> None:
        if path not in self:
            super().append(path)


def _botocore_session() -> botocore.session.Session:
    """A new botocore session (its own credentials, region and configuration) whose data loader is the process's one for
    its ``AWS_DATA_PATH``: the service models it has parsed are kept (reading S3's made every client cost about 0.3 s)."""
    session = botocore.session.get_session()
    data_path = session.get_config_variable("data_path")
    with _LOADERS_LOCK:
        loader = _LOADERS.get(data_path)
        if loader is None:
            loader = _LOADERS[data_path] = create_loader(data_path)
            loader._search_paths = _SearchPaths(loader.search_paths)
    session.register_component("data_loader", loader)
    return session


def s3_session(
    location: str, *, region: str, access_key: str | None = None, secret_key: str | None = None, session_token: str | None = None
) -> boto3.session.Session:
    """A boto3 session with these credentials, else the default chain (``AWS_*``, a profile); none at all fails here, naming ``location``."""
    session = boto3.session.Session(
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        aws_session_token=session_token,
        region_name=region,
        botocore_session=_botocore_session(),
    )
    if session.get_credentials() is None:
        raise EnvironmentSetupError(f"{location}: no S3 credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or an AWS profile)")
    return session


def s3_client(session: boto3.session.Session, location: str, *, endpoint_url: str | None = None) -> ReachableClient:
    """The session's S3 client for ``location``: standard retries (5 attempts), path-style addressing at an ``endpoint_url`` (a
    loopback or on-premises server), and an endpoint that does not answer raised as :class:`ServiceUnreachableError`."""
    config = Config(retries={"max_attempts": 5, "mode": "standard"}, s3={"addressing_style": "path"} if endpoint_url else {})
    return ReachableClient(session.client("s3", endpoint_url=endpoint_url, config=config), location)


class ReachableClient:
    """A proxy of a boto3 S3 client: calls (and paginator pages) that cannot reach the endpoint raise ServiceUnreachableError."""

    def __init__(self, client: Any, location: str) -> None:
        self._client = client
        self._location = location

    def unreachable(self, exc: Exception) -> ServiceUnreachableError:
        endpoint = self._client.meta.endpoint_url
        return ServiceUnreachableError(f"object store {self._location}: the S3 endpoint {endpoint} does not answer ({type(exc).__name__}: {exc})")

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr
        if name == "get_paginator":
            return lambda operation: _Paginator(attr(operation), self)

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return attr(*args, **kwargs)
            except (BotoConnectionError, HTTPClientError) as exc:
                raise self.unreachable(exc) from exc

        return call


class _Paginator:
    def __init__(self, paginator: Any, client: ReachableClient) -> None:
        self._paginator, self._client = paginator, client

    def paginate(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        pages: Callable[[], Iterator[dict[str, Any]]] = lambda: iter(self._paginator.paginate(**kwargs))  # noqa: E731
        try:
            yield from pages()
        except (BotoConnectionError, HTTPClientError) as exc:
            raise self._client.unreachable(exc) from exc
