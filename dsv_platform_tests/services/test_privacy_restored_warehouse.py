"""Issue 27 item 8: a restored canonical warehouse brings a deleted subject's rows back; `dsv privacy reconcile` re-deletes them.

The backup is what an operator restores: the Iceberg catalog and the warehouse folder (metadata and data files),
copied before the deletion and put back after it. A direct read (DuckDB through ``dsv table-location``'s query,
pyiceberg) sees the subject again; the real ``dsv privacy reconcile`` (in process) reports the rows per table and
subject, re-deletes them through the deletion's own canonical stage (audited), and a second reconcile reports clean.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pyiceberg.expressions import EqualTo

from dsv_platform import open_dataset
from dsv_platform.adapters.iceberg import duckdb_iceberg as di
from dsv_platform.examples.fraud.specs import SOURCES
from dsv_platform.services.privacy.privacy import build_coordinator
from dsv_platform.services.trust import trust
from dsv_platform.settings import load_settings
from dsv_platform_tests.scenarios.support import World
from dsv_platform_tests.services import kill_support as ks
from dsv_platform_tests.services.test_privacy_canonical_stage import SUBJECT_TABLES, env

pytestmark = pytest.mark.slow

__all__ = ["env"]  # the canonical stage's home fixture (SQLite and PostgreSQL registries)
REQUEST = "del-restored"


def seeded(env: dict[str, str]) -> str:
    """Three days landed and a v6 build; a subject the canonical tables and the build hold."""
    world = World.create(settings=load_settings(env), days=3)
    build = world.build("v6")
    subject = str(open_dataset(build.ref, settings=world.settings).to_arrow().column("account_id")[0])
    world.platform.close()
    return subject


def back_up(env: dict[str, str], to: Path) -> None:
    """The canonical warehouse as a backup holds it: the Iceberg catalog and the warehouse folder (no process has them open)."""
    settings = load_settings(env)
    shutil.copytree(settings.iceberg_warehouse, to / "warehouse")
    shutil.copy2(Path(settings.home) / "iceberg_catalog.db", to / "iceberg_catalog.db")


def restore(env: dict[str, str], backup: Path) -> None:
    settings = load_settings(env)
    shutil.rmtree(settings.iceberg_warehouse)
    shutil.copytree(backup / "warehouse", settings.iceberg_warehouse)
    shutil.copy2(backup / "iceberg_catalog.db", Path(settings.home) / "iceberg_catalog.db")


def direct_reads(env: dict[str, str], subject: str) -> dict[str, int]:
    """Per subject table: the subject's rows in the current snapshot as DuckDB reads it (``dsv table-location``'s query)."""
    con = di.connect()
    with ks.platform(env) as p:
        out = {}
        for spec in SUBJECT_TABLES:
            location = di.table_location(p.tables, spec.name)
            out[spec.name] = int(con.execute(f"SELECT count(*) FROM {location.scan_sql()} WHERE account_id = ?", [subject]).fetchone()[0])  # type: ignore[index]
        return out


def holding_snapshots(env: dict[str, str], subject: str) -> dict[str, list[int]]:
    with ks.platform(env) as p:
        return {spec.name: p.tables.snapshots_matching(spec, EqualTo("account_id", subject)) for spec in SUBJECT_TABLES}


def reconcile(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], env: dict[str, str]) -> tuple[int, dict, str]:  # type: ignore[type-arg]
    capsys.readouterr()
    code = ks.rerun(monkeypatch, env, "privacy", "reconcile", "--json")
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 else {}), out.out + out.err


def test_a_restored_warehouse_is_found_and_re_deleted_by_reconcile(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    subject = seeded(env)
    before = direct_reads(env, subject)
    assert any(before.values()), before
    back_up(env, tmp_path / "backup")

    delete = ("privacy", "delete", "--subject", subject, "--reason", "GDPR art. 17 request #27", "--request-id", REQUEST)
    assert ks.rerun(monkeypatch, env, *delete) == 0
    assert direct_reads(env, subject) == {name: 0 for name in before}
    assert holding_snapshots(env, subject) == {spec.name: [] for spec in SUBJECT_TABLES}

    restore(env, tmp_path / "backup")
    assert direct_reads(env, subject) == before  # anyone reading the tables directly sees the subject again
    restored_holding = holding_snapshots(env, subject)
    assert any(restored_holding.values())

    code, doc, text = reconcile(monkeypatch, capsys, env)
    assert code == 0, text
    assert subject not in text
    with ks.platform(env) as p:
        subject_hash = build_coordinator(p).subject_hash(subject)
        idents = {spec.name: p.tables.identifier(spec) for spec in SUBJECT_TABLES}
        audited = [e for e in trust.records(p).audit_entries() if e["action"] == "privacy.reconcile.canonical"]
    found = {(e["table"], e["subject_key_hash"], e["request_id"]): e["rows"] for e in doc["canonical_rows"]}
    assert found == {(idents[name], subject_hash, REQUEST): n for name, n in before.items() if n}, doc["canonical_rows"]
    assert set(doc["canonical_tables_checked"]) == set(idents.values())
    audited_rows = {(e["target"], e["detail"]["table"], e["detail"]["rows"]) for e in audited}
    assert audited_rows == {(f"subject:{subject_hash}", t, n) for (t, _h, _r), n in found.items()}

    assert direct_reads(env, subject) == {name: 0 for name in before}
    assert holding_snapshots(env, subject) == {spec.name: [] for spec in SUBJECT_TABLES}  # the restored snapshots are expired again

    code, again, text = reconcile(monkeypatch, capsys, env)
    assert code == 0, text
    assert again["canonical_rows"] == [] and set(again["canonical_tables_checked"]) == set(idents.values())


def test_an_unreadable_restored_table_stops_reconcile_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Fail closed: a restore that lost a data file of a table is never reported clean; the readable tables are re-deleted meanwhile."""
    env = ks.local_env(tmp_path)
    subject = seeded(env)
    before = direct_reads(env, subject)
    back_up(env, tmp_path / "backup")
    assert ks.rerun(monkeypatch, env, "privacy", "delete", "--subject", subject, "--reason", "GDPR #27", "--request-id", REQUEST) == 0
    restore(env, tmp_path / "backup")
    broken, *others = sorted(before, key=lambda name: -before[name])  # the table with the most rows of the subject
    with ks.platform(env) as p:
        ident = p.tables.identifier(SOURCES[broken])
        (task, *_rest) = list(p.tables.load(broken).scan().plan_files())
    lost = di.local_path(task.file.file_path)
    assert lost is not None
    kept = lost.read_bytes()
    lost.unlink()  # the restore lost one data file of the current snapshot

    code, _doc, text = reconcile(monkeypatch, capsys, env)
    assert code == 1 and ident in text and "cannot be checked" in text, text
    assert '"canonical_rows"' not in text  # no report, and nothing says clean
    assert direct_reads_but(env, subject, broken) == {name: 0 for name in others}

    lost.write_bytes(kept)  # repaired: the rerun finds and re-deletes the table's rows
    code, doc, text = reconcile(monkeypatch, capsys, env)
    assert code == 0, text
    assert [(e["table"], e["rows"]) for e in doc["canonical_rows"]] == [(ident, before[broken])]
    assert direct_reads(env, subject) == {name: 0 for name in before}


