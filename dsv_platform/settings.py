"""The one place that reads environment variables.

``load_settings()`` reads the ``DSV_*`` variables once into a frozen
:class:`Settings`. Everything else receives a ``Settings`` value. With no
variables set, the embedded default lives under ``./.dsv``: SQLite registry,
SQLite Iceberg catalog, local object store, SQLite Dagster instance.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from dsv_platform.core.errors import EnvironmentSetupError, is_secret, mask_url

DEFAULT_CONFIG_DIR = Path(__file__).resolve().parent / "examples" / "fraud" / "config"
"""The packaged fraud example's configuration folder (a path: the example is not imported)."""
_FOLLOW_HOME = Path()


@dataclass(frozen=True)
class Settings:
    home: Path
    registry_url: str
    object_store: str
    s3_endpoint_url: str | None
    s3_region: str
    iceberg_catalog_url: str
    iceberg_warehouse: str
    key_store: Path
    drop_folder: Path
    actor: str
    """A claim (``DSV_IDENTITY``, ``DSV_ACTOR`` or ``$USER``), never recorded: ``Platform.actor`` is the identity that proved its key."""
    config_dir: Path = field(default_factory=lambda: DEFAULT_CONFIG_DIR)
    dagster_home: Path = _FOLLOW_HOME
    """The Dagster instance folder (``DAGSTER_HOME``); left unset it is ``home / "dagster"``."""
    openlineage: bool = False
    """Emit OpenLineage run events (:func:`openlineage_configured`; the client reads its own configuration, docs/interop.md)."""
    identity: str | None = None
    """``DSV_IDENTITY``: the identity commands run as (docs/trust.md); unset, a non-strict home runs as its bootstrap ``admin``."""
    key_dir: Path | None = None
    """``DSV_KEY_DIR``: where private identity keys live; unset it is ``home / "identities"`` (:attr:`identity_key_dir`)."""
    strict: bool = False
    """``DSV_STRICT=1``: no bootstrap identity; every action needs an explicit grant (also a ``STRICT`` marker file in the home)."""
    trust_root: str | None = None
    """``DSV_TRUST_ROOT``: the trust root's Ed25519 public key (hex, or a file holding it) that keys and grants must chain to; unset, the
    home's ``trust_root`` file (written when the home bootstraps its registry), else none (docs/trust.md, "Certified keys and grants")."""
    env_cache: Path | None = None
    """``DSV_ENV_CACHE``: where ``dsv reproduce`` keeps venvs rebuilt from recorded locks; unset it is ``~/.cache/dsv/envs``."""
    build_jobs: int | None = None
    """``DSV_BUILD_JOBS``: partitions a dataset build prepares at once (1: one at a time); unset, one per core."""
    subject_key_file: Path | None = None
    """``DSV_SUBJECT_KEY_FILE``: the key of subject hashes, held apart from the registry and the home; unset ``~/.config/dsv/subject-key``."""
    build_engine: str = "duckdb"
    """``DSV_BUILD_ENGINE``: ``duckdb`` (out of core, the default) or ``arrow`` (the in-memory reference assembly)."""
    build_memory: int = 1 << 30
    """``DSV_BUILD_MEMORY``: the build engine's memory limit (``2GiB``, ``512MiB`` or bytes; default 1 GiB); it spills past it under ``home/spill``."""
    catalog_name: str | None = None
    """``DSV_CATALOG_NAME``: the pyiceberg catalog to load (its ``.pyiceberg.yaml`` entry); unset, platform.yaml's, else ``dsv``."""
    catalog: tuple[tuple[str, str], ...] = ()
    """``DSV_CATALOG_<KEY>``: pyiceberg catalog properties over platform.yaml's ``catalog:`` (:func:`catalog_from_env`; docs/iceberg.md)."""
    key_store_url: str | None = None
    """``DSV_KEY_STORE=postgresql+psycopg2://...``: the crypto-erasure keys in a PostgreSQL database of their own, apart from the
    data (production); unset, or a folder, the local key store at :attr:`key_store` (the embedded default). Its password is masked in repr."""
    drop_url: str | None = None
    """``DSV_DROP_FOLDER=s3://bucket/prefix``: the drop location is an S3 prefix (the sensor lists it; a landing run downloads the objects
    it lands); :attr:`drop_folder` is then unused. Unset, or a folder: the drop folder :attr:`drop_folder`."""
    audit_lock_days: int = 365
    """``DSV_AUDIT_LOCK_DAYS``: the COMPLIANCE retention, in days, of ``dsv audit --export s3://...`` (``--lock-days`` overrides it)."""
    dagster_url: str | None = None
    """``DSV_DAGSTER_URL``: the production instance's webserver (``http://host:3000``) ``dsv build``/``dsv ingest --submit`` send runs to;
    unset, ``--submit`` needs the URL. Its password, if any, is masked in repr and never printed."""

    def __repr__(self) -> str:
        """Every field, credentials masked: a URL's password and each secret catalog property are ``***`` (a Settings in a
        log line, a traceback or an error message never carries one; equality still compares the real values)."""
        shown = []
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, str):
                value = mask_url(value)
            elif f.name == "catalog":
                value = tuple((k, "***" if is_secret(k, v) else mask_url(v)) for k, v in value)
            shown.append(f"{f.name}={value!r}")
        return f"Settings({', '.join(shown)})"

    @property
    def spill_dir(self) -> Path:
        return self.home / "spill"

    def __post_init__(self) -> None:
        if self.dagster_home == _FOLLOW_HOME:
            object.__setattr__(self, "dagster_home", self.home / "dagster")

    @property
    def identity_key_dir(self) -> Path:
        return self.key_dir if self.key_dir is not None else self.home / "identities"

    @property
    def subject_key_path(self) -> Path:
        """Where the subject-hash key lives (:attr:`subject_key_file`, else outside any home: ``~/.config/dsv/subject-key``)."""
        return self.subject_key_file if self.subject_key_file is not None else Path.home() / ".config" / "dsv" / "subject-key"

    @property
    def object_store_is_s3(self) -> bool:
        return self.object_store.startswith("s3://")

    def with_home(self, home: Path) -> Settings:
        """The embedded default rooted at another folder (tests, demos); ``dagster_home`` follows unless set explicitly."""
        d = _defaults(home)
        follows = self.dagster_home == self.home / "dagster"
        return replace(
            self,
            home=Path(str(d["home"])),
            registry_url=str(d["registry_url"]),
            object_store=str(d["object_store"]),
            iceberg_catalog_url=str(d["iceberg_catalog_url"]),
            iceberg_warehouse=str(d["iceberg_warehouse"]),
            key_store=Path(str(d["key_store"])),
            drop_folder=Path(str(d["drop_folder"])),
            dagster_home=Path(str(d["dagster_home"])) if follows else self.dagster_home,
            catalog_name=None,
            catalog=(),
            key_store_url=None,
            drop_url=None,
        )


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


