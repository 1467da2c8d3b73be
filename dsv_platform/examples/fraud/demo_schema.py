"""The renamed-column step of the fraud demo, classified.

The source renamed ``merchant_risk`` to ``merchant_risk_score`` and the compatibility view
loads it under the old name, so the content hash does not move. But the source now declares
the column an uncalibrated vendor score, no longer a probability: the schema diff shows a
rename with a unit change, breaking for fraud_training_set, where the hashes show nothing.
"""

from __future__ import annotations

import textwrap

from dsv_platform.cli.schema_cmd import render
from dsv_platform.core.config.platform_config import PlatformConfig
from dsv_platform.core.contracts.contract import Contract, parse_contract
from dsv_platform.core.contracts.schema_diff import ChangeKind, Consumer, SchemaDiff, diff_contracts

OLD, NEW = "merchant_risk", "merchant_risk_score"
SCORE_UNIT = "score"
SCORE_MEANING = "uncalibrated risk score of the new vendor model (0..1, no longer a probability)"
READER = "fraud_training_set:v6"


def declared_after_rename(contract: Contract) -> Contract:
    """The contract the source declares with its renamed batch: ``merchant_risk`` -> ``merchant_risk_score``, meaning changed."""
    doc = contract.to_document()
    for col in doc["columns"]:
        if col["name"] == OLD:
            col.update(name=NEW, renamed_from=OLD, unit=SCORE_UNIT, description=SCORE_MEANING)
    return parse_contract(doc, source=f"{contract.source or contract.name} (as the source now declares it)")


def rename_diff(config: PlatformConfig) -> SchemaDiff:
    """The transactions contract against the one the source now declares; the v6 training set is its consumer."""
    contract = config.sources["transactions"].contract
    reads = [c for c in config.dataset("fraud_training_set", "v6").contract.column_names if c in contract.column_names]
    return diff_contracts(contract, declared_after_rename(contract), [Consumer(READER, tuple(reads))])


def report_rename(config: PlatformConfig) -> int:
    """Print the diff under the demo's renamed-column step; 0 when it is flagged as it must be (rename + unit change, breaking)."""
    diff = rename_diff(config)
    kinds = {c.kind for c in diff.changes if c.column == OLD}
    flagged = diff.verdict == "breaking" and {ChangeKind.RENAME, ChangeKind.UNIT_CHANGE} <= kinds and diff.consumers[0].verdict == "breaking"
    print(textwrap.indent(render(diff, "schema diff of transactions"), "  "))
    print(
        f"  the compatibility view loads the same bytes, so the content hash is unchanged, but {OLD} changed meaning: "
        f"{'flagged BREAKING for ' + READER + ' (a new definition version is needed): ok' if flagged else 'NOT flagged: NOT OK'}"
    )
    return 0 if flagged else 1
