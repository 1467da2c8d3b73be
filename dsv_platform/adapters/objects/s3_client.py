"""The S3 client the object store uses, with a connection failure typed: :class:`ServiceUnreachableError` (exit 10).

botocore raises ``EndpointConnectionError`` (a ``ConnectionError``; timeouts are ``HTTPClientError``) when the endpoint does not answer; left
alone it reached the CLI as an internal error (exit 70). The message names the endpoint, never the credentials.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from botocore.exceptions import ConnectionError as BotoConnectionError
from botocore.exceptions import HTTPClientError

from dsv_platform.core.errors import ServiceUnreachableError


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
