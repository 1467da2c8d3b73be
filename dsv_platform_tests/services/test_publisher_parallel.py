"""Parallel part preparation in Publisher.build: the same manifest, parts, store calls, events and first error as jobs=1 (issue 15)."""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.errors import ConfigurationError, DsvError
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.services.publication.parallel_parts import default_build_jobs, ordered_map
from dsv_platform.services.publication.publisher import BuildResult, Publisher
from dsv_platform.settings import load_settings
from dsv_platform_tests.services import publisher_worker as pw

DAYS = tuple(dt.date(2026, 6, 1) + dt.timedelta(days=i) for i in range(6))


@pytest.fixture(params=["sqlite", "postgres"])
def reg(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Registry]:
    url = f"sqlite:///{tmp_path / 'registry.db'}" if request.param == "sqlite" else str(request.getfixturevalue("postgres_url"))
    r = Registry.from_url(url)
    pw.register(r)
    yield r
    r.close()


class RecordingStore(LocalObjectStore):
    """A local store that records its stage/promote calls and the thread that made them."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.calls: list[tuple[str, str, int]] = []

    def stage(self, attempt_id: str, name: str, source: Any) -> str:
        self.calls.append(("stage", name, threading.get_ident()))
        return super().stage(attempt_id, name, source)

    def promote(self, attempt_id: str, name: str) -> str:
        self.calls.append(("promote", name, threading.get_ident()))
        return super().promote(attempt_id, name)


def six_days(*, broken: tuple[int, ...] = ()) -> list[tuple[str, pa.Table]]:
    """Six day partitions; each index in ``broken`` gets a duplicate natural key (its first row again)."""
    parts = pw.partitions(rows=300, days=DAYS)
    return [(k, pa.concat_tables([t, t.slice(0, 1)]) if i in broken else t) for i, (k, t) in enumerate(parts)]


def run(reg: Registry, root: Path, request_id: str, jobs: int, parts: list[tuple[str, pa.Table]]) -> tuple[BuildResult | DsvError, list[str], RecordingStore]:
    """Build with ``jobs``; the result (or the error raised), the on_step events and the store used."""
    seen: list[str] = []
    store = RecordingStore(root)
    publisher = Publisher(reg, store, actor="builder", jobs=jobs, on_step=lambda step, detail: seen.append(f"{step.value} {detail}"))
    try:
        return publisher.build(pw.request(request_id, logical_key=request_id, parts=parts)), seen, store
    except DsvError as exc:
        return exc, seen, store


def objects(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "objects").rglob("*") if p.is_file())


def test_jobs_1_and_4_build_the_same_manifest_and_parts(reg: Registry, tmp_path: Path) -> None:
    serial, serial_seen, serial_store = run(reg, tmp_path / "s", "req-serial", 1, six_days())
    parallel, parallel_seen, parallel_store = run(reg, tmp_path / "p", "req-parallel", 4, six_days())
    assert isinstance(serial, BuildResult) and isinstance(parallel, BuildResult)
    assert parallel.manifest.manifest_hash == serial.manifest.manifest_hash
    assert parallel.manifest.partitions == serial.manifest.partitions  # keys, hashes, rows, objects, bytes, in partition order
    assert [p.key for p in parallel.manifest.partitions] == [d.isoformat() for d in DAYS]
    parts_written = [e for e in parallel_seen if e.startswith("part_written")]
    assert parts_written == [f"part_written {d.isoformat()}" for d in DAYS]
    assert [e.split()[0] for e in parallel_seen] == [e.split()[0] for e in serial_seen]
    assert [c[:2] for c in parallel_store.calls] == [c[:2] for c in serial_store.calls]
    assert {c[2] for c in parallel_store.calls} == {threading.get_ident()}  # store calls from the calling thread
    assert objects(tmp_path / "p") == objects(tmp_path / "s")


def test_an_error_in_a_middle_partition_is_the_serial_builds_error(reg: Registry, tmp_path: Path) -> None:
    """Partition 3 of 6 (and 5) hold a duplicate key: both builds raise partition 3's error, store and report the same parts."""
    serial, serial_seen, serial_store = run(reg, tmp_path / "s", "req-bad-serial", 1, six_days(broken=(2, 4)))
    parallel, parallel_seen, parallel_store = run(reg, tmp_path / "p", "req-bad-parallel", 4, six_days(broken=(2, 4)))
    assert isinstance(serial, DsvError) and isinstance(parallel, DsvError)
    assert type(parallel) is type(serial) and str(parallel) == str(serial)
    assert "duplicate natural key" in str(parallel)
    assert [e.split()[0] for e in parallel_seen] == [e.split()[0] for e in serial_seen] == ["candidate", "part_written", "part_written"]
    assert [c[:2] for c in parallel_store.calls] == [c[:2] for c in serial_store.calls]
    assert objects(tmp_path / "p") == objects(tmp_path / "s")
    states = [reg.find_by_request_id(r) for r in ("req-bad-serial", "req-bad-parallel")]
    assert [s.state for s in states if s is not None] == [RealizationState.STAGING] * 2  # as today: a resumable candidate, no manifest
    assert reg.versions(pw.NAME) == []


def test_ordered_map_starts_nothing_after_an_error_and_keeps_at_most_jobs_in_flight() -> None:
    started: list[int] = []
    pulled: list[int] = []
    lock = threading.Lock()

    def items() -> Iterator[int]:
        for i in range(20):
            pulled.append(i)
            yield i

    def work(i: int) -> int:
        with lock:
            started.append(i)
        time.sleep(0.05 if i == 2 else 0.0)  # a later item fails first in time: the earliest one's error still wins
        if i in (2, 3):
            raise ValueError(f"item {i}")
        return i

    consumed = []
    with pytest.raises(ValueError, match="item 2"), ordered_map(work, items(), 3) as results:
        for r in results:
            consumed.append(r)
            assert len(pulled) - len(consumed) <= 3 - 1  # pulled ahead: at most jobs, counting the one being consumed
    assert consumed == [0, 1]
    assert {0, 1, 2} <= set(started) <= {0, 1, 2, 3, 4} and len(pulled) == 5  # queued items may be cancelled, never new ones started


def test_ordered_map_stops_when_the_consumer_fails() -> None:
    started: list[int] = []
    with pytest.raises(RuntimeError), ordered_map(lambda i: started.append(i) or i, range(100), 4) as results:
        for r in results:
            if r == 1:
                raise RuntimeError("store failed")
    assert {0, 1} <= set(started) <= {0, 1, 2, 3, 4}  # the window (jobs) ahead at most; queued ones are cancelled


def test_jobs_default_to_one_per_core_and_dsv_build_jobs_overrides() -> None:
    assert default_build_jobs() >= 1
    assert load_settings({"DSV_BUILD_JOBS": "3"}).build_jobs == 3
    assert load_settings({}).build_jobs is None
    for bad in ("two", "0", "-1", "1.5"):
        with pytest.raises(ConfigurationError, match="DSV_BUILD_JOBS"):
            load_settings({"DSV_BUILD_JOBS": bad})
    assert Publisher(None, None, actor="x").jobs == default_build_jobs()  # type: ignore[arg-type]
    assert Publisher(None, None, actor="x", jobs=0).jobs == 1  # type: ignore[arg-type]
