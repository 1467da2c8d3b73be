"""The ``read_health`` records (migration 21) and their summary, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dsv_platform.adapters.registry import migrations
from dsv_platform.adapters.registry.read_health import ReadMeasure
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform_tests.adapters.test_registry import NAME, VERSION, published


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def reg(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    url = f"sqlite:///{tmp_path_factory.mktemp('registry') / 'registry.db'}" if request.param == "sqlite" else str(request.getfixturevalue("postgres_url"))
    registry = Registry.from_url(url)
    registry.register_definition(NAME, VERSION, contract={"name": NAME}, recipe={"sources": ["raw.events"]}, owner="data-platform")
    yield registry
    registry.close()


def test_reads_fold_per_manifest_into_consumers_ttfb_throughput_and_damage(reg: Registry) -> None:
    assert 21 in {m.version for m in migrations.MIGRATIONS} and migrations.current_version(reg.engine) >= 21
    first, other = (reg.get(rid) for rid, _ in (published(reg), published(reg)))
    reads = [
        ("trainer", ReadMeasure("to_arrow", objects=2, bytes=4000, rows=100, ttfb_s=0.01, seconds=1.0)),
        ("trainer", ReadMeasure("iter_batches", "STOPPED", objects=1, bytes=1000, rows=20, ttfb_s=0.03, seconds=0.5)),
        ("analyst", ReadMeasure("to_arrow", "CORRUPT", objects=0, corrupt=1, ttfb_s=None, seconds=0.5, detail={"object": "ab"})),
    ]
    for who, m in reads:
        reg.record_read(m, consumer=who, purpose="training", realization=first)
    reg.record_read(ReadMeasure("to_arrow", "MISSING", missing=1, seconds=0.1), consumer="x", purpose=None, realization=other)
    got = reg.read_health_summary([first.manifest_hash or ""])
    assert list(got) == [first.manifest_hash]
    assert got[first.manifest_hash or ""] == {
        "consumers": ["analyst", "trainer"], "reads": 3, "ttfb_p50_s": pytest.approx(0.02), "ttfb_max_s": pytest.approx(0.03),
        "bytes_per_s": pytest.approx(2500.0), "rows_per_s": pytest.approx(60.0), "bytes": 5000, "rows": 120, "missing": 0, "corrupt": 1,
    }  # fmt: skip
    assert reg.read_health_summary()[other.manifest_hash or ""]["missing"] == 1
