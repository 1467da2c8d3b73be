"""Registered consumers and the gate they set, on SQLite and PostgreSQL: a definition version whose changed
output contract breaks a consumer is refused naming it; a new definition version is allowed."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsv_platform.bootstrap import Platform, build_platform
from dsv_platform.core.contracts.schema_diff import ConsumerBreakError
from dsv_platform.core.errors import NotFoundError
from dsv_platform.core.publication.records import DefinitionConflictError
from dsv_platform.services.publication.consumers import UnknownConsumerColumnError, add_consumer, list_consumers, registered_consumers, remove_consumer
from dsv_platform.settings import load_settings
from dsv_platform_tests.services.test_publisher import backend_url

__all__ = ["backend_url"]

ORDERS: dict[str, Any] = {
    "name": "orders",
    "key": ["order_id"],
    "columns": [
        {"name": "order_id", "type": "int64"},
        {"name": "customer_id", "type": "string"},
        {"name": "total", "type": "decimal", "precision": 12, "scale": 2, "unit": "EUR"},
        {"name": "channel", "type": "string", "nullable": True},
    ],
}
RECIPE = {"base": "order_events"}


def orders(**edits: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(ORDERS)
    for col in doc["columns"]:
        col.update(edits.get(col["name"], {}))
    return doc


@pytest.fixture
def platform(backend_url: str, tmp_path: Path) -> Iterator[Platform]:
    settings = load_settings({"DSV_HOME": str(tmp_path / "home"), "DSV_REGISTRY_URL": backend_url, "DSV_ACTOR": "tester"})
    with build_platform(settings) as p:
        p.registry.register_definition("orders", "v1", contract=ORDERS, recipe=RECIPE, owner="sales")
        yield p


def test_add_list_remove_and_unknown_columns(platform: Platform) -> None:
    where, consumer = add_consumer(platform, "orders", "billing", ["order_id", "total", "total"])
    assert where == "orders:v1" and consumer.columns == ("order_id", "total")
    add_consumer(platform, "orders:v1", "crm", ["customer_id"])
    assert [(d, c.name, c.columns) for d, c in list_consumers(platform)] == [("orders", "billing", ("order_id", "total")), ("orders", "crm", ("customer_id",))]
    add_consumer(platform, "orders", "crm", ["customer_id", "channel"])  # again: its columns are replaced
    assert [c.columns for c in registered_consumers(platform, "orders")] == [("order_id", "total"), ("customer_id", "channel")]
    with pytest.raises(UnknownConsumerColumnError, match=r"consumer 'bi': column 'discount' is not a column of orders:v1") as caught:
        add_consumer(platform, "orders", "bi", ["order_id", "discount"])
    assert caught.value.exit_code == 2
    with pytest.raises(NotFoundError):
        add_consumer(platform, "invoices", "bi", ["id"])
    remove_consumer(platform, "orders", "crm")
    assert [c.name for c in registered_consumers(platform, "orders")] == ["billing"]
    with pytest.raises(NotFoundError, match="no consumer 'crm' registered for orders"):
        remove_consumer(platform, "orders", "crm")


def test_columns_are_checked_against_the_configured_contract_when_nothing_is_registered(platform: Platform) -> None:
    where, _ = add_consumer(platform, "fraud_training_set", "fraud_model", ["amount", "merchant_risk"])
    assert where == "fraud_training_set:v6"  # the configuration folder's newest version
    with pytest.raises(UnknownConsumerColumnError, match="column 'merchant_risk_score'"):
        add_consumer(platform, "fraud_training_set:v5", "fraud_model", ["merchant_risk_score"])


def test_a_change_that_breaks_a_consumer_is_refused_naming_it_and_a_new_version_is_allowed(platform: Platform) -> None:
    registry = platform.registry
    add_consumer(platform, "orders", "billing", ["order_id", "total"])
    breaking = orders(total={"unit": "USD"})
    with pytest.raises(ConsumerBreakError, match=r"orders:v1: .*consumer 'billing': column 'total' unit_change EUR -> USD") as caught:
        registry.register_definition("orders", "v1", contract=breaking, recipe=RECIPE, owner="sales")
    assert caught.value.exit_code == 17
    assert registry.register_definition("orders", "v2", contract=breaking, recipe=RECIPE, owner="sales").version == "v2"
    # a change no consumer reads: the definition is still immutable, but no consumer is named
    other = orders(channel={"type": "int32"})
    with pytest.raises(DefinitionConflictError) as plain:
        registry.register_definition("orders", "v1", contract=other, recipe=RECIPE, owner="sales")
    assert not isinstance(plain.value, ConsumerBreakError)
    # once the consumer is gone, the same breaking change is the plain conflict again
    remove_consumer(platform, "orders", "billing")
    with pytest.raises(DefinitionConflictError) as after:
        registry.register_definition("orders", "v1", contract=breaking, recipe=RECIPE, owner="sales")
    assert not isinstance(after.value, ConsumerBreakError)
    # the same contract again is still idempotent
    assert registry.register_definition("orders", "v1", contract=ORDERS, recipe=RECIPE, owner="sales").version == "v1"
