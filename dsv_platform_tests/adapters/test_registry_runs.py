"""Production runs and lineage activities in the registry (migration 6), on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import update
from sqlalchemy.exc import DBAPIError

from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry.artifacts import RunRecords
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.errors import IllegalTransitionError, NotFoundError


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunRecords]:
    url = f"sqlite:///{tmp_path_factory.mktemp('runs') / 'registry.db'}" if request.param == "sqlite" else str(request.getfixturevalue("postgres_url"))
    reg = Registry.from_url(url)
    yield RunRecords(reg)
    reg.close()


def test_a_run_goes_intent_to_complete_once(runs: RunRecords) -> None:
    rid = runs.start("artifact", "report", producer="pkg.mod:PRODUCER", intent={"seed": 1}, actor="analyst")
    assert runs.get(rid).state == "INTENT" and runs.get(rid).manifest_hash is None
    done = runs.complete(rid, manifest_hash="ab" * 32, manifest={"format": "x"}, files={"report.html": "cd" * 32})
    assert (done.state, done.manifest_hash, dict(done.files), dict(done.manifest or {})) == ("COMPLETE", "ab" * 32, {"report.html": "cd" * 32}, {"format": "x"})
    with pytest.raises(IllegalTransitionError, match="is COMPLETE, not INTENT"):
        runs.fail(rid, error="late")
    failed = runs.fail(runs.start("artifact", "report", producer="pkg.mod:PRODUCER", intent={}, actor="analyst"), error="RuntimeError: boom")
    assert failed.state == "FAILED" and failed.error == "RuntimeError: boom"
    assert [r.state for r in runs.runs(kind="artifact", name="report")] == ["FAILED", "COMPLETE"], "newest first"


def test_locate_by_hash_prefix_and_name_and_refuses_ambiguity(runs: RunRecords) -> None:
    first = runs.start("artifact", "report", producer="m:P", intent={}, actor="a")
    runs.complete(first, manifest_hash="abcdef012345" + "0" * 52, manifest={}, files={})
    second = runs.start("artifact", "report", producer="m:P", intent={}, actor="a")
    runs.complete(second, manifest_hash="abcdef012345" + "1" * 52, manifest={}, files={})
    runs.start("artifact", "report", producer="m:P", intent={}, actor="a")  # a crashed run: never located
    assert runs.locate("artifact", "report").id == second
    assert runs.locate("artifact", "manifest sha256:abcdef0123450").id == first
    with pytest.raises(NotFoundError, match="ambiguous"):
        runs.locate("artifact", "abcdef012345")
    with pytest.raises(NotFoundError, match="not reproducible by construction"):
        runs.locate("artifact", "f" * 64)
    with pytest.raises(NotFoundError, match="no complete model_run 'report'"):
        runs.locate("model_run", "report")


def test_activities_are_append_only(runs: RunRecords) -> None:
    node = ("artifact", "ab" * 32)
    first = runs.add_activity(node, "reproduction", {"outcome": "REPRODUCED"}, actor="auditor")
    runs.add_activity(("model_run", "cd" * 32), "reproduction", {"outcome": "X"}, actor="auditor")
    found = runs.activities([node])
    assert [(a.id, a.node, a.kind, dict(a.record)) for a in found] == [(first, f"artifact:{'ab' * 32}", "reproduction", {"outcome": "REPRODUCED"})]
    registry = runs.registry
    assert isinstance(registry, Registry)
    with pytest.raises(DBAPIError, match="append-only"), registry.engine.begin() as conn:
        conn.execute(update(s.lineage_activities).values(kind="edited"))


def test_fail_during_marks_the_run_and_never_raises_over_the_error(runs: RunRecords, caplog: pytest.LogCaptureFixture) -> None:
    rid = runs.start("model_run", "m", producer="m:T", intent={}, actor="a")
    runs.fail_during(rid, RuntimeError("boom"))
    assert (runs.get(rid).state, runs.get(rid).error) == ("FAILED", "RuntimeError: boom")
    with caplog.at_level("WARNING", logger="dsv_platform.adapters.registry.artifacts"):
        runs.fail_during(rid, ValueError("again"))  # already FAILED: the marking fails, and is logged, not raised
    assert runs.get(rid).error == "RuntimeError: boom"
    assert f"production run #{rid} not marked FAILED" in caplog.text and "IllegalTransitionError" in caplog.text
