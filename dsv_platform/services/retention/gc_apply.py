"""Apply a GC plan to the backends: registry first, then Iceberg, then objects (crash and staleness semantics in gc.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from dsv_platform.adapters.iceberg import iceberg_maintenance as ice
from dsv_platform.adapters.iceberg.iceberg import CanonicalTables
from dsv_platform.adapters.iceberg.iceberg_refs import set_ref_ages
from dsv_platform.adapters.objects.object_store import ObjectStore
from dsv_platform.adapters.registry.collection import RegistryChangedError
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.errors import DsvError, IllegalTransitionError
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.core.retention.gc import Action, GcPlan
from dsv_platform.core.trust.trust import Role

if TYPE_CHECKING:
    from dsv_platform.services.trust.trust import Gatekeeper

S = RealizationState
Step = Callable[[str, str], None]
DELETE_BATCH = 200
STALE_CLAIM = timedelta(hours=1)
"""Deletion claims older than this were left by a GC that died; a new apply drops them."""


class GcPlanStaleError(DsvError):
    """The registry changed since the GC plan was computed (or during apply); plan again."""


@dataclass
class ApplyReport:
    dry_run: bool
    expired: list[str] = field(default_factory=list)
    tags_removed: list[str] = field(default_factory=list)
    ref_ages_set: list[str] = field(default_factory=list)  # dependent pins given their ref age (retained, or ageing out)
    snapshots_expired: list[str] = field(default_factory=list)
    data_files_deleted: list[str] = field(default_factory=list)
    objects_deleted: list[str] = field(default_factory=list)
    staging_abandoned: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    bytes_freed: int = 0

    def to_document(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "expired": self.expired,
            "tags_removed": self.tags_removed,
            "ref_ages_set": self.ref_ages_set,
            "snapshots_expired": self.snapshots_expired,
            "data_files_deleted": self.data_files_deleted,
            "objects_deleted": self.objects_deleted,
            "staging_abandoned": self.staging_abandoned,
            "skipped": self.skipped,
            "bytes_freed": self.bytes_freed,
        }

    def summary(self) -> str:
        verb = "would" if self.dry_run else "did"
        return (
            f"{verb} expire {len(self.expired)} realization(s), remove {len(self.tags_removed)} tag(s), expire {len(self.snapshots_expired)} snapshot(s), "
            f"delete {len(self.data_files_deleted)} data file(s) and {len(self.objects_deleted)} object(s), "
            f"abandon {len(self.staging_abandoned)} staging attempt(s), set the ref age of {len(self.ref_ages_set)} pin(s); "
            f"{self.bytes_freed} bytes; skipped {len(self.skipped)}"
        )


_REALIZATION_ID = re.compile(r"realization (\d+)")
_REF_AGE = re.compile(r"max_ref_age_ms=(\d+)")


def check_fresh(registry: Registry, plan: GcPlan) -> None:
    current = registry.state_watermark()
    if _norm(current) != _norm(plan.watermark):
        raise GcPlanStaleError(
            f"the GC plan of {plan.created_at.isoformat()} is stale: the registry changed since (watermark {json.dumps(plan.watermark, sort_keys=True)} "
            f"-> {json.dumps(current, sort_keys=True)}); run `dsv gc plan` again"
        )


def _norm(watermark: Mapping[str, Any]) -> str:
    return json.dumps(watermark, sort_keys=True, default=str)


def apply_plan(
    plan: GcPlan,
    *,
    registry: Registry,
    store: ObjectStore,
    tables: CanonicalTables | None = None,
    dry_run: bool = True,
    actor: str = "dsv-gc",
    on_step: Step | None = None,
    gate: Gatekeeper | None = None,
) -> ApplyReport:
    """Apply ``plan`` (dry run by default); see the module docstring for the refusal and crash semantics.

    With ``gate``, applying needs the operator role and is audited (``gc.apply``); a dry run needs no role.
    """
    step = on_step or (lambda name, detail: None)
    actor = actor if gate is None else gate.identity  # with a gate: the identity that proved its key, never free text
    if gate is not None and not dry_run:
        gate.require(Role.OPERATOR)
    check_fresh(registry, plan)
    report = ApplyReport(dry_run=dry_run)
    todo = {a.value: plan.collectable(a.value) for a in Action}
    todo[Action.SET_REF_AGE.value] = plan.upkeep(Action.SET_REF_AGE.value)  # on kept pins
    if dry_run:
        return _dry_run(report, todo)
    target = f"gc:{plan.created_at.isoformat()}"
    if gate is not None:  # audited before acting: a killed apply still leaves what it set out to do (issue 25 item 5)
        gate.audit("gc.apply.start", target, detail={action: len(decisions) for action, decisions in sorted(todo.items())})
    # (1) registry first: resolution answers EXPIRED before any byte goes
    _expire_realizations(registry, plan, todo, report, step, actor)
    watermark = _norm(registry.state_watermark())

    def still_fresh() -> None:
        if _norm(registry.state_watermark()) != watermark:
            raise GcPlanStaleError("the registry changed during GC apply; stopped before deleting more; run `dsv gc plan` again")

    # (2) Iceberg: tags, then snapshots, then data files no live snapshot references
    if tables is not None:
        _apply_iceberg(tables, todo, report, step, still_fresh)
    # (3) objects, a batch at a time, each claimed in the registry first; then abandoned staging
    _delete_objects(registry, store, todo[Action.DELETE_OBJECT.value], json.loads(watermark), report, step, actor)
    for d in todo[Action.ABANDON_STAGING.value]:
        store.abandon(d.id)
        report.staging_abandoned.append(d.id)
        report.bytes_freed += d.bytes
        step("staging_abandoned", d.id)
    step("done", "")
    if gate is not None:
        gate.audit("gc.apply", target, detail={"expired": len(report.expired), "objects_deleted": len(report.objects_deleted)})
    return report


def _delete_objects(
    registry: Registry, store: ObjectStore, objects: list[Any], watermark: Mapping[str, Any], report: ApplyReport, step: Step, actor: str
) -> None:
    """Delete ``objects`` in batches, each claimed first (adapters/registry/collection.py): a publication naming a claimed
    object waits for its batch, and a new manifest since the plan stops GC before the next batch."""
    registry.clear_stale_deletions(datetime.now(UTC) - STALE_CLAIM)
    for start in range(0, len(objects), DELETE_BATCH):
        batch = objects[start : start + DELETE_BATCH]
        try:
            registry.claim_for_deletion([d.id for d in batch], watermark=watermark, actor=actor)
        except RegistryChangedError as exc:
            raise GcPlanStaleError(f"{exc}; stopped before deleting more; run `dsv gc plan` again") from exc
        try:
            for d in batch:
                if store.delete(d.id):  # the plain, re-creatable delete; never erase() (privacy tombstones)
                    report.bytes_freed += d.bytes
                report.objects_deleted.append(d.id)
                step("object_deleted", d.id)
        finally:
            registry.release_deletion([d.id for d in batch])


def _dry_run(report: ApplyReport, todo: Mapping[str, list[Any]]) -> ApplyReport:
    report.expired = [d.id for d in todo[Action.EXPIRE_REALIZATION.value]]
    report.tags_removed = [d.id for d in todo[Action.REMOVE_TAG.value]]
    report.ref_ages_set = [d.id for d in todo[Action.SET_REF_AGE.value]]
    report.snapshots_expired = [d.id for d in todo[Action.EXPIRE_SNAPSHOT.value]]
    report.data_files_deleted = [d.id for d in todo[Action.DELETE_DATA_FILE.value]]
    report.objects_deleted = [d.id for d in todo[Action.DELETE_OBJECT.value]]
    report.staging_abandoned = [d.id for d in todo[Action.ABANDON_STAGING.value]]
    report.bytes_freed = sum(d.bytes for ds in todo.values() for d in ds if d.action != Action.EXPIRE_REALIZATION.value)
    return report


def _expire_realizations(registry: Registry, plan: GcPlan, todo: Mapping[str, list[Any]], report: ApplyReport, step: Step, actor: str) -> None:
    """Mark every collectable realization EXPIRED (STAGING/SEALED through ABANDONED)."""
    reason = f"garbage collected: no retention root reaches it (GC plan of {plan.created_at.isoformat()})"
    for d in todo[Action.EXPIRE_REALIZATION.value]:
        match = _REALIZATION_ID.search(d.detail)
        if match is None:
            report.skipped.append(f"{d.id}: no realization id in the plan")
            continue
        rid = int(match.group(1))
        try:
            current = registry.get(rid)
            if current.state in (S.STAGING, S.SEALED):
                current = registry.transition(rid, S.ABANDONED, reason=reason, actor=actor)
            if current.state is not S.EXPIRED:
                registry.transition(rid, S.EXPIRED, reason=reason, actor=actor)
        except IllegalTransitionError as exc:
            report.skipped.append(f"realization {rid}: {exc}")
            continue
        report.expired.append(d.id)
        step("expired", d.id)


def _set_ref_ages(tables: CanonicalTables, todo: Mapping[str, list[Any]], report: ApplyReport, step: Step, still_fresh: Callable[[], None]) -> None:
    ages: dict[str, dict[str, int]] = {}
    for d in todo[Action.SET_REF_AGE.value]:
        match = _REF_AGE.search(d.detail)
        if match is None:
            report.skipped.append(f"{d.id}: no max_ref_age_ms in the plan")
            continue
        table, _, tag = d.id.partition("#")
        ages.setdefault(table, {})[tag] = int(match.group(1))
    for table, by_tag in sorted(ages.items()):
        still_fresh()
        for tag in set_ref_ages(tables, table, by_tag):
            report.ref_ages_set.append(f"{table}#{tag}")
            step("ref_age_set", f"{table}#{tag}")


def _apply_iceberg(tables: CanonicalTables, todo: Mapping[str, list[Any]], report: ApplyReport, step: Step, still_fresh: Callable[[], None]) -> None:
    _set_ref_ages(tables, todo, report, step, still_fresh)
    by_table: dict[str, list[str]] = {}
    for d in todo[Action.REMOVE_TAG.value]:
        table, _, tag = d.id.partition("#")
        by_table.setdefault(table, []).append(tag)
    for table, names in sorted(by_table.items()):
        still_fresh()
        ice.remove_tags(tables, table, names)
        for n in names:
            report.tags_removed.append(f"{table}#{n}")
            step("tag_removed", f"{table}#{n}")
    snaps: dict[str, list[int]] = {}
    for d in todo[Action.EXPIRE_SNAPSHOT.value]:
        table, _, sid = d.id.partition("@")
        snaps.setdefault(table, []).append(int(sid))
    for table, ids in sorted(snaps.items()):
        still_fresh()
        live, protected = ice.expire_snapshots(tables, table, ids)
        report.skipped += [f"snapshot {table}@{i}: still referenced by a branch or tag" for i in protected]
        for i in live:
            report.snapshots_expired.append(f"{table}@{i}")
            step("snapshot_expired", f"{table}@{i}")
    _delete_data_files(tables, todo, report, step, still_fresh)


def _delete_data_files(tables: CanonicalTables, todo: Mapping[str, list[Any]], report: ApplyReport, step: Step, still_fresh: Callable[[], None]) -> None:
    files: dict[str, list[Any]] = {}
    for d in todo[Action.DELETE_DATA_FILE.value]:
        files.setdefault(d.detail, []).append(d)
    for table, decisions in sorted(files.items()):
        still_fresh()
        live_files = ice.live_data_files(tables, table)
        for d in decisions:
            if ice.local_key(d.id) in live_files:
                report.skipped.append(f"data file {d.id}: a live snapshot references it")
                continue
            ice.delete_data_file(tables, table, d.id)
            report.data_files_deleted.append(d.id)
            report.bytes_freed += d.bytes
            step("data_file_deleted", d.id)


def expire_source_snapshots(tables: CanonicalTables, *, older_than: datetime | None = None) -> int:
    """Iceberg's own retention (what a table owner may configure): expire every unprotected snapshot older than ``older_than``.

    Tagged snapshots are protected by Iceberg itself; this is how "source
    snapshot expiry set to zero" is simulated. Returns how many went.
    """
    return ice.expire_unprotected(tables, older_than=older_than or datetime.now(UTC) + timedelta(seconds=1))


__all__ = ["ApplyReport", "GcPlanStaleError", "apply_plan", "check_fresh", "expire_source_snapshots"]
