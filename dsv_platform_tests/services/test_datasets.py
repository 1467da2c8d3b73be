"""open_dataset: by alias, hash and name:version, pandas, content verification, consumption, corruption."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy import select

from dsv_platform import open_dataset
from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.errors import CorruptError, NotFoundError
from dsv_platform.settings import load_settings
from dsv_platform_tests.services import publisher_worker as pw
from dsv_platform_tests.services.test_publisher import backend_url

__all__ = ["backend_url"]


def flip_byte(path: Path) -> None:
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_open_dataset_by_alias_hash_and_version(backend_url: str, tmp_path: Path) -> None:
    settings = load_settings({"DSV_HOME": str(tmp_path), "DSV_REGISTRY_URL": backend_url, "DSV_ACTOR": "trainer"})
    store = LocalObjectStore(settings.object_store)
    with Registry.from_url(backend_url) as reg:
        pw.register(reg)
        old = pw.build(reg, store, "r-old", logical_key="a", parts=pw.partitions(seed=3))
        reg.approve(old.realization.id, reason="reviewed", actor="release")  # production points only at ELIGIBLE realizations
        reg.set_alias(pw.NAME, pw.VERSION, "production", old.manifest.manifest_hash, expect=None, actor="release")
        new = pw.build(reg, store, "r-new", logical_key="b")
    name = f"{pw.NAME}:{pw.VERSION}"

    latest = open_dataset(name, settings=settings)
    assert latest.manifest_hash == new.manifest.manifest_hash  # newest published
    by_alias = open_dataset(f"{name}@production", settings=settings)
    assert by_alias.manifest_hash == old.manifest.manifest_hash
    by_hash = open_dataset(f"{name}@sha256:{old.manifest.manifest_hash}", settings=settings)
    assert by_hash.manifest_hash == old.manifest.manifest_hash

    table = latest.to_arrow()
    assert table.num_rows == pw.ROWS * len(pw.DAYS)
    assert table.column_names == pw.CONTRACT.column_names
    frame = by_alias.to_pandas()
    assert len(frame) == pw.ROWS * len(pw.DAYS) and frame["transaction_id"].is_unique
    assert latest.verify_content() == new.manifest.content_hash == latest.content_hash
    assert by_hash.verify_content() == old.manifest.content_hash

    with pytest.raises(NotFoundError):
        open_dataset(f"{name}@staging", settings=settings)
    with Registry.from_url(backend_url) as reg, reg.engine.connect() as conn:
        rows = conn.execute(select(s.consumption_records).order_by(s.consumption_records.c.id)).mappings().all()
    assert [(r["actor"], r["ok"], r["manifest_hash"]) for r in rows[:3]] == [  # the identity that proved its key, not DSV_ACTOR (#24 item 6)
        ("admin", True, new.manifest.manifest_hash),
        ("admin", True, old.manifest.manifest_hash),
        ("admin", True, old.manifest.manifest_hash),
    ]
    assert rows[3]["ok"] is False or rows[3]["ok"] == 0
    assert rows[3]["failure_kind"] == "NOT_FOUND"


def test_flipped_byte_makes_reads_corrupt_naming_the_object(backend_url: str, tmp_path: Path) -> None:
    settings = load_settings({"DSV_HOME": str(tmp_path), "DSV_REGISTRY_URL": backend_url})
    store = LocalObjectStore(settings.object_store)
    with Registry.from_url(backend_url) as reg:
        pw.register(reg)
        built = pw.build(reg, store, "r-corrupt")
    victim = built.manifest.partitions[1]
    flip_byte(store.path(victim.object))
    ds = open_dataset(built.ref, settings=settings)
    with pytest.raises(CorruptError) as info:
        ds.to_arrow()
    assert victim.object in str(info.value) and victim.key in str(info.value)
    assert info.value.detail == {"partition": victim.key, "object": victim.object}
    with pytest.raises(CorruptError, match=victim.object):
        ds.verify_content()


def test_the_top_level_handle_keeps_its_platform_open_until_closed(tmp_path: Path) -> None:
    settings = load_settings({"DSV_HOME": str(tmp_path), "DSV_ACTOR": "trainer"})
    with Registry.from_url(settings.registry_url) as reg:
        pw.register(reg)
        built = pw.build(reg, LocalObjectStore(settings.object_store), "r-1", logical_key="a")
    with open_dataset(f"{pw.NAME}:{pw.VERSION}", settings=settings) as ds:
        platform = ds.owner
        assert platform is not None and not platform.closed
        assert ds.verify_content() == built.manifest.content_hash  # reads through the platform's store
    assert platform.closed and ds.owner is None
    ds.close()  # idempotent


def test_a_failed_open_closes_the_platform_it_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dsv_platform.bootstrap as bootstrap

    built: list[object] = []
    real = bootstrap.build_platform
    monkeypatch.setattr(bootstrap, "build_platform", lambda s: built.append(real(s)) or built[-1])
    with pytest.raises(NotFoundError):
        open_dataset("nothing:v1", settings=load_settings({"DSV_HOME": str(tmp_path)}))
    assert [p.closed for p in built] == [True]  # type: ignore[attr-defined]


def test_a_reader_stays_pinned_while_the_alias_moves_under_it(backend_url: str, tmp_path: Path) -> None:
    """Issue 27 item 11: a handle opened by alias reads the realization it resolved, to the last partition.

    The alias moves (compare-and-swap) after the first partition was read; the rest of the read, the split
    assignment and the content check still answer the old realization, and only a new open sees the new one."""
    settings = load_settings({"DSV_HOME": str(tmp_path), "DSV_REGISTRY_URL": backend_url})
    store = LocalObjectStore(settings.object_store)
    name = f"{pw.NAME}:{pw.VERSION}"
    with Registry.from_url(backend_url) as reg:
        pw.register(reg)
        old = pw.build(reg, store, "r-old", logical_key="a", parts=pw.partitions(seed=5))
        new = pw.build(reg, store, "r-new", logical_key="b", parts=pw.partitions(seed=6))
        for built in (old, new):
            reg.approve(built.realization.id, reason="reviewed", actor="release")
        reg.set_alias(pw.NAME, pw.VERSION, "production", old.manifest.manifest_hash, expect=None, actor="release")
        reader = open_dataset(f"{name}@production", settings=settings)
        parts = reader.iter_partitions()
        first_entry, first = next(parts)
        reg.set_alias(pw.NAME, pw.VERSION, "production", new.manifest.manifest_hash, expect=old.manifest.manifest_hash, actor="release")
        assert reg.resolve(pw.NAME, pw.VERSION, alias="production").manifest_hash == new.manifest.manifest_hash
        rest = list(parts)
    old_keys = [p.key for p in old.manifest.partitions]
    assert [first_entry.key, *(entry.key for entry, _ in rest)] == old_keys
    assert [first_entry.hash, *(entry.hash for entry, _ in rest)] == [p.hash for p in old.manifest.partitions]
    assert first.num_rows + sum(t.num_rows for _, t in rest) == old.manifest.rows
    assert reader.manifest_hash == old.manifest.manifest_hash
    assert reader.verify_content() == old.manifest.content_hash != new.manifest.content_hash
    assert open_dataset(f"{name}@production", settings=settings).manifest_hash == new.manifest.manifest_hash
