"""pyiceberg's SQL catalog, with each table metadata file read and parsed once per process.

pyiceberg's ``SqlCatalog.load_table`` reads the catalog row, then reads and parses the metadata file it names, every
time: a canonical partition load does about fifteen loads (pyiceberg's own commit loads the table again), and the file
grows with the table's snapshots, so the parsing dominated a load's fixed cost. An Iceberg metadata file is written once,
under a name no other file takes, and never changed (every commit writes a new one; relocation writes new ones too), and
the parsed ``TableMetadata`` is an immutable model: it is kept by location. The catalog row is still read on every load,
so a commit by another process is seen at once; a table loaded twice is two ``Table`` objects over the same metadata.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import IcebergTables
from pyiceberg.catalog.sql import SqlCatalog as PyicebergSqlCatalog
from pyiceberg.io import load_file_io
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata

KEPT = 128
"""Parsed metadata files kept per process (the least recently used goes first)."""

_parsed: OrderedDict[str, TableMetadata] = OrderedDict()
_lock = threading.Lock()


class SqlCatalog(PyicebergSqlCatalog):
    """``SqlCatalog`` whose ``load_table`` parses a metadata file it has parsed before only once (see the module docstring)."""

    def _convert_orm_to_iceberg(self, orm_table: IcebergTables) -> Table:
        location, namespace, name = orm_table.metadata_location, orm_table.table_namespace, orm_table.table_name
        if not (location and namespace and name):
            return super()._convert_orm_to_iceberg(orm_table)  # its NoSuchTableError naming what is missing
        metadata = metadata_at(location, self.properties)
        return Table(
            identifier=(*Catalog.identifier_to_tuple(namespace), name),
            metadata=metadata,
            metadata_location=location,
            io=self._load_file_io(metadata.properties, location),
            catalog=self,
        )


def metadata_at(location: str, properties: dict[str, str]) -> TableMetadata:
    """The table metadata in the file at ``location``, parsed on its first use in this process."""
    with _lock:
        found = _parsed.get(location)
        if found is not None:
            _parsed.move_to_end(location)
            return found
    metadata = FromInputFile.table_metadata(load_file_io(properties=properties, location=location).new_input(location))
    with _lock:
        _parsed[location] = metadata
        while len(_parsed) > KEPT:
            _parsed.popitem(last=False)
    return metadata


__all__ = ["KEPT", "SqlCatalog", "metadata_at"]
