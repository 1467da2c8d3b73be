"""Issue 25 item 3: a completed deletion leaves the subject's identifier nowhere in the canonical tables' files, decoded.

Raw bytes are not enough: Iceberg manifests are deflate-compressed Avro and Parquet pages are compressed.
Every file of the warehouse is decoded (every Avro block inflated, every Parquet file's rows and every
footer's column statistics read, gzip metadata inflated) and searched for the subject. The subject is chosen
as a column bound of a data file, so before the deletion it is in a manifest (the scan proves it finds it);
a row-level delete writes DELETED manifest entries that keep the removed file's bounds, and on main those
stay in the current snapshot. Run on the embedded default and on PostgreSQL (catalog, registry) + S3 (warehouse).
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from dsv_platform.examples.fraud.specs import SOURCES
from dsv_platform.services.privacy.privacy import build_coordinator
from dsv_platform.settings import Settings, load_settings
from dsv_platform_tests.fixtures.production_stores import production_stores
from dsv_platform_tests.fixtures.s3_server import S3Server
from dsv_platform_tests.scenarios.support import World


def _long(data: bytes, i: int) -> tuple[int, int]:
    shift = n = 0
    while True:
        byte = data[i]
        i += 1
        n |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (n >> 1) ^ -(n & 1), i


def avro_plain(data: bytes) -> bytes:
    """An Avro object container's header and every block, inflated (the deflate codec) or as stored."""
    i, meta = 4, {}
    while True:
        count, i = _long(data, i)
        if count == 0:
            break
        if count < 0:
            count, (_, i) = -count, _long(data, i)
        for _ in range(count):
            size, i = _long(data, i)
            name, i = data[i : i + size].decode(), i + size
            size, i = _long(data, i)
            meta[name], i = data[i : i + size], i + size
    i += 16
    deflate = meta.get("avro.codec", b"null") == b"deflate"
    out = [json.dumps(json.loads(meta["avro.schema"])).encode()]
    while i < len(data):
        _, i = _long(data, i)
        size, i = _long(data, i)
        block, i = data[i : i + size], i + size + 16
        out.append(zlib.decompress(block, -15) if deflate else block)
    return b"".join(out)


def where_named(name: str, data: bytes, subject: str) -> list[str]:
    """How ``subject`` shows in one file: its raw bytes, its decoded Avro, its Parquet rows or footer statistics."""
    found = [f"{name}: raw bytes"] if subject.encode() in data else []
    if data[:4] == b"Obj\x01" and subject.encode() in avro_plain(data):
        found.append(f"{name}: Avro (decoded)")
    if data[:2] == b"\x1f\x8b" and subject.encode() in gzip.decompress(data):
        found.append(f"{name}: gzip (decoded)")
    if data[:4] == b"PAR1":
        parquet = pq.ParquetFile(pa.BufferReader(data))
        table = parquet.read()
        for column in table.column_names:
            if pa.types.is_string(table.schema.field(column).type) and pc.any(pc.equal(table.column(column), subject)).as_py():
                found.append(f"{name}: Parquet rows ({column})")
        md = parquet.metadata
        for rg in range(md.num_row_groups):
            for c in range(md.num_columns):
                stats = md.row_group(rg).column(c).statistics
                if stats is not None and stats.has_min_max and subject in (str(stats.min), str(stats.max)):
                    found.append(f"{name}: Parquet footer statistics")
    return found


def warehouse_files(settings: Settings, s3: S3Server | None) -> Iterator[tuple[str, bytes]]:
    if s3 is None:
        root = settings.home / "warehouse"
        for dirpath, _, names in os.walk(root):
            for n in names:
                yield os.path.relpath(os.path.join(dirpath, n), root), Path(dirpath, n).read_bytes()
        return
    bucket, prefix = settings.iceberg_warehouse.removeprefix("s3://").split("/", 1)
    client = s3.client()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            yield obj["Key"], client.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()


def names_of(settings: Settings, s3: S3Server | None, subject: str) -> list[str]:
    return [hit for name, data in warehouse_files(settings, s3) for hit in where_named(name, data, subject)]


@pytest.fixture(params=["embedded", "postgres-s3"])
def backends(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Settings, S3Server | None]:
    if request.param == "embedded":
        return load_settings({"DSV_HOME": str(tmp_path / "home")}), None
    s3 = request.getfixturevalue("s3_env")
    env = production_stores(request.getfixturevalue("postgres_server"), s3) | {"DSV_HOME": str(tmp_path / "home")}
    return load_settings(env), s3


def test_a_completed_deletion_leaves_the_identifier_in_no_iceberg_file(backends: tuple[Settings, S3Server | None]) -> None:
    settings, s3 = backends
    world = World.create(settings=settings, days=3)
    world.build("v6")
    tbl = world.tables.table(SOURCES["transactions"])
    field = tbl.schema().find_field("account_id")
    first = next(iter(tbl.scan().plan_files())).file
    subject = first.lower_bounds[field.field_id].decode()  # a file's lower bound: written into the manifests
    before = names_of(settings, s3, subject)
    assert any("Avro (decoded)" in hit for hit in before) and not any("Avro" in hit and "raw" in hit for hit in before), before

    report = build_coordinator(world.platform).delete(subject, "GDPR art. 17 request #3")

    assert {o["kind"] for o in report.outcomes} >= {"canonical_rows", "raw_batch", "realization"}
    left = names_of(settings, s3, subject)
    assert not left, f"{subject} still in {left}"