def _flag(name: str, text: str) -> bool:
    """A boolean variable: 1/true/yes/on or 0/false/no/off (or unset); anything else is an EnvironmentSetupError naming it."""
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise EnvironmentSetupError(f"{name}={text!r}: must be one of 1, true, yes, on (strict) or 0, false, no, off (not strict)")


def _jobs(text: str, name: str = "DSV_BUILD_JOBS") -> int | None:
    """``DSV_BUILD_JOBS`` (or ``name``): a whole number >= 1, or unset/empty (None: one per core)."""
    if not text.strip():
        return None
    if not text.strip().isdigit() or int(text) < 1:
        raise EnvironmentSetupError(f"{name} must be a whole number >= 1, not {text!r}")
    return int(text)


_ENGINES = ("duckdb", "arrow")
_SIZES = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 10**3, "mb": 10**6, "gb": 10**9}


def _engine(text: str) -> str:
    value = text.strip().lower() or "duckdb"
    if value not in _ENGINES:
        raise EnvironmentSetupError(f"DSV_BUILD_ENGINE={text!r}: must be one of {', '.join(_ENGINES)}")
    return value


def _size(name: str, text: str, default: int) -> int:
    """A byte size such as ``2GiB``, ``512MiB``, ``1500MB`` or ``1073741824``; at least 64 MiB."""
    value = text.strip().lower().replace(" ", "")
    if not value:
        return default
    number = value.rstrip("abgikm")
    unit = value[len(number) :]
    if not number.isdigit() or unit not in _SIZES or int(number) * _SIZES[unit] < 64 << 20:
        raise EnvironmentSetupError(f"{name}={text!r}: must be a size of at least 64MiB, such as 2GiB or 512MiB")
    return int(number) * _SIZES[unit]


