"""Integrity signals at build: gather what each poisoning signal needs and return ``integrity:<signal>`` gates.

The gates go into the realization's quality report beside the others (warn unless the
definition's ``integrity.blocking`` names the signal; a failed blocking signal fails the
build), and the Dagster snapshot asset shows them as checks (defs/integrity_checks.py).
Writers come from the landing index (each batch records who landed it); contributors are
the writer of each example's base-source batch, that batch (``_batch``), or a configured column.
``raw_agreement`` compares the pinned canonical rows with their raw batches (raw_agreement.py).
Details: docs/quarantine.md
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.adapters.iceberg.iceberg_values import BATCH, latest_per_key
from dsv_platform.core.config.dataset_definition import DatasetDefinition
from dsv_platform.core.contracts import integrity_signals as sig
from dsv_platform.core.publication.gates import GateResult
from dsv_platform.core.publication.manifest import Manifest
from dsv_platform.core.publication.states import is_readable
from dsv_platform.services.ingest.canonical_load import held_batches
from dsv_platform.services.publication.examples import Examples
from dsv_platform.services.publication.raw_agreement import raw_agreement_gate
from dsv_platform.services.publication.realization_inputs import Pin
from dsv_platform.services.publication.semantic_gate import baseline_of, stored_gates

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform

CONTRIBUTOR = "__contributor"


def integrity_policy(definition: DatasetDefinition) -> sig.IntegrityPolicy:
    """The definition's ``integrity`` block, its columns checked against the output contract."""
    return sig.parse_integrity(
        definition.document.get("integrity"), file=str(definition.contract.source or definition.ref), columns=definition.contract.column_names
    )


def _approved_snapshots(platform: Platform, definition: DatasetDefinition) -> dict[str, set[int]]:
    """Per source declaring ``approved_refs``: every snapshot those branches and tags reach (themselves and their ancestors)."""
    out: dict[str, set[int]] = {}
    for name in definition.sources:
        spec = platform.config.sources.get(name)
        if spec is None or not spec.approved_refs:
            continue
        refs = platform.tables.table(spec).refs()
        parents = {s.snapshot_id: s.parent_id for s in platform.tables.snapshots(spec)}
        reached: set[int] = set()
        for head in (refs[r].snapshot_id for r in spec.approved_refs if r in refs):
            sid: int | None = head
            while sid is not None and sid not in reached:
                reached.add(sid)
                sid = parents.get(sid)
        out[name] = reached
    return out


def _batches(platform: Platform, definition: DatasetDefinition, pins: Mapping[str, Pin], *, only: Collection[str]) -> dict[str, pa.Table]:
    """Per pinned source named in ``only``: its latest row per key with the ``_batch`` that wrote it."""
    out = {}
    for name in definition.sources:
        spec = platform.config.sources.get(name)
        if spec is not None and name in pins and name in only:
            hist = platform.tables.read(spec, snapshot_id=pins[name].snapshot_id, history=True, columns=())  # key and system columns only
            out[name] = latest_per_key(hist, spec.contract.key).select([*spec.contract.key, BATCH])
    return out


def _writer_column(batches: pa.ChunkedArray | pa.Array, writer_of: Mapping[str, str | None]) -> pa.Array:
    """The writer of each row's batch (null when the landing index holds none)."""
    refs = sorted(writer_of)
    positions = pc.index_in(batches, value_set=pa.array(refs, pa.string()))
    return pc.take(pa.array([writer_of[r] for r in refs], pa.string()), positions)


def _contributors(policy: sig.IntegrityPolicy, examples: pa.Table, base: pa.Table | None, writer_of: Mapping[str, str | None]) -> pa.Table | None:
    """``examples`` with a contributor per row: the configured column, the base-source batch (``_batch``), else that batch's writer."""
    by_batch = policy.contributor_column in sig.BY_BATCH
    if policy.contributor_column is not None and not by_batch:
        return examples.append_column(CONTRIBUTOR, pc.cast(examples.column(policy.contributor_column), pa.string()))
    key = [k for k in base.column_names if k != BATCH] if base is not None else []
    if base is None or not key or not set(key) <= set(examples.column_names):
        return None
    joined = examples.join(base, keys=key, join_type="left outer")
    who = joined.column(BATCH) if by_batch else _writer_column(joined.column(BATCH), writer_of)
    return joined.append_column(CONTRIBUTOR, who).drop_columns([BATCH])


