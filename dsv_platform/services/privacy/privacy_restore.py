"""Restored backups of the canonical warehouse: `dsv privacy reconcile` finds deleted subjects' rows again and re-deletes them.

A warehouse (Iceberg catalog, metadata, data files) put back from a copy older than a deletion holds the subject's
rows again for direct readers. :func:`reapply_canonical` checks every subject table's current snapshot for the
subjects of every completed deletion request (not the subject index, which a restored registry may hold older), reading
the subject column alone (only the subject's keyed hash is stored), and runs the deletion's canonical stage again
on the found key (privacy_canonical.py), audited. An unreadable table stops reconcile naming it (fail closed).

Details: docs/gc-and-privacy.md ("Restored backups").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc

from dsv_platform.core.errors import DsvError, FailureKind
from dsv_platform.core.privacy.privacy import DescendantKind, Outcome, keyed_hash, subject_key_hash
from dsv_platform.core.trust.trust import Role
from dsv_platform.services.privacy.privacy_canonical import delete_canonical

if TYPE_CHECKING:
    from dsv_platform.services.privacy.privacy import PrivacyCoordinator

AUDIT_ACTION = "privacy.reconcile.canonical"


class CanonicalReconcileError(DsvError):
    """A canonical table could not be checked for deleted subjects' rows, or still holds them: reconcile never reports it clean."""

    kind = FailureKind.FAILED


@dataclass
class ReconcileReport:
    registry_generation: int
    key_store_generation_before: int
    reapplied: list[dict[str, Any]] = field(default_factory=list)
    redacted: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)  # incomplete requests this reconcile finished
    staging: list[dict[str, Any]] = field(default_factory=list)
    canonical_rows: list[dict[str, Any]] = field(default_factory=list)  # per table and subject: rows a restored warehouse brought back
    canonical_checked: dict[str, int | None] = field(default_factory=dict)  # table -> the current snapshot checked
    canonical_lost_requests: list[str] = field(default_factory=list)  # checked from the key store's records: the registry lost them
    canonical_unchecked_generations: list[int] = field(default_factory=list)  # lost by the registry, and no key store record

    def to_document(self) -> dict[str, Any]:
        return {
            "registry_generation": self.registry_generation,
            "key_store_generation_before": self.key_store_generation_before,
            "reapplied": self.reapplied,
            "redacted": self.redacted,
            "finished_requests": self.finished,
            "staged_parts": self.staging,
            "canonical_rows": self.canonical_rows,
            "canonical_tables_checked": self.canonical_checked,
            "canonical_lost_requests": self.canonical_lost_requests,
            "canonical_unchecked_generations": self.canonical_unchecked_generations,
        }


def _deleted(coordinator: PrivacyCoordinator, report: ReconcileReport) -> tuple[dict[str, str], set[tuple[str, str]]]:
    """Subject hash -> its first completed request, the key store's records included (requests a restored registry lost);
    and the (subject, table) pairs a request kept under a legal basis."""
    subjects: dict[str, str] = {}
    retained: set[tuple[str, str]] = set()
    requests = coordinator.registry.privacy.requests()
    for request in requests:
        if not request.completed:
            continue
        subjects.setdefault(request.subject_key_hash, request.request_id)
        for d in coordinator.registry.privacy.planned(request.request_id):
            if d.descendant.kind is DescendantKind.CANONICAL_ROWS and d.outcome is Outcome.RETAINED:
                retained.add((request.subject_key_hash, d.descendant.id))
    known = {r.request_id for r in requests}
    recorded = coordinator.keys.deletions()
    for _generation, request_id, subject in recorded:
        if request_id not in known:  # the registry was restored from a backup older than this deletion
            subjects.setdefault(subject, request_id)
            report.canonical_lost_requests.append(request_id)
    lost = range(report.registry_generation + 1, report.key_store_generation_before + 1)
    report.canonical_unchecked_generations = sorted(set(lost) - {g for g, _r, _s in recorded})
    return subjects, retained