def _key_store_url(text: str) -> str | None:
    """``DSV_KEY_STORE`` as a database URL (``postgresql+psycopg2://...``), None for a folder or unset; another URL is refused."""
    value = text.strip()
    if "://" not in value:
        return None
    if not value.startswith(("postgresql://", "postgresql+psycopg2://")):
        raise EnvironmentSetupError(f"DSV_KEY_STORE {mask_url(value)!r}: a key store is a folder or postgresql+psycopg2://USER@HOST/DB")
    return value


def _key_folder(text: str) -> str:
    """``DSV_KEY_STORE`` as a folder ('' for a database URL or unset)."""
    return "" if _key_store_url(text) is not None else text.strip()


def _drop_url(text: str) -> str | None:
    """``DSV_DROP_FOLDER`` as an S3 prefix (``s3://bucket/prefix``, no trailing slash), None for a folder or unset; another URL is refused."""
    value = text.strip()
    if "://" not in value:
        return None
    bucket = value[len("s3://") :].split("/", 1)[0] if value.startswith("s3://") else ""
    if not bucket:
        raise EnvironmentSetupError(f"DSV_DROP_FOLDER {mask_url(value)!r}: a drop location is a folder or s3://BUCKET/PREFIX")
    return value.rstrip("/")


def _drop_folder(text: str) -> str:
    """``DSV_DROP_FOLDER`` as a folder ('' for an S3 prefix or unset)."""
    return "" if _drop_url(text) is not None else text.strip()


