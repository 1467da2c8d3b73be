"""Retention roots and lineage reads in the registry (SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.errors import ConfigurationError, NotFoundError


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def reg(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Registry]:
    url = f"sqlite:///{tmp_path / 'r.db'}" if request.param == "sqlite" else str(request.getfixturevalue("postgres_url"))
    r = Registry.from_url(url)
    yield r
    r.close()


def test_retention_add_list_release(reg: Registry) -> None:
    a = reg.add_retention_root("model_version", "model_run:" + "a" * 64, "prod model", "ml")
    assert reg.add_retention_root("model_version", "model_run:" + "a" * 64, "prod model", "ml") == a, "idempotent"
    soon = datetime.now(UTC) + timedelta(hours=1)
    b = reg.add_retention_root("legal_hold", "ds:v1", "case 7", "legal", expires_at=soon)
    assert [r.id for r in reg.list_retention_roots(datetime.now(UTC))] == [a, b]
    assert [r.id for r in reg.list_retention_roots(soon + timedelta(seconds=1))] == [a]
    before = reg.state_watermark()
    released = reg.release_retention_root(a, "alice", "model retired")
    assert released.released_at is not None
    assert reg.release_retention_root(a, "alice", "again").released_at == released.released_at
    assert [r.id for r in reg.list_retention_roots(datetime.now(UTC))] == [b]
    assert len(reg.list_retention_roots()) == 2
    assert reg.state_watermark() != before, "a release makes older GC plans stale"
    (edge,) = [e for e in reg.lineage_edges(node=("retention_root", str(a)))]
    assert edge.relation == "released" and edge.attributes["actor"] == "alice"


def test_retention_refuses_bad_roots(reg: Registry) -> None:
    with pytest.raises(ConfigurationError):
        reg.add_retention_root("whim", "x", "r", "o")
    with pytest.raises(ConfigurationError):
        reg.add_retention_root("report", "x", "", "o")
    with pytest.raises(NotFoundError):
        reg.release_retention_root(999, "a", "b")
