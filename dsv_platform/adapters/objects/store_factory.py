"""Choose the object store backend for a location (a folder or ``s3://bucket/prefix``).

Kept apart from ``object_store.py`` so the backends import the interface and
nothing imports the backends but this factory (no import circle).
"""

from __future__ import annotations

from pathlib import Path

from dsv_platform.adapters.objects.encrypted_store import SEALED_SUFFIX, EncryptingObjectStore
from dsv_platform.adapters.objects.key_store import KeyStore, LocalKeyStore
from dsv_platform.adapters.objects.object_store import ObjectStore
from dsv_platform.core.errors import ConfigurationError


def build_object_store(location: str, *, s3_endpoint_url: str | None = None, s3_region: str = "us-east-1") -> ObjectStore:
    """The plain store at ``location``: a folder, or ``s3://bucket/prefix``."""
    if location.startswith("s3://"):
        from dsv_platform.adapters.objects.s3_store import S3ObjectStore

        bucket, _, prefix = location[len("s3://") :].partition("/")
        if not bucket:
            raise ConfigurationError(f"DSV_OBJECT_STORE {location!r} names no bucket: use s3://bucket/prefix")
        return S3ObjectStore(bucket, prefix, endpoint_url=s3_endpoint_url, region=s3_region)
    from dsv_platform.adapters.objects.local_store import LocalObjectStore

    return LocalObjectStore(location)


def build_key_store(folder: Path, url: str | None = None) -> KeyStore:
    """The key store: PostgreSQL at ``url`` (keys apart from the data, production), else the local folder (the embedded default)."""
    if url is not None:
        from dsv_platform.adapters.objects.key_store_pg import PostgresKeyStore

        return PostgresKeyStore(url)
    return LocalKeyStore(folder)


def build_encrypting_store(
    inner: ObjectStore,
    location: str,
    key_store: KeyStore,
    *,
    s3_endpoint_url: str | None = None,
    s3_region: str = "us-east-1",
    spool_dir: Path | None = None,
) -> EncryptingObjectStore:
    """The encrypting store over ``inner`` (rooted at ``location``): ciphertext under ``<location>/encrypted``, keys in ``key_store``.

    ``spool_dir`` is where a stream that cannot be read twice is spooled, sealed (None: the system's temporary folder).
    """
    sealed = build_object_store(f"{location.rstrip('/')}/{SEALED_SUFFIX}", s3_endpoint_url=s3_endpoint_url, s3_region=s3_region)
    return EncryptingObjectStore(inner, sealed, key_store, spool_dir=spool_dir)


__all__ = ["build_encrypting_store", "build_key_store", "build_object_store"]
