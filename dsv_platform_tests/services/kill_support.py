"""Shared pieces of the kill-safety tests: backends as ``DSV_*`` environments, a seeded world, a killed worker, in-process reruns."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dsv_platform.bootstrap import Platform, build_platform
from dsv_platform.cli.main import main as dsv
from dsv_platform.core.publication.manifest import Manifest
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.services.privacy.privacy import build_coordinator
from dsv_platform.services.publication.publisher import Publisher
from dsv_platform.services.retention import integrity
from dsv_platform.services.trust import trust
from dsv_platform.settings import load_settings
from dsv_platform_tests.fixtures import forked
from dsv_platform_tests.fixtures.postgres_server import PostgresServer
from dsv_platform_tests.fixtures.s3_server import S3Server
from dsv_platform_tests.services import kill_worker
from dsv_platform_tests.services import publisher_worker as pw

S = RealizationState
SEEDS = (7, 8, 9)  # three published realizations of one version: the newest is the head GC keeps
SUBJECT = str(pw.partitions(rows=kill_worker.ROWS, seed=SEEDS[0])[0][1].column("account_id")[0])
ZERO = timedelta(0)


def local_env(tmp_path: Path) -> dict[str, str]:
    return {"DSV_HOME": str(tmp_path / "home"), "DSV_ACTOR": "ops"}


def production_env(tmp_path: Path, postgres_server: PostgresServer, s3_env: S3Server) -> dict[str, str]:
    """Registry on PostgreSQL, objects on the loopback S3 server (the Iceberg catalog is never created)."""
    return {
        **local_env(tmp_path),
        "DSV_REGISTRY_URL": postgres_server.url(postgres_server.create_database()),
        "DSV_OBJECT_STORE": f"s3://{s3_env.create_bucket()}/dsv",
        "DSV_S3_ENDPOINT_URL": s3_env.endpoint_url,
        "DSV_S3_REGION": s3_env.region,
    }


@contextmanager
def platform(env: Mapping[str, str]) -> Iterator[Platform]:
    with build_platform(load_settings(env)) as p:
        yield p


def seed_world(env: Mapping[str, str], seeds: tuple[int, ...] = SEEDS) -> None:
    """Register the definition and publish one realization per seed into the encrypting store."""
    with platform(env) as p:
        pw.register(p.registry)
        for seed in seeds:
            req = pw.request(f"req-{seed}", logical_key=f"lk-{seed}", parts=pw.partitions(rows=kill_worker.ROWS, seed=seed))
            Publisher(p.registry, p.store, actor="builder").build(req)


def run_killed(env: Mapping[str, str], *args: str) -> None:
    """Run kill_worker with ``args`` in a real process of its own, forked from the server that imported the platform once
    (fixtures/forked.py: about 2 s a worker otherwise), with only this environment; it must die of SIGKILL."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("DSV_")} | dict(env)
    root = str(Path(kill_worker.__file__).resolve().parents[2])
    code, text = forked.Worker(kill_worker.main, args, env=full, cwd=root).communicate(timeout=240)
    assert code == -signal.SIGKILL, f"worker {args} exited {code}: {text[-3000:]}"


