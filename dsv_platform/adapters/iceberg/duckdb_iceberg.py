"""Reading our canonical Iceberg tables with DuckDB, offline: extension loading, table locations, pinned snapshots.

DuckDB's ``iceberg`` extension (and the ``avro`` extension it needs) load from the
``duckdb-extension-iceberg`` / ``duckdb-extension-avro`` wheels, with autoinstall and
autoload off, so nothing is downloaded. A table is addressed by its current metadata
file; a pinned snapshot by id, or by an Iceberg tag resolved from that file.

Details: docs/interop.md
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

import pyarrow as pa

from dsv_platform.core.errors import ConfigurationError, DsvError, EnvironmentSetupError, NotFoundError

if TYPE_CHECKING:
    import duckdb

    from dsv_platform.adapters.iceberg.iceberg import CanonicalTables

EXTENSIONS = ("avro", "iceberg")  # load order: iceberg's initialization requires avro
OFFLINE = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}


class DuckDBUnavailableError(EnvironmentSetupError):
    """DuckDB or an extension wheel is not installed (``pip install 'dsv_platform[interop]'``)."""


@dataclass(frozen=True)
class TableLocation:
    """Where DuckDB finds one table: its metadata file, and the snapshot to read (None: the current one)."""

    table: str
    metadata_location: str
    snapshot_id: int | None = None
    ref: str | None = None

    def scan_sql(self) -> str:
        """The ``iceberg_scan(...)`` expression a user types in DuckDB."""
        at = "" if self.snapshot_id is None else f", snapshot_from_id={self.snapshot_id}"
        return f"iceberg_scan('{self.metadata_location}'{at})"

    def query(self) -> str:
        return f"SELECT * FROM {self.scan_sql()}"

    def as_dict(self) -> dict[str, Any]:
        return {"table": self.table, "metadata_location": self.metadata_location, "snapshot_id": self.snapshot_id, "ref": self.ref, "query": self.query()}


def extension_path(name: str) -> Path:
    """The extension binary the ``duckdb-extension-<name>`` wheel ships for the installed DuckDB version."""
    try:
        duckdb = importlib.import_module("duckdb")
        package = importlib.import_module(f"duckdb_extension_{name}")
    except ImportError as exc:
        raise DuckDBUnavailableError(f"reading Iceberg tables with DuckDB needs the interop extra: {exc}") from None
    folder = Path(str(package.__file__)).parent / "extensions"
    exact = folder / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    if exact.is_file():
        return exact
    found = sorted(folder.glob(f"*/{name}.duckdb_extension"))
    if not found:
        raise DuckDBUnavailableError(f"the duckdb-extension-{name} wheel holds no extension binary under {folder}")
    return found[-1]


def connect(database: str = ":memory:") -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the avro and iceberg extensions loaded from their wheels (never from the network), UTC session time zone."""
    try:
        import duckdb
    except ImportError as exc:
        raise DuckDBUnavailableError(f"reading Iceberg tables with DuckDB needs the interop extra: {exc}") from None
    con = duckdb.connect(database, config=dict(OFFLINE))
    for name in EXTENSIONS:
        con.execute(f"LOAD '{extension_path(name)}'")
    con.execute("SET TimeZone = 'UTC'")
    return con


def local_path(location: str) -> Path | None:
    """The local file of a ``file://`` URI or a plain path; None for a remote (``s3://``) location."""
    parsed = urlparse(location)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if parsed.scheme in ("", None) or len(parsed.scheme) == 1:  # a path (or a Windows drive letter)
        return Path(location)
    return None


def metadata_document(metadata_location: str) -> dict[str, Any]:
    """The table metadata JSON (plain json; only local warehouses: remote metadata is read by DuckDB itself)."""
    path = local_path(metadata_location)
    if path is None:
        raise ConfigurationError(f"{metadata_location}: only a local warehouse's metadata is read here; give --snapshot ID for a remote one")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DsvError(f"{metadata_location}: unreadable table metadata: {exc}") from None
    return dict(doc)


def ref_snapshot(metadata_location: str, ref: str) -> int:
    """The snapshot id an Iceberg ref (a tag such as a realization's pin, or a branch) names in the metadata file."""
    refs = metadata_document(metadata_location).get("refs") or {}
    if ref not in refs:
        known = ", ".join(sorted(refs)) or "none"
        raise NotFoundError(f"no ref {ref!r} in {metadata_location} (refs: {known})", ref=ref)
    return int(refs[ref]["snapshot-id"])


def table_location(tables: CanonicalTables, name: str, *, snapshot_id: int | None = None, ref: str | None = None) -> TableLocation:
    """Where DuckDB reads canonical table ``name``: its current metadata file, at ``snapshot_id`` or at the snapshot ``ref`` names."""
    if name not in tables.table_names():
        raise NotFoundError(f"no canonical table {name!r}; known: {sorted(tables.table_names())}", ref=name)
    location = str(tables.load(name).metadata_location)
    if ref is not None:
        resolved = ref_snapshot(location, ref)
        if snapshot_id is not None and snapshot_id != resolved:
            raise ConfigurationError(f"ref {ref!r} of {name} names snapshot {resolved}, not {snapshot_id}")
        snapshot_id = resolved
    return TableLocation(name, location, snapshot_id, ref)


def read_arrow(con: duckdb.DuckDBPyConnection, location: TableLocation) -> pa.Table:
    """Every row DuckDB reads at ``location`` as an Arrow table."""
    return con.sql(location.query()).to_arrow_table()


__all__ = ["DuckDBUnavailableError", "TableLocation", "connect", "extension_path", "read_arrow", "ref_snapshot", "table_location"]