def direct_reads_but(env: dict[str, str], subject: str, skipped: str) -> dict[str, int]:
    """:func:`direct_reads` of every subject table but ``skipped``, through pyiceberg."""
    with ks.platform(env) as p:
        return {spec.name: p.tables.count_matching(spec, "account_id", subject) for spec in SUBJECT_TABLES if spec.name != skipped}


def copy_registry(src: Path, dst: Path) -> None:
    """The SQLite registry file (and a WAL left beside it) from ``src`` to ``dst``, replacing what is there."""
    dst.mkdir(parents=True, exist_ok=True)
    for stale in dst.glob("registry.db*"):
        stale.unlink()
    for f in src.glob("registry.db*"):
        shutil.copy2(f, dst / f.name)


@pytest.mark.parametrize("key_store", ["records the deletion", "predates the records"])
def test_a_registry_restored_with_the_warehouse_is_reconciled_from_the_key_store(
    key_store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The registry (its requests and subject index) restored with the warehouse from before the deletion; the key store, kept apart, is newer.

    The key store keeps each deletion's subject hash: reconcile finds and re-deletes the rows the registry no longer
    knows were deleted. A key store without that record (made before it was kept) is reported as unchecked, never clean.
    """
    env = ks.local_env(tmp_path)
    subject = seeded(env)
    before = direct_reads(env, subject)
    home = Path(load_settings(env).home)
    back_up(env, tmp_path / "backup")
    copy_registry(home, tmp_path / "backup")
    assert ks.rerun(monkeypatch, env, "privacy", "delete", "--subject", subject, "--reason", "GDPR #27", "--request-id", REQUEST) == 0
    restore(env, tmp_path / "backup")
    copy_registry(tmp_path / "backup", home)
    if key_store == "predates the records":
        shutil.rmtree(load_settings(env).key_store / "deletions")
    with ks.platform(env) as p:
        assert p.registry.privacy.requests() == [] and p.registry.redaction_generation() == 0 < p.store.keys.generation()
    assert direct_reads(env, subject) == before

    code, doc, text = reconcile(monkeypatch, capsys, env)
    assert code == 0, text
    if key_store == "predates the records":
        assert doc["canonical_rows"] == [] and doc["canonical_unchecked_generations"] == [1], doc
        assert direct_reads(env, subject) == before  # nothing says which subject: reported unchecked, not clean
        copy_registry(tmp_path / "backup", home)  # the same restore again, read as text
        capsys.readouterr()
        assert ks.rerun(monkeypatch, env, "privacy", "reconcile") == 0
        assert "UNCHECKED deletion at generation 1" in capsys.readouterr().out
        return
    assert doc["canonical_lost_requests"] == [REQUEST] and doc["canonical_unchecked_generations"] == []
    assert {(e["table"], e["request_id"], e["rows"]) for e in doc["canonical_rows"]} == {
        (f"canonical.{name}", REQUEST, n) for name, n in before.items() if n
    }
    assert direct_reads(env, subject) == {name: 0 for name in before}
    code, again, text = reconcile(monkeypatch, capsys, env)
    assert code == 0 and again["canonical_rows"] == [], text