def _exclusion_rules(population_filter: str | None, window: Mapping[str, Any] | None, label: str | None) -> dict[str, Any]:
    """The rules deciding who is excluded: the population filter, the window's column and zone (not its dates), the label version."""
    w = dict(window or {})
    return {"population_filter": population_filter, "window": {k: w.get(k) for k in ("column", "timezone")}, "label": label}


def _previous_version(platform: Platform, definition: DatasetDefinition) -> tuple[dict[str, Any] | None, str | None]:
    """The exclusion rules of the newest readable realization of another version of this dataset."""
    for r in platform.registry.versions(definition.name):
        if r.version != definition.version and is_readable(r.state) and r.manifest_hash:
            m = Manifest.from_json(platform.registry.get_manifest(r.manifest_hash))
            label = f"{m.labels.name}:{m.labels.version}" if m.labels else None
            return _exclusion_rules(m.population_filter, m.observation_window, label), r.ref
    return None, None


def integrity_gates(platform: Platform, definition: DatasetDefinition, examples: Examples, pins: Sequence[Pin]) -> list[GateResult]:
    """Every integrity signal of a build of ``definition`` over ``examples`` (its pinned inputs ``pins``), as gates.

    What a signal reads is read only when the policy evaluates it: batches of the sources that declare
    writers, contributors when a share bound or a label column is set, the whole table for duplicate clusters.
    """
    policy = integrity_policy(definition)
    by_table = {p.table: p for p in pins}
    label = policy.label_column
    needs_rows = policy.max_contributor_share is not None or label is not None
    declared = {n for n in definition.sources if (s := platform.config.sources.get(n)) is not None and s.writers}
    wanted = declared | ({definition.base} if needs_rows and policy.contributor_column not in (*definition.contract.column_names,) else set())
    writer_of = {r.batch_ref: r.writer for r in platform.landing.records()} if wanted else {}
    batches = _batches(platform, definition, by_table, only=wanted)
    sources = {n: platform.config.sources[n] for n in definition.sources if n in platform.config.sources}
    writers = {n: {str(b): writer_of.get(str(b)) for b in pc.unique(t.column(BATCH)).to_pylist()} for n, t in batches.items() if n in declared}
    whole = examples.whole() if needs_rows else None
    rows = _contributors(policy, whole, batches.get(definition.base), writer_of) if whole is not None else None
    duplicate_columns = policy.duplicate_columns or tuple(c for c in definition.contract.column_names if c not in (*definition.contract.key, label))
    baseline = baseline_of(platform, definition.name, definition.version, definition.contract)[1] if label is not None and rows is not None else None
    label_ref = f"{definition.label.name}:v{definition.label.version}" if definition.label is not None else None
    window = definition.observation_window.to_document()
    current = _exclusion_rules(definition.population_filter.to_text() if definition.population_filter else None, window, label_ref)
    previous, previous_ref = _previous_version(platform, definition)
    return [
        sig.unexpected_writer(policy, writers, {n: s.writers for n, s in sources.items()}),
        sig.unapproved_snapshot(policy, {t: p.snapshot_id for t, p in by_table.items()}, _approved_snapshots(platform, definition)),
        sig.contributor_share(policy, None if rows is None else rows.column(CONTRIBUTOR), by=policy.contributor_column or "writer"),
        sig.duplicate_clusters(policy, whole if whole is not None else pa.table({}), duplicate_columns, label),
        sig.label_change_concentration(policy, rows, baseline, definition.contract.key, CONTRIBUTOR),
        sig.exclusion_rules_changed(policy, current, previous, previous_ref),
        raw_agreement_gate(platform, definition, by_table, held=held_batches(platform, definition.sources)),
    ]


def stored_integrity_gates(platform: Platform, manifest_hash: str) -> list[GateResult]:
    """The integrity gates of the quality report stored with a realization (empty when it has none)."""
    return stored_gates(platform, manifest_hash, sig.GATE_PREFIX)
