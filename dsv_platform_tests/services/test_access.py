"""Issue 16 part 3: access at resolution. A definition declares purposes, restricted columns and a row filter;
open_dataset and `dsv resolve --purpose` refuse a reader without a grant for that purpose (ACCESS_DENIED, exit 7),
withhold restricted columns the grant does not name, and filter rows; records keep no filter values."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pyarrow.compute as pc
import pytest
from sqlalchemy import select

from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry import schema_trust as st
from dsv_platform.bootstrap import build_platform
from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.core.errors import AccessDeniedError
from dsv_platform.core.trust.access import AccessPolicy, RowFilter, parse_access
from dsv_platform.core.trust.trust import Grant, Role
from dsv_platform.examples.fraud import CONFIG_DIR
from dsv_platform.services.publication.datasets import open_dataset
from dsv_platform.services.trust import trust
from dsv_platform.settings import load_settings
from dsv_platform_tests.fixtures.cli_runner import DsvCli
from dsv_platform_tests.scenarios.support import World

DEFINITION = "fraud_training_set:v6"
ACCESS = {"purposes": ["training", "analysis"], "restricted_columns": ["account_id"], "row_filter": {"column": "currency", "not_in": ["CAD"]}}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("access")
    config = root / "config"
    shutil.copytree(CONFIG_DIR, config)
    path = config / "datasets" / "fraud_training_set_v6.yaml"
    path.write_text(path.read_text() + f"access: {json.dumps(ACCESS)}\n")  # JSON is flow-style YAML
    settings = dataclasses.replace(load_settings({}).with_home(root / "home"), config_dir=config)
    world = World.create(settings=settings, days=3)
    world.build()
    analyst, _ = trust.create_identity(world.platform, "analyst", by="test")
    grant = Grant(analyst.name, Role.CONSUMER, definition=DEFINITION, purpose="analysis", columns=("account_id",))
    trust.change_grant(world.platform, grant, add=True, reason="fraud analysis")
    return world


def as_analyst(world: World):  # type: ignore[no-untyped-def]
    return build_platform(dataclasses.replace(world.settings, identity="analyst"))


@pytest.fixture
def dsv(world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> DsvCli:
    """``dsv`` in this process on the world's home (call it with ``identity=``)."""
    return DsvCli(capsys, monkeypatch, {"DSV_HOME": str(world.settings.home), "DSV_CONFIG_DIR": str(world.settings.config_dir)})


def test_the_access_block_parses_and_names_bad_keys() -> None:
    policy = parse_access(ACCESS, file="d.yaml")
    assert policy == AccessPolicy(("training", "analysis"), ("account_id",), RowFilter("currency", "not_in", ("CAD",)))
    assert policy.withheld(()) == ("account_id",) and policy.withheld(["account_id"]) == ()
    for bad, key in (
        ({"purpose": ["x"]}, "'access'"),
        ({"purposes": ["Not A Purpose"]}, "access.purposes"),
        ({"row_filter": {"column": "c", "in": ["a"], "equals": "b"}}, "access.row_filter"),
        ({"row_filter": {"column": "c", "in": []}}, "access.row_filter.in"),
    ):
        with pytest.raises(ConfigError, match=key):
            parse_access(bad, file="d.yaml")


def test_a_declared_purpose_reads_with_restricted_columns_withheld_and_rows_filtered(world: World) -> None:
    ds = open_dataset(world.platform, DEFINITION, purpose="training")  # admin: every role, no column grants
    table = ds.to_arrow(split="train")
    assert "account_id" not in table.column_names and "transaction_id" in table.column_names
    assert table.num_rows > 0 and "CAD" not in set(table.column("currency").to_pylist())
    full = pc.sum(pc.not_equal(ds.to_arrow().column("currency"), "CAD")).as_py()
    assert ds.to_arrow().num_rows == full, "to_arrow() applies the row filter too"
    assert ds.verify_content() == ds.content_hash, "verification re-hashes the stored rows, not the filtered view"


def test_an_undeclared_purpose_is_refused(world: World) -> None:
    with pytest.raises(AccessDeniedError, match="purpose 'marketing' is not declared for fraud_training_set:v6") as info:
        open_dataset(world.platform, DEFINITION, purpose="marketing")
    assert info.value.exit_code == 7


