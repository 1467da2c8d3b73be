"""Asset checks of semantic rules: one check per rule family on the snapshot (and canonical) asset.

A family holding a blocking rule is a blocking check. A blocking rule that fails stops
the publication in the build (the run fails); warnings publish and show as failed
WARN checks. Metadata carries each rule's observed value and bound. Details: docs/contracts.md
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import dagster as dg

from dsv_platform.core.config.dataset_definition import DatasetDefinition
from dsv_platform.core.contracts.semantic_rules import families
from dsv_platform.core.publication.gates import GateResult
from dsv_platform.defs.metadata import table
from dsv_platform.services.publication.semantic_gate import GATE_PREFIX


def check_name(family: str) -> str:
    return f"semantic_{family}"


def family_check_specs(families: Mapping[str, bool], asset_key: dg.AssetKey, what: str = "the contract's") -> list[dg.AssetCheckSpec]:
    """One check per rule family (``families``: family -> whether it holds a blocking rule), blocking where a rule blocks."""
    return [
        dg.AssetCheckSpec(
            check_name(family),
            asset=asset_key,
            blocking=blocking,
            description=f"{what} {family} rules ({'blocking' if blocking else 'warnings only'}); docs/contracts.md",
        )
        for family, blocking in sorted(families.items())
    ]


def semantic_check_specs(definition: DatasetDefinition, asset_key: dg.AssetKey) -> list[dg.AssetCheckSpec]:
    """One check per rule family the output contract declares."""
    return family_check_specs(families(definition.contract), asset_key)


def _failed_lines(rules: list[GateResult]) -> str | None:
    """The failed rules, one per line: where, rule, severity, observed value and bound."""
    lines = []
    for g in (g for g in rules if not g.passed):
        d = g.detail
        where = (f"{d['day']}: " if "day" in d else "") + (f"column {d['column']!r}" if d["column"] else "table")
        lines.append(f"{where}: rule {d['rule']} ({d['severity']}): observed {d['observed']}, bound {d['bound']}")
    return "\n".join(lines) or None


def _severity(blocking: bool, rules: list[GateResult]) -> dg.AssetCheckSeverity:
    """ERROR for a blocking family unless only warn rules failed (a failed WARN check stops nothing downstream)."""
    failed = [g for g in rules if not g.passed]
    return dg.AssetCheckSeverity.ERROR if blocking and (not failed or any(g.blocking for g in failed)) else dg.AssetCheckSeverity.WARN


def _seen(g: GateResult) -> tuple[object, object]:
    return g.detail["observed"], g.detail["bound"]


def family_check_results(families: Mapping[str, bool], gates: Iterable[GateResult]) -> list[dg.AssetCheckResult]:
    """The results of :func:`family_check_specs` from semantic gates (a gate's ``day`` detail, if any, is a column)."""
    by_family: dict[str, list[GateResult]] = {}
    for g in gates:
        if g.name.startswith(f"{GATE_PREFIX}:") and "family" in g.detail:
            by_family.setdefault(str(g.detail["family"]), []).append(g)
    results = []
    for family, blocking in sorted(families.items()):
        rules = by_family.get(family)
        if not rules:  # a reused realization published before the contract declared this family
            note = dg.MetadataValue.text("not evaluated: the realization's stored quality report holds no rule of this family")
            results.append(dg.AssetCheckResult(check_name=check_name(family), passed=False, severity=dg.AssetCheckSeverity.WARN, metadata={"note": note}))
            continue
        days = ["day"] if any("day" in g.detail for g in rules) else []
        header = [*days, "rule", "column", "severity", "passed", "observed", "bound"]
        rows = [(*(g.detail.get(k) for k in days), g.detail["rule"], g.detail["column"] or "", g.detail["severity"], g.passed, *_seen(g)) for g in rules]
        results.append(
            dg.AssetCheckResult(
                check_name=check_name(family),
                passed=all(g.passed for g in rules),
                severity=_severity(blocking, rules),
                description=_failed_lines(rules),
                metadata={
                    "rules": table(header, rows),
                    "results": dg.MetadataValue.json([dict(g.detail) | {"passed": g.passed} for g in rules]),
                },
            )
        )
    return results


def semantic_check_results(definition: DatasetDefinition, gates: Iterable[GateResult]) -> list[dg.AssetCheckResult]:
    """The results of :func:`semantic_check_specs` from the build's semantic gates (none for a reused realization)."""
    return family_check_results(families(definition.contract), gates)
