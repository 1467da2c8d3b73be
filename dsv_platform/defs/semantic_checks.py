"""Asset checks of a dataset's semantic rules: one check per rule family on the snapshot asset.

A family holding a blocking rule is a blocking check. A blocking rule that fails stops
the publication in the build (the run fails); warnings publish and show as failed
WARN checks. Metadata carries each rule's observed value and bound. Details: docs/contracts.md
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import dagster as dg

from dsv_platform.core.dataset_definition import DatasetDefinition
from dsv_platform.core.gates import GateResult
from dsv_platform.core.semantic_rules import families
from dsv_platform.defs.metadata import AssetResult, md_table
from dsv_platform.services.realization import RealizationBuild
from dsv_platform.services.semantic_gate import GATE_PREFIX, stored_semantic_gates

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform


def check_name(family: str) -> str:
    return f"semantic_{family}"


def semantic_check_specs(definition: DatasetDefinition, asset_name: str) -> list[dg.AssetCheckSpec]:
    """One check per rule family the output contract declares."""
    return [
        dg.AssetCheckSpec(
            check_name(family),
            asset=asset_name,
            blocking=blocking,
            description=f"the contract's {family} rules ({'blocking' if blocking else 'warnings only'}); docs/contracts.md",
        )
        for family, blocking in sorted(families(definition.contract).items())
    ]


def semantic_check_results(definition: DatasetDefinition, gates: Iterable[GateResult]) -> list[dg.AssetCheckResult]:
    """The results of :func:`semantic_check_specs` from the build's semantic gates (none for a reused realization)."""
    by_family: dict[str, list[GateResult]] = {}
    for g in gates:
        if g.name.startswith(f"{GATE_PREFIX}:") and "family" in g.detail:
            by_family.setdefault(str(g.detail["family"]), []).append(g)
    results = []
    for family, blocking in sorted(families(definition.contract).items()):
        rules = by_family.get(family)
        if not rules:  # a reused realization published before the contract declared this family
            note = dg.MetadataValue.text("not evaluated: the realization's stored quality report holds no rule of this family")
            results.append(dg.AssetCheckResult(check_name=check_name(family), passed=False, severity=dg.AssetCheckSeverity.WARN, metadata={"note": note}))
            continue
        rows = [(g.detail["rule"], g.detail["column"] or "", g.detail["severity"], g.passed, g.detail["observed"], g.detail["bound"]) for g in rules]
        results.append(
            dg.AssetCheckResult(
                check_name=check_name(family),
                passed=all(g.passed for g in rules),
                severity=dg.AssetCheckSeverity.ERROR if blocking else dg.AssetCheckSeverity.WARN,
                metadata={
                    "rules": md_table(["rule", "column", "severity", "passed", "observed", "bound"], rows),
                    "results": dg.MetadataValue.json([dict(g.detail) | {"passed": g.passed} for g in rules]),
                },
            )
        )
    return results


def with_semantic_checks(result: AssetResult, definition: DatasetDefinition, platform: Platform, build: RealizationBuild) -> AssetResult:
    """``result`` (the snapshot's materialization) carrying the semantic check results (a reused build's from its stored report)."""
    gates = stored_semantic_gates(platform, build.manifest_hash) if build.reused else build.gates
    checks = [*(result.check_results or []), *semantic_check_results(definition, gates)]
    replaced: AssetResult = result._replace(check_results=checks)
    return replaced