def use_env(monkeypatch: pytest.MonkeyPatch, env: Mapping[str, str]) -> None:
    """Make ``env`` this process's ``DSV_*`` environment (for this test only)."""
    for name in [k for k in os.environ if k.startswith("DSV_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def rerun(monkeypatch: pytest.MonkeyPatch, env: Mapping[str, str], *argv: str) -> int:
    """The real ``dsv`` command, in this process, with ``env`` as its environment."""
    use_env(monkeypatch, env)
    return dsv(list(argv))


def assert_consistent(env: Mapping[str, str], *, window: timedelta = ZERO) -> integrity.IntegrityReport:
    """Registry and store agree: nothing missing, nothing orphaned beyond ``window``; every readable realization reads whole."""
    with platform(env) as p:
        report = integrity.scan(p, safety_window=window)
        assert report.ok, report.to_document()
        for r in p.registry.versions(pw.NAME):
            if r.state in (S.PUBLISHED, S.ELIGIBLE):
                for _key, digest in [(part.key, part.object) for part in _manifest(p, r.manifest_hash).partitions]:
                    p.store.verify(digest)
        return report


def _manifest(p: Platform, manifest_hash: str | None) -> Manifest:
    assert manifest_hash is not None
    return Manifest.from_json(p.registry.get_manifest(manifest_hash))


def holds_subject(p: Platform, manifest_hash: str) -> bool:
    import pyarrow.parquet as pq

    for part in _manifest(p, manifest_hash).partitions:
        table = pq.read_table(pa.BufferReader(p.store.get(part.object)))
        if pc.any(pc.equal(table.column("account_id"), SUBJECT)).as_py():
            return True
    return False


DELETE = ("--subject", SUBJECT, "--reason", "GDPR art. 17 request #9", "--request-id", "del-9")
DAY = timedelta(hours=24)


def check_gc_apply_killed(env: Mapping[str, str], step: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seed_world(env)
    with platform(env) as p:
        p.store.stage("c999-abandoned", "part.parquet", b"left behind by a killed build")
    run_killed(env, "gc", step, "--", "--yes", "--safety-window-hours", "0")
    with platform(env) as p:  # killed anywhere: what is still readable is whole
        assert integrity.scan(p, safety_window=DAY).missing == []
    assert rerun(monkeypatch, env, "gc", "apply", "--yes", "--safety-window-hours", "0") == 0
    assert_consistent(env)
    with platform(env) as p:
        states = sorted(r.state.value for r in p.registry.versions(pw.NAME, include_candidates=True))
        assert states == sorted([S.EXPIRED.value] * (len(SEEDS) - 1) + [S.PUBLISHED.value]), states
        assert p.store.list_staging() == []
        actions = [e["action"] for e in trust.records(p).audit_entries() if e["action"].startswith("gc.apply")]
        assert actions[0] == "gc.apply.start" and actions[-1] == "gc.apply", actions  # the killed apply is in the log too (issue 25 item 6)
        assert actions.count("gc.apply.start") == (1 if step == "plan" else 2), actions  # "plan": killed before applying


def check_privacy_delete_killed(env: Mapping[str, str], step: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seed_world(env)
    run_killed(env, "privacy", step, "--", *DELETE)
    assert rerun(monkeypatch, env, "privacy", "delete", *DELETE) == 0
    with platform(env) as p:
        status = build_coordinator(p).status(SUBJECT)
        assert [(r["request_id"], bool(r["completed"])) for r in status["requests"]] == [("del-9", True)]
        assert status["registry_generation"] == status["key_store_generation"] == 1
        realizations = p.registry.versions(pw.NAME, include_candidates=True)
        assert any(r.state is S.REDACTED for r in realizations)
        for r in realizations:
            if r.state is S.PUBLISHED:
                assert r.manifest_hash is not None and not holds_subject(p, r.manifest_hash)
        erased = [o["id"] for o in status["outcomes"] if o["outcome"] == "crypto_erased"]
        assert erased and all(p.store.keys.is_erased(d) and not p.store.exists(d) for d in erased)
        planned = {(d.descendant.kind.value, d.descendant.id) for d in p.registry.privacy.planned("del-9")}
        assert planned == {(o["kind"], o["id"]) for o in status["outcomes"]}  # every planned outcome recorded (issue 25 item 2)
        audited = [e for e in trust.records(p).audit_entries() if e["action"] == "privacy.delete"]
        assert [e["detail"]["request_id"] for e in audited] == ["del-9"], audited  # audited once, by the run that completed it
    assert_consistent(env)


def check_publication_killed(env: Mapping[str, str], step: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with platform(env) as p:
        pw.register(p.registry)
    run_killed(env, "publish", step, "req-k", "7")
    use_env(monkeypatch, env)
    assert kill_worker.publish(None, "req-k", 7) == 0  # the same request again: resumes the killed candidate
    with platform(env) as p:
        assert [r.state for r in p.registry.versions(pw.NAME, include_candidates=True)] == [S.PUBLISHED]
    assert_consistent(env, window=DAY)
    with platform(env) as p:  # beyond the window only the killed attempt's staging is left, for GC
        leftovers = integrity.scan(p, safety_window=ZERO).orphaned
        assert all(o.startswith("staging c") for o in leftovers), leftovers
    assert rerun(monkeypatch, env, "gc", "apply", "--yes", "--safety-window-hours", "0") == 0
    assert_consistent(env)


__all__ = [
    "SEEDS",
    "SUBJECT",
    "assert_consistent",
    "check_gc_apply_killed",
    "check_privacy_delete_killed",
    "check_publication_killed",
    "holds_subject",
    "local_env",
    "platform",
    "production_env",
    "rerun",
    "run_killed",
    "seed_world",
    "use_env",
]
