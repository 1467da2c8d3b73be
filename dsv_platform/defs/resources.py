"""Dagster resources: one PlatformResource configured with the values of Settings (the same keys in the embedded default and in production).

The resource builds one :class:`~dsv_platform.bootstrap.Platform` per
execution (``setup_for_execution``) and closes it afterwards, so assets share
one registry engine and the same key store the CLI uses.
"""

from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import PrivateAttr

from dsv_platform.bootstrap import Platform, build_platform
from dsv_platform.services.trust.trust import ensure_service_identity
from dsv_platform.settings import Settings

SERVICE_IDENTITY = "dagster"
"""The Dagster resource's default service identity (docs/trust.md)."""


class PlatformResource(dg.ConfigurableResource[Any]):
    """Registry, object store (with its key store), landing zone, canonical tables and configuration, from Settings values."""

    home: str
    registry_url: str
    object_store: str
    iceberg_catalog_url: str
    iceberg_warehouse: str
    key_store: str
    drop_folder: str
    config_dir: str
    dagster_home: str
    s3_endpoint_url: str | None = None
    s3_region: str = "us-east-1"
    actor: str = "dagster"
    openlineage: bool = False
    identity: str = SERVICE_IDENTITY
    """The service identity assets act as (docs/trust.md): a non-strict home provisions it on first use, a strict one needs its grants."""
    key_dir: str | None = None
    strict: bool = False

    _platform: Platform | None = PrivateAttr(default=None)

    @classmethod
    def for_settings(cls, settings: Settings) -> "PlatformResource":
        return cls(
            home=str(settings.home),
            registry_url=settings.registry_url,
            object_store=settings.object_store,
            iceberg_catalog_url=settings.iceberg_catalog_url,
            iceberg_warehouse=settings.iceberg_warehouse,
            key_store=str(settings.key_store),
            drop_folder=str(settings.drop_folder),
            config_dir=str(settings.config_dir),
            dagster_home=str(settings.dagster_home),
            s3_endpoint_url=settings.s3_endpoint_url,
            s3_region=settings.s3_region,
            actor=settings.actor,
            openlineage=settings.openlineage,
            identity=settings.identity or SERVICE_IDENTITY,  # runs a command starts act as its DSV_IDENTITY, else as the service
            key_dir=None if settings.key_dir is None else str(settings.key_dir),
            strict=settings.strict,
        )

    def settings(self) -> Settings:
        return Settings(
            home=Path(self.home),
            registry_url=self.registry_url,
            object_store=self.object_store,
            s3_endpoint_url=self.s3_endpoint_url,
            s3_region=self.s3_region,
            iceberg_catalog_url=self.iceberg_catalog_url,
            iceberg_warehouse=self.iceberg_warehouse,
            key_store=Path(self.key_store),
            drop_folder=Path(self.drop_folder),
            config_dir=Path(self.config_dir),
            dagster_home=Path(self.dagster_home),
            actor=self.actor,
            openlineage=self.openlineage,
            identity=self.identity,
            key_dir=None if self.key_dir is None else Path(self.key_dir),
            strict=self.strict,
        )

    def get(self) -> Platform:
        """This execution's Platform (built on first use, closed by ``teardown_after_execution``)."""
        if self._platform is None or self._platform.closed:
            self._platform = build_platform(self.settings())
            ensure_service_identity(self._platform, default=SERVICE_IDENTITY)
        return self._platform

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._platform is not None:
            self._platform.close()
            self._platform = None


def build_resources(settings: Settings) -> dict[str, dg.ConfigurableResource[Any]]:
    """Every resource, keyed as the assets expect, from one Settings value."""
    return {"platform": PlatformResource.for_settings(settings)}