def _defaults(home: Path) -> dict[str, object]:
    home = home.resolve()
    return {
        "home": home,
        "registry_url": f"sqlite:///{home / 'registry.db'}",
        "object_store": str(home / "objects"),
        "iceberg_catalog_url": f"sqlite:///{home / 'iceberg_catalog.db'}",
        "iceberg_warehouse": str(home / "warehouse"),
        "key_store": home / "keys",
        "drop_folder": home / "drop",
        "dagster_home": home / "dagster",
    }


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Read ``DSV_*`` variables (from ``environ`` or the process environment)."""
    env = os.environ if environ is None else environ
    home = Path(env.get("DSV_HOME") or ".dsv")
    defaults = _defaults(home)
    return Settings(
        home=defaults["home"],  # type: ignore[arg-type]
        registry_url=env.get("DSV_REGISTRY_URL") or str(defaults["registry_url"]),
        object_store=env.get("DSV_OBJECT_STORE") or str(defaults["object_store"]),
        s3_endpoint_url=env.get("DSV_S3_ENDPOINT_URL") or None,
        s3_region=env.get("DSV_S3_REGION") or "us-east-1",
        iceberg_catalog_url=env.get("DSV_ICEBERG_CATALOG_URL") or str(defaults["iceberg_catalog_url"]),
        iceberg_warehouse=env.get("DSV_ICEBERG_WAREHOUSE") or str(defaults["iceberg_warehouse"]),
        key_store=Path(_key_folder(env.get("DSV_KEY_STORE", "")) or defaults["key_store"]),  # type: ignore[arg-type]
        key_store_url=_key_store_url(env.get("DSV_KEY_STORE", "")),
        drop_folder=Path(_drop_folder(env.get("DSV_DROP_FOLDER", "")) or defaults["drop_folder"]),  # type: ignore[arg-type]
        drop_url=_drop_url(env.get("DSV_DROP_FOLDER", "")),
        actor=env.get("DSV_IDENTITY") or env.get("DSV_ACTOR") or env.get("USER") or "unknown",
        identity=env.get("DSV_IDENTITY") or None,
        key_dir=Path(env["DSV_KEY_DIR"]).resolve() if env.get("DSV_KEY_DIR") else None,
        strict=_flag("DSV_STRICT", env.get("DSV_STRICT", "")),
        trust_root=env.get("DSV_TRUST_ROOT") or None,
        config_dir=Path(env.get("DSV_CONFIG_DIR") or DEFAULT_CONFIG_DIR).resolve(),
        dagster_home=Path(env.get("DAGSTER_HOME") or defaults["dagster_home"]).resolve(),  # type: ignore[arg-type]
        openlineage=openlineage_configured(env),
        env_cache=Path(env["DSV_ENV_CACHE"]).expanduser().resolve() if env.get("DSV_ENV_CACHE") else None,
        build_jobs=_jobs(env.get("DSV_BUILD_JOBS", "")),
        subject_key_file=Path(env["DSV_SUBJECT_KEY_FILE"]).expanduser().resolve() if env.get("DSV_SUBJECT_KEY_FILE") else None,
        build_engine=_engine(env.get("DSV_BUILD_ENGINE", "")),
        build_memory=_size("DSV_BUILD_MEMORY", env.get("DSV_BUILD_MEMORY", ""), 1 << 30),
        catalog_name=env.get("DSV_CATALOG_NAME") or None,
        catalog=catalog_from_env(env),
        audit_lock_days=_jobs(env.get("DSV_AUDIT_LOCK_DAYS", ""), "DSV_AUDIT_LOCK_DAYS") or 365,
        dagster_url=env.get("DSV_DAGSTER_URL") or None,
    )


_CATALOG_PREFIX = "DSV_CATALOG_"


def catalog_from_env(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """``DSV_CATALOG_<KEY>=value`` as pyiceberg catalog properties, pyiceberg's own spelling (``PYICEBERG_CATALOG__<NAME>__<KEY>``).

    ``__`` is a dot and ``_`` a dash, lower case: ``DSV_CATALOG_S3__ACCESS_KEY_ID`` is ``s3.access-key-id``,
    ``DSV_CATALOG_URI`` is ``uri``. ``DSV_CATALOG_NAME`` names the catalog instead; an empty value is unset.
    """
    props = {}
    for name, value in env.items():
        if name.startswith(_CATALOG_PREFIX) and name != "DSV_CATALOG_NAME" and value:
            key = name[len(_CATALOG_PREFIX) :].lower().replace("__", ".").replace("_", "-")
            if not key or key.startswith(".") or key.endswith((".", "-")):
                raise EnvironmentSetupError(f"{name}: not a catalog property name (DSV_CATALOG_URI, DSV_CATALOG_S3__ENDPOINT, ...)")
            props[key] = value
    return tuple(sorted(props.items()))


@contextmanager
def pinned_timezone(name: str) -> Iterator[None]:
    """The process's ``TZ`` set to ``name`` for the block (and ``time.tzset``), the previous value restored after.

    Environment writes live here with the reads; services reach this through ``Platform.pinned_timezone``.
    """
    before = os.environ.get("TZ")
    os.environ["TZ"] = name
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()


def openlineage_configured(env: Mapping[str, str]) -> bool:
    """``OPENLINEAGE_URL``, ``OPENLINEAGE_CONFIG`` or an ``OPENLINEAGE__TRANSPORT__*`` variable is set, and ``OPENLINEAGE_DISABLED`` is not true."""
    if env.get("OPENLINEAGE_DISABLED", "").strip().lower() == "true":
        return False
    return bool(env.get("OPENLINEAGE_URL") or env.get("OPENLINEAGE_CONFIG")) or any(k.startswith("OPENLINEAGE__TRANSPORT") for k in env)
