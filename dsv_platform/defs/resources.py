"""Dagster resources, built from Settings; the same keys in the embedded default and in production."""

import dataclasses
from pathlib import Path

import dagster as dg

from dsv_platform.adapters.iceberg import CanonicalTables
from dsv_platform.adapters.landing import INDEX_FILE, LandingZone
from dsv_platform.adapters.encrypted_store import build_encrypted_store
from dsv_platform.adapters.object_store import ObjectStore, build_object_store
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core import sample_data
from dsv_platform.domain.generator import FraudDomain
from dsv_platform.settings import Settings, load_settings


class LandingResource(dg.ConfigurableResource):
    """The raw landing zone: the object store, the landing index under ``home`` and the drop folder."""

    home: str
    object_store: str
    drop_folder: str
    s3_endpoint_url: str | None = None
    s3_region: str = "us-east-1"

    def zone(self) -> LandingZone:
        settings = dataclasses.replace(
            load_settings({}).with_home(Path(self.home)),
            object_store=self.object_store,
            s3_endpoint_url=self.s3_endpoint_url,
            s3_region=self.s3_region,
        )
        return LandingZone(build_object_store(settings), Path(self.home) / INDEX_FILE)


class IcebergResource(dg.ConfigurableResource):
    """The canonical tables: a pyiceberg SQL catalog and its warehouse (folder or s3://)."""

    catalog_url: str
    warehouse: str
    s3_endpoint_url: str | None = None
    s3_region: str = "us-east-1"

    def tables(self) -> CanonicalTables:
        settings = dataclasses.replace(
            load_settings({}),
            iceberg_catalog_url=self.catalog_url,
            iceberg_warehouse=self.warehouse,
            s3_endpoint_url=self.s3_endpoint_url,
            s3_region=self.s3_region,
        )
        return CanonicalTables.from_settings(settings)


class RegistryResource(dg.ConfigurableResource):
    """The registry (SQLAlchemy URL) and the object store realizations are written to."""

    url: str
    home: str
    object_store: str
    s3_endpoint_url: str | None = None
    s3_region: str = "us-east-1"
    actor: str = "dagster"

    def settings(self) -> Settings:
        return dataclasses.replace(
            load_settings({}).with_home(Path(self.home)),
            registry_url=self.url,
            object_store=self.object_store,
            s3_endpoint_url=self.s3_endpoint_url,
            s3_region=self.s3_region,
            actor=self.actor,
        )

    def registry(self) -> Registry:
        return Registry.from_url(self.url)

    def store(self) -> ObjectStore:
        return build_encrypted_store(self.settings())


class SampleSourceResource(dg.ConfigurableResource):
    """The generated fraud source systems (deterministic from the seed)."""

    seed: int = 7
    rows_per_day: int = sample_data.ROWS_PER_DAY

    def domain(self) -> FraudDomain:
        return FraudDomain(seed=self.seed, rows_per_day=self.rows_per_day)


def build_resources(settings: Settings, *, rows_per_day: int = sample_data.ROWS_PER_DAY, seed: int = 7) -> dict[str, dg.ConfigurableResource]:
    """Every resource, keyed as the assets expect, from one Settings value."""
    return {
        "landing": LandingResource(
            home=str(settings.home),
            object_store=settings.object_store,
            drop_folder=str(settings.drop_folder),
            s3_endpoint_url=settings.s3_endpoint_url,
            s3_region=settings.s3_region,
        ),
        "iceberg": IcebergResource(
            catalog_url=settings.iceberg_catalog_url,
            warehouse=settings.iceberg_warehouse,
            s3_endpoint_url=settings.s3_endpoint_url,
            s3_region=settings.s3_region,
        ),
        "registry": RegistryResource(
            url=settings.registry_url,
            home=str(settings.home),
            object_store=settings.object_store,
            s3_endpoint_url=settings.s3_endpoint_url,
            s3_region=settings.s3_region,
            actor=settings.actor,
        ),
        "sample_source": SampleSourceResource(seed=seed, rows_per_day=rows_per_day),
    }
