"""A small fraud world for scenario tests: on the embedded stores (real SQLite catalog and registry, local objects) by default, or on explicit Settings."""

from __future__ import annotations

import atexit
import datetime as dt
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from dsv_platform import open_dataset
from dsv_platform.adapters.iceberg.iceberg import CanonicalTables
from dsv_platform.adapters.iceberg.iceberg_relocate import relocate_home
from dsv_platform.adapters.objects.encrypted_store import EncryptingObjectStore
from dsv_platform.adapters.objects.landing import LandingZone
from dsv_platform.adapters.objects.object_store import ObjectStore
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.bootstrap import Platform, build_platform
from dsv_platform.core.config.dataset_definition import DatasetDefinition, load_definition
from dsv_platform.core.ingest.batch import RawBatch
from dsv_platform.examples.fraud import CONFIG_DIR
from dsv_platform.examples.fraud.events import daily_batch
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.examples.fraud.specs import SOURCES
from dsv_platform.services.ingest.canonical_load import load_partition
from dsv_platform.services.ingest.label_build import build_labels
from dsv_platform.services.publication.realization import RealizationBuild, build_realization
from dsv_platform.settings import Settings, load_settings

ROWS_PER_DAY = 60
DAYS = 8
SEALED: dict[str, EncryptingObjectStore] = {}
"""Object store location -> the world's encrypting store (realizations are written encrypted: tests reach their sealed copies)."""
INGESTED: dict[tuple[int, int], Path] = {}
"""(rows per day, days) -> a home this process ingested once and moved aside, never opened again: each embedded world is
a copy of it, relocated on open as a moved home is (docs/reliability.md), in a fraction of the ingest's time."""


def _ingested(rows_per_day: int, days: int) -> Path:
    """The home :data:`INGESTED` keeps for this size: ingested under ``made/``, then renamed ``kept/`` (so ``made/`` is gone)."""
    key = (rows_per_day, days)
    if key not in INGESTED:
        root = Path(tempfile.mkdtemp(prefix=f"dsv-world-{rows_per_day}x{days}-"))
        atexit.register(shutil.rmtree, root, True)
        made = root / "made" / "home"
        world = World._open(load_settings({}).with_home(made), rows_per_day)
        world.ingest([daily_batch(world.domain, s, d) for d in world.domain.days(days) for s in SOURCES])
        world.platform.close()
        (root / "made").rename(root / "kept")
        INGESTED[key] = root / "kept" / "home"
    return INGESTED[key]


def definition(version: str) -> DatasetDefinition:
    """The bundled fraud_training_set definition with a gate sized for the small world."""
    import dataclasses

    d = load_definition(CONFIG_DIR / "datasets" / f"fraud_training_set_{version}.yaml")
    return dataclasses.replace(d, gates=dataclasses.replace(d.gates, rows_at_least=50))


@dataclass
class World:
    settings: Settings
    domain: FraudDomain
    zone: LandingZone
    tables: CanonicalTables
    registry: Registry
    store: ObjectStore
    platform: Platform

    @classmethod
    def create(cls, home: Path | None = None, *, settings: Settings | None = None, rows_per_day: int = ROWS_PER_DAY, days: int = DAYS) -> World:
        """The world on the embedded default under ``home``, or on explicit ``settings`` (e.g. PostgreSQL and S3).

        An embedded world is a copy of the home this process ingested once for the size (:data:`INGESTED`): the same
        landed batches, canonical tables and labels, relocated to ``home``; a ``home`` already holding files is ingested anew.
        """
        if (home is None) == (settings is None):
            raise TypeError("World.create takes exactly one of home or settings")
        if home is not None and not (home.exists() and any(home.iterdir())):
            shutil.copytree(_ingested(rows_per_day, days), home, symlinks=True, dirs_exist_ok=True)
            relocate_home(home)
            return cls._open(load_settings({}).with_home(home), rows_per_day)
        world = cls._open(settings or load_settings({}).with_home(home), rows_per_day)  # type: ignore[arg-type]
        world.ingest([daily_batch(world.domain, s, d) for d in world.domain.days(days) for s in SOURCES])
        return world

    @classmethod
    def _open(cls, settings: Settings, rows_per_day: int) -> World:
        p = build_platform(settings)
        SEALED[p.objects.location] = p.store
        return cls(settings, FraudDomain(rows_per_day=rows_per_day), p.landing, p.tables, p.registry, p.objects, p)

    def ingest(self, batches: Iterable[RawBatch]) -> None:
        """Land batches, load the affected canonical partitions, rebuild every label version."""
        touched: set[tuple[str, dt.date]] = set()
        for batch in batches:
            for record in self.zone.land_all(batch, SOURCES[batch.source]):
                touched.add((batch.source, record.day))
        for source, day in sorted(touched):
            load_partition(self.platform, SOURCES[source], day)
        for label in self.platform.config.labels["fraud"].values():
            build_labels(self.platform, label)

    def build(self, version: str = "v6") -> RealizationBuild:
        return build_realization(self.platform, definition(version))

    def delete_object(self, digest: str) -> None:
        """Delete an object's stored bytes (an encrypted object's sealed copy) without erasing its key."""
        sealed = self.platform.store.keys.sealed(digest)
        if sealed is not None:
            self.platform.store.sealed_store.delete(sealed)
        else:
            self.store.delete(digest)

    def reverify(self, build: RealizationBuild) -> str:
        """The content hash of ``build`` re-read from storage by its reference."""
        ds = open_dataset(build.ref, settings=self.settings)
        assert ds.manifest_hash == build.manifest_hash
        return ds.verify_content()
