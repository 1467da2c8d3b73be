"""Relocating the embedded catalog's tables after their home was moved or copied (issue 25 item 8): Iceberg's rewrite-table-path.

The SQLite catalog and the Iceberg metadata name every file by absolute path. :func:`relocate_catalog` writes, for
every table whose metadata lives under another warehouse, new metadata under the new one: each manifest rewritten
with its data files' paths under the new location, each manifest list naming the rewritten manifests, and a new
metadata file (the next version) naming those lists, with the old location appended to ``dsv.relocated-from``.
Snapshot ids, sequence numbers, tags, branches and summaries are copied as they are; no data file is touched. All
tables' new pointers are committed in one SQLite transaction, so a killed relocation leaves the home as it was.
Details: docs/reliability.md ("A moved or copied home").
"""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
import uuid
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyiceberg.avro.file import AvroFile, AvroOutputFile
from pyiceberg.io import FileIO, load_file_io
from pyiceberg.serializers import FromInputFile
from pyiceberg.typedef import Record

from dsv_platform.adapters.iceberg.iceberg_files import RELOCATED_FROM
from dsv_platform.core.errors import EnvironmentSetupError


@dataclass(frozen=True)
class Relocation:
    table: str
    old_location: str
    new_location: str
    manifests: int
    snapshots: int


@dataclass(frozen=True)
class _Row:
    catalog: str
    namespace: str
    name: str
    metadata_location: str


def _rows(db: Path) -> list[_Row]:
    with closing(sqlite3.connect(f"file:{db.resolve().as_posix()}?mode=ro", uri=True)) as conn:
        try:
            found = conn.execute("SELECT catalog_name, table_namespace, table_name, metadata_location FROM iceberg_tables "
                                 "WHERE metadata_location IS NOT NULL").fetchall()  # fmt: skip
        except sqlite3.Error:  # no table yet: nothing was written anywhere
            return []
    return [_Row(*r) for r in found]


def _old_root(row: _Row) -> str:
    """The warehouse ``row``'s table was written under: its metadata file is ``<root>/<namespace>/<table>/metadata/<file>``."""
    suffix = re.escape(f"/{row.namespace}/{row.name}/metadata/")
    match = re.match(rf"^(file://.+?){suffix}[^/]+$", row.metadata_location)
    if match is None:
        raise EnvironmentSetupError(f"table {row.namespace}.{row.name}: metadata {row.metadata_location} is not laid out as "
                                    "<warehouse>/<namespace>/<table>/metadata/: it cannot be relocated")  # fmt: skip
    return match.group(1)


def _rebased(prefix: str, new: str) -> Callable[[str], str]:
    def rebase(path: str) -> str:
        return new + path[len(prefix) :] if path.startswith(prefix + "/") or path == prefix else path

    return rebase


def _position(struct: Any, name: str) -> int:
    """Where field ``name`` sits in a record of ``struct`` (-1: the format version has no such field)."""
    return next((i for i, f in enumerate(struct.fields) if f.name == name), -1)


def _rewrite_avro(io: FileIO, source: str, target: str, edit: Callable[[Record, Any], None]) -> int:
    """Copy the Avro file ``source`` to ``target`` (same schema, header metadata and codec), each record passed to
    ``edit(record, struct)`` first (``struct``: the file's record type); the new file's length in bytes."""
    with AvroFile[Record](io.new_input(source)) as reader:
        schema, meta = reader.schema, dict(reader.header.meta)
        records = list(reader)
    name = json.loads(meta.pop("avro.schema"))["name"]
    for record in records:
        edit(record, schema.as_struct())
    output = io.new_output(target)
    with AvroOutputFile[Record](output, schema, name, metadata=meta) as writer:
        writer.write_block(records)
    return len(output.to_input_file())


def _data_file_path(rebase: Callable[[str], str]) -> Callable[[Record, Any], None]:
    """A manifest entry's edit: its data file's ``file_path`` rebased."""

    def edit(entry: Record, struct: Any) -> None:
        at = _position(struct, "data_file")
        data_file, file_struct = entry[at], struct.fields[at].field_type
        path_at = _position(file_struct, "file_path")
        data_file[path_at] = rebase(data_file[path_at])

    return edit


def _read_metadata(io: FileIO, location: str) -> dict[str, Any]:
    with io.new_input(location).open() as stream:
        raw = stream.read()
    return json.loads(gzip.decompress(raw) if location.endswith(".gz.metadata.json") else raw)  # type: ignore[no-any-return]


