"""A small fraud world for scenario tests: on the embedded stores (real SQLite catalog and registry, local objects) by default, or on explicit Settings."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from dsv_platform.adapters.iceberg import CanonicalTables
from dsv_platform.services.canonical_load import build_labels, load_partition
from dsv_platform.adapters.landing import INDEX_FILE, LandingZone
from dsv_platform.adapters.object_store import ObjectStore
from dsv_platform.bootstrap import Platform, build_object_store, build_platform, build_tables
from dsv_platform.services.realization import RealizationBuild, build_realization
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.dataset_definition import DEFINITIONS_DIR, DatasetDefinition, load_definition
from dsv_platform.domain import FraudDomain, RawBatch, daily_batch
from dsv_platform.domain.labels import LABEL_DEFINITIONS
from dsv_platform.domain.sources import SOURCES
from dsv_platform import open_dataset
from dsv_platform.settings import Settings, load_settings

ROWS_PER_DAY = 60
DAYS = 8


def definition(version: str) -> DatasetDefinition:
    """The bundled fraud_training_set definition with a gate sized for the small world."""
    import dataclasses

    d = load_definition(DEFINITIONS_DIR / f"fraud_training_set_{version}.yaml")
    return dataclasses.replace(d, gates=dataclasses.replace(d.gates, rows_at_least=50))


@dataclass
class World:
    settings: Settings
    domain: FraudDomain
    zone: LandingZone
    tables: CanonicalTables
    registry: Registry
    store: ObjectStore
    _platform: Platform | None = None

    @property
    def platform(self) -> Platform:
        """The Platform of the same settings (services run on it; the encrypting store over the same objects)."""
        if self._platform is None:
            self._platform = build_platform(self.settings)
        return self._platform

    @classmethod
    def create(cls, home: Path | None = None, *, settings: Settings | None = None, rows_per_day: int = ROWS_PER_DAY, days: int = DAYS) -> "World":
        """The world on the embedded default under ``home``, or on explicit ``settings`` (e.g. PostgreSQL and S3)."""
        if (home is None) == (settings is None):
            raise TypeError("World.create takes exactly one of home or settings")
        settings = settings or load_settings({}).with_home(home)  # type: ignore[arg-type]
        store = build_object_store(settings)
        world = cls(settings, FraudDomain(rows_per_day=rows_per_day), LandingZone(store, settings.home / INDEX_FILE), build_tables(settings), Registry.from_url(settings.registry_url), store)
        world.ingest([daily_batch(world.domain, s, d) for d in world.domain.days(days) for s in SOURCES])
        return world

    def ingest(self, batches: Iterable[RawBatch]) -> None:
        """Land batches, load the affected canonical partitions, rebuild every label version."""
        touched: set[tuple[str, dt.date]] = set()
        for batch in batches:
            self.zone.land(batch)
            touched.add((batch.source, batch.day))
        for source, day in sorted(touched):
            load_partition(self.zone, self.tables, SOURCES[source], day)
        for label in LABEL_DEFINITIONS.values():
            build_labels(self.tables, label)

    def build(self, version: str = "v6") -> RealizationBuild:
        return build_realization(self.tables, self.registry, self.store, definition(version), actor="scenario")

    def reverify(self, build: RealizationBuild) -> str:
        """The content hash of ``build`` re-read from storage by its reference."""
        ds = open_dataset(build.ref, settings=self.settings)
        assert ds.manifest_hash == build.manifest_hash
        return ds.verify_content()