def _found(coordinator: PrivacyCoordinator, ident: str, column: str, subjects: dict[str, str]) -> tuple[int | None, dict[str, tuple[str, int]]]:
    """The current snapshot of ``ident`` and, per deleted subject it holds, (the subject's key, its rows), reading the subject column alone."""
    assert coordinator.tables is not None
    salt, key = coordinator.keys.salt(), coordinator.hash_key()
    tbl = coordinator.tables.catalog.load_table(ident)
    snapshot = tbl.current_snapshot()
    if snapshot is None:
        return None, {}
    hashed: dict[str, str | None] = {}  # value -> the deleted subject it is, or None
    found: dict[str, tuple[str, int]] = {}
    reader = tbl.scan(snapshot_id=snapshot.snapshot_id, selected_fields=(column,)).to_arrow_batch_reader()
    for batch in reader:
        counts = pc.value_counts(batch.column(batch.schema.get_field_index(column)))
        for entry in counts.to_pylist():
            value, n = entry["values"], int(entry["counts"])
            if value is None:
                continue
            text = str(value)
            if text not in hashed:  # keyed, or plain salted as a key store record made before the key's adoption holds it
                salted = subject_key_hash(salt, text)
                hashed[text] = next((h for h in (salted if key is None else keyed_hash(key, salted), salted) if h in subjects), None)
            subject = hashed[text]
            if subject is not None:
                found[subject] = (text, found.get(subject, (text, 0))[1] + n)
    return snapshot.snapshot_id, found


def reapply_canonical(coordinator: PrivacyCoordinator, report: ReconcileReport) -> None:
    """Re-delete completed deletions' subjects from the canonical tables' current snapshots (see the module docstring)."""
    tables = coordinator.tables
    if tables is None:
        return
    subjects, retained = _deleted(coordinator, report)
    unreadable: list[str] = []
    for spec in coordinator.subject_specs():
        ident, column = tables.identifier(spec), spec.entity
        assert column is not None
        try:
            if not tables.exists(spec):
                continue
            snapshot, found = _found(coordinator, ident, column, subjects) if subjects else (tables.current_snapshot_id(spec), {})
        except Exception as exc:  # unreadable is not "holds no deleted subject": the other tables first, then stop naming it
            unreadable.append(f"canonical table {ident} cannot be checked for deleted subjects' rows ({type(exc).__name__}: {exc})")
            continue
        report.canonical_checked[ident] = snapshot
        for subject, (value, rows) in sorted(found.items()):
            if (subject, ident) in retained:
                continue
            report.canonical_rows.append(_redelete(coordinator, spec, ident, subject, subjects[subject], value, rows))
    if unreadable:
        raise CanonicalReconcileError("; ".join(unreadable) + ": nothing is reported clean; repair or restore it, then rerun `dsv privacy reconcile`")


def _redelete(coordinator: PrivacyCoordinator, spec: Any, ident: str, subject: str, request_id: str, value: str, rows: int) -> dict[str, Any]:
    """The deletion's canonical stage again for one subject and table, audited; refused to report done while rows are left."""
    assert coordinator.tables is not None
    if coordinator.gate is not None:
        coordinator.gate.require(Role.PRIVACY_OFFICER)
    detail = delete_canonical(coordinator.tables, spec, value, coordinator._tag_states(spec.name))
    left = coordinator.tables.count_matching(spec, spec.entity, value)
    if left:
        raise CanonicalReconcileError(f"canonical table {ident}: {left} row(s) of deleted subject {subject[:16]}… still current after the re-delete")
    entry = {"table": ident, "subject_key_hash": subject, "request_id": request_id, "rows": rows, "deletion": detail}
    if coordinator.gate is not None:
        audited = {"request_id": request_id, "table": ident, "rows": rows, "expired_snapshots": len(detail.get("expired_snapshots", []))}
        coordinator.gate.audit(AUDIT_ACTION, f"subject:{subject}", reason="a restored canonical warehouse held a deleted subject's rows", detail=audited)
    return entry


__all__ = ["AUDIT_ACTION", "CanonicalReconcileError", "ReconcileReport", "reapply_canonical"]
