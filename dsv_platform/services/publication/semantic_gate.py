"""The semantic publication gate: a contract's rules on a dataset build, against its baseline.

The baseline is the contract's ``expectations.baseline`` reference, else the newest
readable (PUBLISHED or ELIGIBLE) realization of the same definition, found through
the registry before the new one is published. Each rule becomes one gate of the
quality report; a failed ``block`` rule fails the build. Details: docs/contracts.md
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import pyarrow as pa

from dsv_platform.core.contracts.contract import Contract
from dsv_platform.core.contracts.semantic import RuleResult
from dsv_platform.core.contracts.semantic_rules import declared_rules, evaluate
from dsv_platform.core.errors import ExpiredError, NotFoundError, ObjectStoreError, QuarantinedError, RedactedError, ResolutionError
from dsv_platform.core.publication.gates import GateResult
from dsv_platform.services.publication.datasets import open_baseline
from dsv_platform.services.publication.stored_report import StoredReportError, stored_report

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform

GATE_PREFIX = "semantic"
RECORDED = (RedactedError, ExpiredError, QuarantinedError)  # states the registry records on purpose: no baseline, never a fault


class Baseline(NamedTuple):
    """The baseline realization: its ref and rows; ``unreadable`` says why a baseline the registry holds readable does not read."""

    ref: str | None
    rows: pa.Table | None
    unreadable: str | None = None


def baseline_of(platform: Platform, name: str, version: str, contract: Contract) -> Baseline:
    """The baseline realization; ``ref`` None when there is none yet (a named baseline must resolve and read).

    One erased or held on the record (REDACTED, EXPIRED, QUARANTINED) is no baseline, and the gate says so;
    any other failure to read it (CORRUPT, a lost object, ...) is ``unreadable``: the baseline gate blocks.
    """
    named = (contract.expectations or {}).get("baseline")
    try:
        ref = str(named) if named else platform.registry.resolve(name, version, actor=platform.actor).ref
    except (NotFoundError, *RECORDED):  # none readable yet (or only redacted / expired / quarantined ones): no baseline
        if named:
            raise
        return Baseline(None, None)
    try:
        with open_baseline(platform, ref) as ds:  # as the builder, whole: the new rows are compared with what was published
            return Baseline(ds.ref, ds.to_arrow())
    except RECORDED as exc:  # erased or held on the record: build without one, say why
        if named:
            raise
        return Baseline(f"none: {ref} is {exc.kind.name}", None)
    except (ResolutionError, ObjectStoreError) as exc:  # corrupt or lost: the drift and volume gates cannot be judged
        if named:
            raise
        kind = exc.kind.name if isinstance(exc, ResolutionError) else "CORRUPT"
        return Baseline(ref, None, f"baseline unreadable: {ref} ({kind}: {exc})")


def gate_of(result: RuleResult, name: str) -> GateResult:
    detail: dict[str, str | int | bool | None] = {
        "family": result.family,
        "rule": result.rule,
        "column": result.column,
        "severity": result.severity,
        "observed": None if result.observed is None else str(result.observed),
        "bound": result.bound,
    }
    return GateResult(name, result.passed, detail, blocking=result.blocking)


def gates_of(results: tuple[RuleResult, ...], baseline_ref: str | None = None, unreadable: str | None = None) -> list[GateResult]:
    """One gate per rule, named ``semantic:<family>:<rule>:<column>`` (``#n`` when a name repeats); with drift or volume
    rules a ``semantic:baseline`` gate, failed and blocking when the baseline is ``unreadable``."""
    gates: list[GateResult] = []
    seen: dict[str, int] = {}
    for r in results:
        name = f"{GATE_PREFIX}:{r.family}:{r.rule}:{r.column or 'table'}"
        seen[name] = seen.get(name, 0) + 1
        gates.append(gate_of(r, name if seen[name] == 1 else f"{name}#{seen[name]}"))
    if gates and any(r.family in ("drift", "volume") for r in results):
        detail = {"ref": baseline_ref or "none (first publication)", **({"reason": unreadable} if unreadable else {})}
        gates.append(GateResult(f"{GATE_PREFIX}:baseline", unreadable is None, detail, blocking=unreadable is not None))
    return gates


def semantic_gates(platform: Platform, name: str, version: str, contract: Contract, rows: pa.Table) -> list[GateResult]:
    """The contract's semantic rules on ``rows`` as gates (empty when the contract declares none)."""
    rules = declared_rules(contract)
    if not rules:
        return []
    needs_baseline = any(r.family in ("drift", "volume") for r in rules)
    baseline = baseline_of(platform, name, version, contract) if needs_baseline else Baseline(None, None)
    return gates_of(evaluate(rows, contract, baseline.rows), baseline.ref, baseline.unreadable)


def stored_semantic_gates(platform: Platform, manifest_hash: str) -> list[GateResult]:
    """The semantic gates of the quality report stored with a realization (a reused build reports them again)."""
    return stored_gates(platform, manifest_hash, GATE_PREFIX)


def stored_gates(platform: Platform, manifest_hash: str, prefix: str | None) -> list[GateResult]:
    """The gates named ``<prefix>:...`` (``None``: every gate) of the quality report stored with a realization (empty when it has none).

    A report refused (stored_report.py: it does not read, or it is another manifest's) is one failed blocking gate
    ``<prefix>:quality_report`` saying so (fail closed, docs/reliability.md): a reused build never shows "no gates"
    for gates it cannot read, nor another manifest's gates."""
    try:
        doc = stored_report(platform.registry, platform.store, manifest_hash)
    except StoredReportError as e:
        return [unreadable_report_gate(prefix, e.digest, e)]
    if doc is None:
        return []
    gates = [g for g in doc.get("gates", []) if prefix is None or str(g.get("name", "")).startswith(f"{prefix}:")]
    return [GateResult(g["name"], bool(g["passed"]), dict(g.get("detail", {})), blocking=bool(g.get("blocking", True))) for g in gates]


def unreadable_report_gate(prefix: str | None, digest: str, error: Exception) -> GateResult:
    """The failed gate that stands for a stored quality report that does not read (gone, corrupt or not JSON)."""
    name = f"{prefix}:quality_report" if prefix else "quality_report"
    reason = str(error).splitlines()[0] if str(error) else type(error).__name__
    detail = {"rule": "quality_report", "observed": f"unreadable: {digest} ({reason})", "bound": "a readable stored quality report"}
    return GateResult(name, False, detail, blocking=True)
