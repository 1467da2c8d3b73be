"""Every gate of a dataset snapshot as an asset check, and a blocking gate failure as failed checks plus a ``dg.Failure``.

``semantic_<family>`` and ``integrity_<signal>`` carry the contract's rules and the poisoning signals;
``dataset_gates`` carries the rest (row count, split invariants, label coverage, the output contract,
the drift baseline). When a blocking gate fails the build, the step yields every check's result first
(a failed one names its rule, observed value and bound), then fails with the quality report and a
table of the failed rules, so the UI shows failed checks, not "not executed". Details: docs/contracts.md
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import dagster as dg

from dsv_platform.core.config.dataset_definition import DatasetDefinition
from dsv_platform.core.contracts import integrity_signals as sig
from dsv_platform.core.publication.gates import GateResult, GatesFailedError
from dsv_platform.defs.integrity_checks import integrity_check_results
from dsv_platform.defs.metadata import table
from dsv_platform.defs.semantic_checks import semantic_check_results
from dsv_platform.services.publication.semantic_gate import GATE_PREFIX

DATASET_GATES = "dataset_gates"
FAILED_RULES = ("gate", "rule", "column", "observed", "bound", "blocking")
_BOUNDS = {
    "splits_are_entity_disjoint": "no entity in two splits",
    "proportions_within_tolerance": "split proportions within the tolerance",
    "rows_satisfy_contract": "every row satisfies the output contract",
}


def dataset_gates_spec(asset_key: dg.AssetKey) -> dg.AssetCheckSpec:
    return dg.AssetCheckSpec(
        DATASET_GATES,
        asset=asset_key,
        blocking=True,
        description="the definition's gates: row count, split invariants, label coverage, output contract, drift baseline; docs/contracts.md",
    )


def rule_of(gate: GateResult) -> tuple[str, str, str, str]:
    """A gate as (rule, column, observed value, bound), whatever its kind."""
    d = gate.detail
    if gate.name == "rows_at_least":
        return "rows_at_least", "", str(d.get("rows")), f">= {d.get('minimum')} rows"
    if gate.name == "label_coverage":
        return "label_coverage", "", f"{d.get('coverage_bp')} bp", f">= {d.get('minimum_bp')} bp"
    rule = str(d.get("rule") or d.get("signal") or gate.name)
    shown = {k: v for k, v in d.items() if k not in ("family", "rule", "column", "severity", "bound", "signal", "evaluated")}
    observed = str(d["observed"]) if "observed" in d else str(d.get("share")) if "share" in d else ", ".join(f"{k}={v}" for k, v in shown.items())
    bound = str(d["bound"]) if d.get("bound") is not None else _BOUNDS.get(gate.name, "the gate passes")
    return rule, str(d.get("column") or ""), observed or "-", bound


def _first_failed(gates: Sequence[GateResult]) -> dict[str, dg.MetadataValue]:
    """``rule``, ``observed`` and ``bound`` of the first failed gate (a blocking one first); empty when all passed."""
    failed = sorted((g for g in gates if not g.passed), key=lambda g: not g.blocking)
    if not failed:
        return {}
    rule, column, observed, bound = rule_of(failed[0])
    shown = {"rule": rule, "observed": observed, "bound": bound, **({"column": column} if column else {})}
    return {k: dg.MetadataValue.text(v) for k, v in shown.items()}


def failed_rules_table(gates: Iterable[GateResult]) -> dg.MetadataValue:
    return table(FAILED_RULES, [(g.name, *rule_of(g), g.blocking) for g in gates if not g.passed])


def _is_dataset_gate(gate: GateResult) -> bool:
    """Not shown by a semantic family check nor by an integrity signal check."""
    return not (gate.name.startswith(f"{sig.GATE_PREFIX}:") or (gate.name.startswith(f"{GATE_PREFIX}:") and "family" in gate.detail))


def dataset_gates_result(gates: Sequence[GateResult]) -> dg.AssetCheckResult:
    ours = [g for g in gates if _is_dataset_gate(g)]
    if not ours:  # a reused realization without a stored quality report
        note = dg.MetadataValue.text("not evaluated: the realization has no stored quality report")
        return dg.AssetCheckResult(check_name=DATASET_GATES, passed=False, severity=dg.AssetCheckSeverity.WARN, metadata={"note": note})
    blocked = any(g.blocking and not g.passed for g in ours)
    rows = [(g.name, *rule_of(g), g.passed, g.blocking) for g in ours]
    return dg.AssetCheckResult(
        check_name=DATASET_GATES,
        passed=all(g.passed for g in ours),
        severity=dg.AssetCheckSeverity.ERROR if blocked or all(g.passed for g in ours) else dg.AssetCheckSeverity.WARN,
        description="; ".join(f"{r[1]}: observed {r[3]}, bound {r[4]}" for r in rows if not r[5]) or None,
        metadata={"gates": table(["gate", "rule", "column", "observed", "bound", "passed", "blocking"], rows), **_first_failed(ours)},
    )


def with_first_failed(result: dg.AssetCheckResult, gates: Sequence[GateResult]) -> dg.AssetCheckResult:
    """``result`` with its first failed rule's ``rule``, ``observed`` and ``bound`` in its metadata."""
    extra = _first_failed(gates) if not result.passed else {}
    return result._replace(metadata={**(result.metadata or {}), **extra}) if extra else result


def snapshot_check_results(definition: DatasetDefinition, gates: Sequence[GateResult]) -> list[dg.AssetCheckResult]:
    """One result per check spec of the snapshot asset, from a build's (or a stored quality report's) gates."""
    semantic = [
        with_first_failed(r, [g for g in gates if g.name.startswith(f"{GATE_PREFIX}:") and f"semantic_{g.detail.get('family')}" == r.check_name])
        for r in semantic_check_results(definition, gates)
    ]
    integrity = [with_first_failed(r, [g for g in gates if f"integrity_{g.name.split(':', 1)[-1]}" == r.check_name]) for r in integrity_check_results(gates)]
    return [*semantic, *integrity, dataset_gates_result(gates)]


def gates_failure(exc: GatesFailedError) -> dg.Failure:
    """The step's failure: the message, the failed rules (gate, rule, observed value, bound) and the quality report."""
    failed = exc.report.failed
    named = ((g.name, *rule_of(g)) for g in failed if g.blocking)
    lines = [f"{name}: rule {rule} observed {observed}, bound {bound}" for name, rule, _, observed, bound in named]
    return dg.Failure(
        description="\n".join([str(exc), *lines]),
        metadata={
            "failed_rules": failed_rules_table(failed),
            "quality_report": dg.MetadataValue.json(exc.report.to_document()),
            "quality_report_object": dg.MetadataValue.text(exc.report_object),
        },
        allow_retries=False,  # a data verdict: a retry gives the same answer
    )


def failed_gate_events(definition: DatasetDefinition, exc: GatesFailedError) -> Iterator[dg.AssetCheckResult]:
    """Every check's result from the failed build's gates, then the step's :func:`gates_failure` (raised from ``exc``)."""
    yield from snapshot_check_results(definition, exc.report.gates)
    raise gates_failure(exc) from exc
