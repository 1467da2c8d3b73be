"""The fraud domain's sources and canonical tables: contract, valid-time column, compatibility views."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from dsv_platform.core.contract import Contract, load_contract

CONTRACTS_DIR = Path(__file__).resolve().parent.parent / "contracts"


@dataclass(frozen=True)
class TableSpec:
    """A canonical table: its contract, which column is valid time, and source column aliases.

    ``aliases`` is the compatibility view over a source's renamed columns:
    ``{name the source sends now: contract column name}``.
    """

    name: str
    contract_file: str
    valid_time: str
    aliases: Mapping[str, str] = field(default_factory=dict)

    @property
    def contract(self) -> Contract:
        return load_named_contract(self.contract_file)

    @property
    def partition_by(self) -> str:
        part = self.contract.partition_by
        assert part is not None, f"contract {self.contract_file} declares no partition_by"
        return part


@cache
def load_named_contract(name: str) -> Contract:
    """A contract shipped in ``dsv_platform/contracts/<name>.yaml``."""
    return load_contract(CONTRACTS_DIR / f"{name}.yaml")


TRANSACTIONS = TableSpec("transactions", "transactions", valid_time="created_at", aliases={"merchant_risk_score": "merchant_risk"})
CHARGEBACKS = TableSpec("chargebacks", "chargebacks", valid_time="charged_back_at")
ACCOUNT_FEATURES = TableSpec("account_features", "account_features", valid_time="feature_date")
SOURCES: dict[str, TableSpec] = {s.name: s for s in (TRANSACTIONS, CHARGEBACKS, ACCOUNT_FEATURES)}
"""Landed sources by name; each lands raw batches and feeds the canonical table of the same name."""

FRAUD_LABELS = TableSpec("fraud_labels", "fraud_labels", valid_time="event_date")
