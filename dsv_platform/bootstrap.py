"""The composition root: one :class:`Platform` per process, command or Dagster run.

``build_platform(settings)`` loads the configuration folder (sources,
datasets, label modules, platform options), opens the registry (migrations run once, here),
the object store with its encryption and key store, the landing zone and,
lazily (the pyiceberg catalog is costly), the canonical tables. Services
receive the Platform, never Settings. ``close()`` (or leaving the ``with``
block) releases what it opened.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsv_platform.adapters.objects.encrypted_store import EncryptingObjectStore
from dsv_platform.adapters.objects.key_store import KeyStore
from dsv_platform.adapters.objects.object_store import ObjectStore
from dsv_platform.adapters.objects.store_factory import build_encrypting_store, build_key_store
from dsv_platform.adapters.objects.store_factory import build_object_store as _build_store
from dsv_platform.adapters.registry.certificates import load_root
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.adapters.registry.signed_events import pin_root
from dsv_platform.core.config.platform_config import PlatformConfig, load_config
from dsv_platform.core.config.platform_options import PlatformOptions
from dsv_platform.core.errors import EnvironmentSetupError, mask_url
from dsv_platform.settings import Settings, pinned_timezone

if TYPE_CHECKING:  # imported where used: pyiceberg, pyarrow, pandas, pandera stay out of light commands (`dsv resolve`)
    from dsv_platform.adapters.iceberg.iceberg import CanonicalTables
    from dsv_platform.adapters.objects.landing import LandingZone

# A home's SQLite landing index from before migration 22, imported into the registry on first open
# (dsv_platform.adapters.objects.landing.INDEX_FILE, not imported here: start-up).
INDEX_FILE = "landing_index.db"
SPOOL_DIR = "spool"  # streams an encrypted put cannot read twice, spooled sealed under a throwaway key


def build_object_store(settings: Settings) -> ObjectStore:
    """The plain object store ``settings.object_store`` names (a folder or s3://bucket/prefix)."""
    return _build_store(settings.object_store, s3_endpoint_url=settings.s3_endpoint_url, s3_region=settings.s3_region)


def key_store_of(settings: Settings) -> KeyStore:
    """The key store ``DSV_KEY_STORE`` names: a PostgreSQL database of its own (production), else a folder (``settings.key_store``)."""
    return build_key_store(settings.key_store, settings.key_store_url)


def build_encrypted_store(settings: Settings, inner: ObjectStore | None = None) -> EncryptingObjectStore:
    """The encrypting store over the object store ``settings`` names, keys in the key store it names, spooled under the home."""
    return build_encrypting_store(
        inner if inner is not None else build_object_store(settings),
        settings.object_store,
        key_store_of(settings),
        s3_endpoint_url=settings.s3_endpoint_url,
        s3_region=settings.s3_region,
        spool_dir=settings.home / SPOOL_DIR,
    )


def build_tables(settings: Settings, options: PlatformOptions | None = None, **extra: str) -> CanonicalTables:
    """The canonical tables of the Iceberg catalog ``settings`` and platform.yaml's ``catalog:`` name (``DSV_CATALOG_*`` win)."""
    from dsv_platform.adapters.iceberg.iceberg import CanonicalTables

    options = options or PlatformOptions()
    return CanonicalTables.open(
        settings.iceberg_catalog_url,
        settings.iceberg_warehouse,
        name=settings.catalog_name or options.catalog_name,
        properties={**dict(options.catalog), **dict(settings.catalog)},
        s3_region=settings.s3_region,
        s3_endpoint_url=settings.s3_endpoint_url,
        extra=extra or None,
    )


def default_catalog(settings: Settings, options: PlatformOptions) -> bool:
    """No catalog configured beyond ``DSV_ICEBERG_*``: the SQL catalog at ``settings.iceberg_catalog_url`` (embedded: SQLite under the home)."""
    return not (settings.catalog_name or options.catalog_name or settings.catalog or options.catalog)


def build_landing(settings: Settings, store: ObjectStore | None = None, registry: Registry | None = None) -> LandingZone:
    """The landing zone: raw batches sealed through the encrypting store (crypto-erasable), the landing index in the registry
    (``registry``, else the one ``settings`` names); a home's SQLite landing index from before is imported on this first open."""
    from dsv_platform.adapters.objects.landing import LandingZone
    from dsv_platform.adapters.registry.landing_index import LandingIndex

    engine = registry.engine if registry is not None else Registry.from_url(settings.registry_url).engine
    index = LandingIndex(engine, legacy_index=settings.home / INDEX_FILE)
    return LandingZone(store if store is not None else build_encrypted_store(settings), index)


@dataclass(frozen=True)
class Scratch:
    """Canonical tables and a landing index in a private folder (raw rebuilds), reading the platform's raw objects."""

    tables: CanonicalTables
    landing: LandingZone


@dataclass(eq=False)
class Platform:
    """What a use case needs, opened once: configuration, registry, stores, landing, canonical tables (lazy)."""

    settings: Settings
    config: PlatformConfig
    registry: Registry
    objects: ObjectStore
    store: EncryptingObjectStore
    _tables_factory: Callable[[], CanonicalTables] = field(repr=False)
    _tables: CanonicalTables | None = field(default=None, repr=False)
    _landing: LandingZone | None = field(default=None, repr=False)
    _closed: bool = field(default=False, repr=False)

    @property
    def tables(self) -> CanonicalTables:
        if self._tables is None:
            from dsv_platform.adapters.registry.data_files import DataFileLedger

            self._tables = self._tables_factory()
            # the digest of every data file the platform writes, signed by who acts (docs/trust.md)
            self._tables.ledger = DataFileLedger.of(self.registry, prove=lambda: self.actor)
        return self._tables

    @property
    def landing(self) -> LandingZone:
        """The landing zone over the encrypting store: raw batches are crypto-erasable (its index is in the registry)."""
        if self._landing is None:
            self._landing = build_landing(self.settings, self.store, self.registry)
        return self._landing

    def existing_tables(self) -> CanonicalTables | None:
        """The canonical tables, or None when the embedded SQLite catalog was never created (GC inventory)."""
        url = self.settings.iceberg_catalog_url
        if default_catalog(self.settings, self.config.options) and url.startswith("sqlite:///") and not Path(url[len("sqlite:///") :]).exists():
            return None
        return self.tables

    def existing_landing(self) -> LandingZone | None:
        """The landing zone (its index is in the registry: there is always one; kept for the callers that allowed none)."""
        return self.landing

    @property
    def actor(self) -> str:
        """Who acts: the identity that proved its key (``DSV_IDENTITY``, else the home's ``admin``), never free text (docs/trust.md)."""
        from dsv_platform.services.trust.trust import current_identity  # here: services import this module

        return current_identity(self).name

    @property
    def home(self) -> Path:
        return self.settings.home

    def pinned_timezone(self, name: str) -> AbstractContextManager[None]:
        """``TZ`` pinned to ``name`` for a block (a producer's runner timezone), restored after (settings.py writes it)."""
        return pinned_timezone(name)

    @property
    def closed(self) -> bool:
        return self._closed

    def scratch(self, workdir: Path) -> Scratch:
        """Fresh canonical tables under ``workdir`` (a throwaway catalog) over this platform's raw objects."""
        local = self.settings.with_home(Path(workdir))
        return Scratch(tables=build_tables(local), landing=self.landing)

    def describe(self) -> dict[str, Any]:
        """Where this platform reads and writes (tests, diagnostics)."""
        return {
            "registry_url": self.settings.registry_url,
            "object_store": self.objects.location,
            "key_store": mask_url(self.settings.key_store_url) if self.settings.key_store_url else str(Path(self.settings.key_store).resolve()),
            "landing_index": mask_url(self.settings.registry_url),
            "iceberg_catalog_url": self.settings.iceberg_catalog_url,
            "config_dir": str(Path(self.config.folder).resolve()),
        }

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.registry.close()
        self.store.keys.close()
        self._tables = None

    def __enter__(self) -> Platform:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def owner_only(home: Path) -> None:
    """The embedded default keeps files owner-only: umask 0o077 for this process (0600 files, 0700 folders), home 0700.

    Applies to everything the process writes afterwards: objects, keys, landing index,
    registry and catalog SQLite files, Iceberg data and metadata files.
    """
    os.umask(0o077)
    if home.is_dir() and home.stat().st_uid == os.getuid():
        os.chmod(home, 0o700)


def _check_home(home: Path) -> None:
    """``DSV_HOME`` must be a folder this process can create and write: else one error naming it (ENVIRONMENT), before anything is opened."""
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EnvironmentSetupError(f"DSV_HOME {home}: cannot create the folder ({exc.strerror})") from exc
    if not os.access(home, os.W_OK | os.X_OK):
        raise EnvironmentSetupError(f"DSV_HOME {home}: the folder is not writable")


def build_platform(settings: Settings) -> Platform:
    """Load the configuration folder and open everything ``settings`` names; migrations run once, here.

    A wrong configuration raises a one-line ConfigError before anything is opened.
    """
    config = load_config(settings.config_dir)
    if not settings.object_store.startswith("s3://"):  # the embedded (local) default: before anything is created
        _check_home(settings.home)
        owner_only(settings.home)
    objects = build_object_store(settings)
    store = build_encrypted_store(settings, objects)
    registry = Registry.from_url(settings.registry_url, protected_aliases=config.options.protected_aliases)
    pin_root(registry.engine, load_root(settings.trust_root, settings.home))  # keys, grants and signed state must chain to it
    return Platform(
        settings=settings,
        config=config,
        registry=registry,
        objects=objects,
        store=store,
        _tables_factory=lambda: build_tables(settings, config.options),
    )


__all__ = ["Platform", "Scratch", "build_encrypted_store", "build_landing", "build_object_store", "build_platform", "build_tables", "key_store_of"]
