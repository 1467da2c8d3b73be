"""Asset checks of the poisoning signals and of quarantine on each dataset snapshot asset (docs/quarantine.md).

``integrity_<signal>``: one check per signal, evaluated by the build (WARN unless the
definition's ``integrity.blocking`` names it; a failed blocking signal fails the build).
``realization_not_quarantined``: a check that can run at any time (from the asset page),
failing while the latest published realization is QUARANTINED, naming the quarantine.
"""

from collections.abc import Iterable

import dagster as dg

from dsv_platform.core.config.dataset_definition import DatasetDefinition
from dsv_platform.core.contracts.integrity_signals import GATE_PREFIX, SIGNALS
from dsv_platform.core.publication.gates import GateResult
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.defs import keys
from dsv_platform.defs.resources import PlatformResource
from dsv_platform.defs.retries import STEP_RETRY, retried_if_transient
from dsv_platform.services.publication.integrity_signals import integrity_policy
from dsv_platform.services.publication.quarantine import quarantine_of

NOT_QUARANTINED = "realization_not_quarantined"


def check_name(signal: str) -> str:
    return f"integrity_{signal}"


def integrity_check_specs(definition: DatasetDefinition, asset_key: dg.AssetKey) -> list[dg.AssetCheckSpec]:
    """One check per integrity signal, blocking where the definition says so."""
    blocking = integrity_policy(definition).blocking
    return [
        dg.AssetCheckSpec(
            check_name(signal),
            asset=asset_key,
            blocking=signal in blocking,
            description=f"poisoning signal {signal} ({'blocking' if signal in blocking else 'warn'}); docs/quarantine.md",
        )
        for signal in SIGNALS
    ]


def _result(signal: str, gate: GateResult | None) -> dg.AssetCheckResult:
    if gate is None:  # a reused realization published before the signal existed
        note = dg.MetadataValue.text("not evaluated: the realization's stored quality report holds no such signal")
        return dg.AssetCheckResult(check_name=check_name(signal), passed=False, severity=dg.AssetCheckSeverity.WARN, metadata={"note": note})
    detail = {k: v for k, v in gate.detail.items() if k != "signal"}
    severity = dg.AssetCheckSeverity.ERROR if gate.blocking else dg.AssetCheckSeverity.WARN
    failed = None if gate.passed else f"{signal}: " + ", ".join(f"{k}={v}" for k, v in detail.items() if v is not None)
    return dg.AssetCheckResult(
        check_name=check_name(signal), passed=gate.passed, severity=severity, description=failed, metadata={"detail": dg.MetadataValue.json(detail)}
    )


def integrity_check_results(gates: Iterable[GateResult]) -> list[dg.AssetCheckResult]:
    """One check result per signal from a build's (or a stored quality report's) gates."""
    by_signal = {g.name.removeprefix(f"{GATE_PREFIX}:"): g for g in gates if g.name.startswith(f"{GATE_PREFIX}:")}
    return [_result(s, by_signal.get(s)) for s in SIGNALS]


def build_quarantine_check(definition: DatasetDefinition) -> dg.AssetChecksDefinition:
    snapshot_key = keys.snapshot(definition)

    @dg.asset_check(
        asset=snapshot_key,
        name=NOT_QUARANTINED,
        retry_policy=STEP_RETRY,
        description="The latest published realization is not QUARANTINED (run it any time; a quarantine names who, when, why).",
    )
    def _not_quarantined(context: dg.AssetCheckExecutionContext, platform: PlatformResource) -> dg.AssetCheckResult:
        with retried_if_transient():
            materialized = keys.latest_materialization(context.instance, snapshot_key)  # or under its flat key (before the upgrade)
            if materialized is None or "manifest_hash" not in materialized.metadata:
                return dg.AssetCheckResult(passed=True, metadata={"note": dg.MetadataValue.text("nothing published yet")})
            mh = str(materialized.metadata["manifest_hash"].value)
            p = platform.get()
            realization = p.registry.find_by_manifest_hash(mh)
            state = realization.state if realization is not None else None
            record = quarantine_of(p, mh)
            metadata: dict[str, dg.MetadataValue] = {"manifest_hash": dg.MetadataValue.text(mh), "state": dg.MetadataValue.text(str(state and state.value))}
            if record is not None:
                metadata["quarantine"] = dg.MetadataValue.json({k: v for k, v in record.to_document().items() if k not in ("affected", "evidence")})
            quarantined = state is RealizationState.QUARANTINED
            why = f"QUARANTINED: {record.ref} by {record.created_by}: {record.reason}" if record is not None else "QUARANTINED (integrity scan)"
            error = dg.AssetCheckSeverity.ERROR
            return dg.AssetCheckResult(passed=not quarantined, severity=error, description=why if quarantined else None, metadata=metadata)

    return _not_quarantined
