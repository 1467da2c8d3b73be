"""The fraud example's sources and label contract, read from its configuration folder (``config/``)."""

from __future__ import annotations

from dsv_platform.core.config.labels import parse_label_file
from dsv_platform.core.config.source import SourceSpec, parse_source
from dsv_platform.core.config_yaml import read_yaml
from dsv_platform.core.contracts.contract import Contract
from dsv_platform.examples.fraud import CONFIG_DIR


def source(name: str) -> SourceSpec:
    """The fraud source ``name`` as configured in ``config/sources/<name>.yaml``."""
    path = CONFIG_DIR / "sources" / f"{name}.yaml"
    return parse_source(read_yaml(path), file=path)


def label_contract() -> Contract:
    """The contract of the fraud labels (``config/labels/fraud.yaml``)."""
    path = CONFIG_DIR / "labels" / "fraud.yaml"
    return parse_label_file(read_yaml(path), file=path).contract


TRANSACTIONS = source("transactions")
CHARGEBACKS = source("chargebacks")
ACCOUNT_FEATURES = source("account_features")
SOURCES: dict[str, SourceSpec] = {s.name: s for s in (TRANSACTIONS, CHARGEBACKS, ACCOUNT_FEATURES)}
FRAUD_LABELS = label_contract()