def _rewrite_table(io: FileIO, row: _Row, old_root: str, new_root: str, token: str) -> tuple[str, Relocation]:
    """Write the relocated manifests, manifest lists and metadata file of one table; the new metadata file's location."""
    rebase, table = _rebased(old_root, new_root), f"{row.namespace}.{row.name}"
    current = rebase(row.metadata_location)
    document = _read_metadata(io, current)
    old_location, new_location = document["location"], rebase(document["location"])
    meta_dir = f"{new_location}/metadata"
    manifests: dict[str, tuple[str, int]] = {}  # old manifest path -> (new path, length)

    def manifest(record: Record, struct: Any) -> None:
        path_at, length_at = _position(struct, "manifest_path"), _position(struct, "manifest_length")
        content_at = _position(struct, "content")
        if content_at >= 0 and record[content_at] != 0:  # position deletes name data files inside their Parquet
            raise EnvironmentSetupError(f"table {table}: manifest {record[path_at]} lists delete files, which are not relocated")
        old = record[path_at]
        if old not in manifests:
            target = f"{meta_dir}/{Path(old).stem}-relocated-{token}.avro"
            manifests[old] = (target, _rewrite_avro(io, rebase(old), target, _data_file_path(rebase)))
        record[path_at], record[length_at] = manifests[old]

    for snap in document.get("snapshots", []):
        if "manifest-list" not in snap:
            raise EnvironmentSetupError(f"table {table}: snapshot {snap.get('snapshot-id')} has no manifest list (format v1), which is not relocated")
        target = f"{meta_dir}/{Path(snap['manifest-list']).stem}-relocated-{token}.avro"
        _rewrite_avro(io, rebase(snap["manifest-list"]), target, manifest)
        snap["manifest-list"] = target
    _rebase_strings(document, rebase)
    props = document.setdefault("properties", {})
    props[RELOCATED_FROM] = json.dumps([*json.loads(props.get(RELOCATED_FROM, "[]")), old_location])
    document.setdefault("metadata-log", []).append({"metadata-file": current, "timestamp-ms": document.get("last-updated-ms", 0)})
    new_metadata = f"{meta_dir}/{int(Path(current).name.split('-', 1)[0]) + 1:05d}-{uuid.uuid4()}.metadata.json"
    with io.new_output(new_metadata).create(overwrite=False) as out:
        out.write(json.dumps(document).encode())
    FromInputFile.table_metadata(io.new_input(new_metadata))  # it parses as pyiceberg will read it
    return new_metadata, Relocation(table, old_location, new_location, len(manifests), len(document.get("snapshots", [])))


def _rebase_strings(node: Any, rebase: Callable[[str], str]) -> None:
    """Every string in the metadata document under the old warehouse (metadata log, statistics files, path properties)."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in list(items):
        if isinstance(value, str):
            node[key] = rebase(value)
        else:
            _rebase_strings(value, rebase)


def relocate_catalog(catalog_url: str, warehouse: str) -> list[Relocation]:
    """Rewrite every table of the SQLite catalog at ``catalog_url`` whose metadata names another warehouse than ``warehouse``.

    The new metadata pointers are committed in one transaction, each only if the table was not changed meanwhile;
    when another process relocated it first, nothing is committed and the answer is empty.
    """
    db = Path(catalog_url.removeprefix("sqlite:///"))
    if not catalog_url.startswith("sqlite:///") or "://" in warehouse or not db.is_file():
        return []
    new_root = Path(warehouse).resolve().as_uri().rstrip("/")
    io, token, done = load_file_io({}, new_root), uuid.uuid4().hex[:8], list[tuple[_Row, str, Relocation]]()
    for row in _rows(db):
        if not row.metadata_location.startswith(new_root + "/"):
            old_root = _old_root(row)
            new_metadata, relocation = _rewrite_table(io, row, old_root, new_root, token)
            done.append((row, new_metadata, relocation))
    with closing(sqlite3.connect(db)) as conn, conn:
        for row, new_metadata, _ in done:
            changed = conn.execute(
                "UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = ? "
                "WHERE catalog_name = ? AND table_namespace = ? AND table_name = ? AND metadata_location = ?",
                (new_metadata, _rebased(_old_root(row), new_root)(row.metadata_location), row.catalog, row.namespace, row.name,
                 row.metadata_location),
            ).rowcount  # fmt: skip
            if changed != 1:
                conn.rollback()
                break
        else:
            return [r for _, _, r in done]
    if all(r.metadata_location.startswith(new_root + "/") for r in _rows(db)):
        return []  # another process relocated the home first: its metadata is the one committed
    raise EnvironmentSetupError(f"catalog {db}: a table's entry changed while the home was relocated; run `dsv home relocate` again")


def relocate_home(home: Path) -> list[Relocation]:
    """:func:`relocate_catalog` of the embedded default under ``home`` (``iceberg_catalog.db`` over ``warehouse/``), and of
    every embedded home one level inside it (the fraud demo's ``semantic-demo`` scratch world)."""
    home, done = home.resolve(), list[Relocation]()
    for folder in [home, *sorted(p.parent for p in home.glob("*/iceberg_catalog.db"))]:
        done += relocate_catalog(f"sqlite:///{folder / 'iceberg_catalog.db'}", str(folder / "warehouse"))
    return done


__all__ = ["RELOCATED_FROM", "Relocation", "relocate_catalog", "relocate_home"]
