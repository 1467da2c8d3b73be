"""Dagster's catalog metadata from the configuration: every configured asset has its YAML owner, column schemas from the contracts.

Loads the real Definitions of the shipped fraud configuration (no run); the materialization side
(``dagster/table_name``, ``dagster/row_count``) is tested on a real instance in test_gate_checks.py.
"""

from pathlib import Path

import dagster as dg
import pytest

from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.config.source import contract_of
from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.core.contracts.owners import catalog_owners, owner_of
from dsv_platform.defs import build_defs
from dsv_platform_tests.defs.support import settings_at


@pytest.fixture(scope="module")
def loaded():
    settings = settings_at(Path("/tmp/dsv-never-written"))
    defs = build_defs(settings)
    return load_config(settings.config_dir), defs.resolve_asset_graph()


def _spec(graph, key: str) -> dg.AssetSpec:
    return graph.get(dg.AssetKey.from_user_string(key)).to_asset_spec()


def test_every_configured_asset_has_its_yaml_owner(loaded):
    config, graph = loaded
    for spec in config.sources.values():
        want = [f"team:{spec.contract.owner}"]
        assert _spec(graph, f"raw/{spec.name}").owners == want and _spec(graph, f"canonical/{spec.name}").owners == want
    for d in config.datasets:
        for asset in (f"datasets/{d.name}/{d.version}", f"datasets/{d.name}/{d.version}/splits"):
            assert _spec(graph, asset).owners == [f"team:{d.owner}"], asset
    assert _spec(graph, "labels/fraud").owners == ["team:risk-labels"]
    configured = {k for k in graph.get_all_asset_keys() if k.to_user_string().split("_")[0] in ("raw", "canonical", "labels", "fraud")}
    assert all(_spec(graph, k.to_user_string()).owners for k in configured if k.to_user_string() != "models/fraud_model")


def test_column_schema_comes_from_the_contract(loaded):
    config, graph = loaded
    transactions = config.sources["transactions"].contract
    schema = _spec(graph, "canonical/transactions").metadata["dagster/column_schema"]
    assert isinstance(schema, dg.TableSchema) and [c.name for c in schema.columns] == list(transactions.column_names)
    by_name = {c.name: c for c in schema.columns}
    assert by_name["amount"].type == "decimal(18,2)" and "unit USD" in by_name["amount"].constraints.other
    assert by_name["created_at"].type == "timestamp[us]" and by_name["transaction_id"].description == "source-assigned, unique"
    assert by_name["transaction_id"].constraints.unique and not by_name["transaction_id"].constraints.nullable
    assert by_name["merchant_risk"].constraints.nullable and "allowed values ['USD', 'EUR', 'GBP', 'CAD']" in by_name["currency"].constraints.other
    v6 = config.dataset("fraud_training_set", "v6")
    snapshot = _spec(graph, f"datasets/{v6.name}/{v6.version}").metadata["dagster/column_schema"]
    assert [c.name for c in snapshot.columns] == list(v6.contract.column_names)
    assert [c.name for c in _spec(graph, "labels/fraud").metadata["dagster/column_schema"].columns][:2] == ["transaction_id", "event_date"]


@pytest.mark.parametrize(
    ("owner", "catalog"),
    [("payments-data", ("team:payments-data",)), ("team:risk", ("team:risk",)), ("ana@example.com", ("ana@example.com",)), ("unknown", ()), (None, ())],
)
def test_an_owner_becomes_an_email_or_a_team(owner, catalog):
    assert catalog_owners(owner) == catalog
    assert dg.AssetSpec("x", owners=list(catalog)).owners == list(catalog)  # what Dagster accepts


@pytest.mark.parametrize("owner", ["ana@", "ana@example", "team:", "  ", 7])
def test_a_malformed_owner_is_a_config_error_naming_the_file(owner):
    with pytest.raises(ConfigError, match=r"datasets/x\.yaml.*owner"):
        owner_of({"owner": owner}, "datasets/x.yaml")
    doc = {"name": "t", "key": ["id"], "columns": [{"name": "id", "type": "int64"}], "owner": owner}
    with pytest.raises(ConfigError, match=r"sources/t\.yaml.*owner"):  # a source's owner: its contract's
        contract_of(doc, Path("sources/t.yaml"))