def test_a_consumer_reads_only_for_the_purpose_it_was_granted(world: World) -> None:
    with as_analyst(world) as platform:
        ds = open_dataset(platform, DEFINITION, purpose="analysis")
        assert "account_id" in ds.to_arrow().column_names, "the grant names the restricted column"
        with pytest.raises(AccessDeniedError, match=r"identity 'analyst' has no grant for role 'consumer'.*purpose=training"):
            open_dataset(platform, DEFINITION, purpose="training")
        with pytest.raises(AccessDeniedError, match="its grants name a purpose: pass --purpose"):
            open_dataset(platform, DEFINITION)


def test_dsv_resolve_purpose_exit_codes(dsv: DsvCli) -> None:
    ok = dsv("resolve", DEFINITION, "--purpose", "analysis", "--json", identity="analyst")
    assert ok.code == 0, ok.err
    doc = json.loads(ok.out)
    assert doc["access"] == {"identity": "analyst", "purpose": "analysis", "withheld_columns": [], "row_filter": "currency not_in <1 value(s)>"}
    denied = dsv("resolve", DEFINITION, "--purpose", "training", identity="analyst")
    assert denied.code == 7 and denied.err.strip().count("\n") == 0 and "ACCESS_DENIED" in denied.err, denied.err


def test_consumption_records_keep_identity_and_purpose_never_filter_values(world: World) -> None:
    open_dataset(world.platform, DEFINITION, purpose="training").to_arrow()  # its own read: xdist may run this test alone
    with world.registry.engine.connect() as conn:
        details = [json.loads(d) for d in conn.execute(select(s.consumption_records.c.detail_json)).scalars()]
    read = [d for d in details if d.get("purpose") == "training" and "identity" in d]
    assert read and read[0]["withheld_columns"] == ["account_id"] and read[0]["row_filter"] == "currency not_in <1 value(s)>"
    assert not any("CAD" in json.dumps(d) for d in details)


def test_the_fraud_model_asset_is_refused_without_a_training_grant(world: World) -> None:
    import dagster as dg

    from dsv_platform.defs import build_defs, keys
    from dsv_platform.examples.fraud.defs import MODEL_NAME as ASSET
    from dsv_platform.examples.fraud.defs import TRAINING_SET

    ref = world.registry.resolve_ref(DEFINITION).ref
    defs = build_defs(dataclasses.replace(world.settings, identity="analyst"))  # the resource runs as an identity granted analysis only
    with dg.DagsterInstance.ephemeral() as instance:
        instance.report_runless_asset_event(dg.AssetMaterialization(TRAINING_SET, metadata={"ref": ref}))
        result = dg.materialize([*defs.assets], selection=[keys.model(ASSET)], instance=instance, resources=defs.resources, raise_on_error=False)
    assert not result.success
    cause = next(e for e in result.all_events if e.is_step_failure).step_failure_data.error.cause  # type: ignore[union-attr]
    assert cause is not None and cause.cls_name == "AccessDeniedError" and "purpose=training" in cause.message


def test_dsv_table_location_needs_a_grant_on_the_table_and_is_audited(world: World, dsv: DsvCli) -> None:
    """A purpose-scoped consumer reads through open_dataset only: the table's location would give every row and column."""
    denied = dsv("table-location", "transactions", identity="analyst")
    assert denied.code == 7 and denied.err.strip().count("\n") == 0, denied.err
    assert "'analyst' may not read canonical table 'transactions' directly" in denied.err and "source=transactions" in denied.err
    engineer, _ = trust.create_identity(world.platform, "table_reader", by="test")
    trust.change_grant(world.platform, Grant(engineer.name, Role.CONSUMER, source="transactions"), add=True, reason="feature engineering")
    ok = dsv("table-location", "transactions", "--json", identity="table_reader")
    assert ok.code == 0, ok.err
    assert "metadata_location" in json.loads(ok.out)
    other = dsv("table-location", "chargebacks", identity="table_reader")
    assert other.code == 7, "a grant on one source is not a grant on another"
    with world.registry.engine.connect() as conn:
        log = st.audit_log
        rows = conn.execute(select(log.c.identity, log.c.action, log.c.target).where(log.c.action == "table.location")).all()
    assert [tuple(r) for r in rows] == [("table_reader", "table.location", "table:transactions")]
