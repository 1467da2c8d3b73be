"""`dsv schema diff` and `dsv consumers` through the real CLI on an orders contract: exit 0 compatible,
9 breaking, the exact JSON shape, typed one-line errors for bad files and unknown columns.

``dsv schema diff`` runs in this process (:class:`DsvCli`); the consumer commands (slow set) run as processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.contracts.contract import load_contract
from dsv_platform_tests.fixtures.cli_runner import DsvCli
from dsv_platform_tests.services.test_publisher import backend_url, cli_env, dsv

__all__ = ["backend_url"]

OLD = """\
name: orders
key: [order_id]
columns:
  - {name: order_id, type: int64}
  - {name: customer_id, type: string}
  - {name: qty, type: int32}
  - {name: total, type: decimal, precision: 12, scale: 2, unit: EUR}
  - {name: status, type: string, allowed_values: [open, paid]}
"""
NEW = """\
name: orders
key: [order_id]
columns:
  - {name: order_id, type: int64}
  - {name: customer, type: string, renamed_from: customer_id}
  - {name: qty, type: int64}
  - {name: total, type: decimal, precision: 12, scale: 2, unit: USD}
  - {name: status, type: string, allowed_values: [open, paid, refunded]}
  - {name: coupon, type: string, nullable: true}
"""
COMPATIBLE = OLD.replace("type: int32", "type: int64") + "  - {name: coupon, type: string, nullable: true}\n"


def write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> DsvCli:
    """``dsv`` in this process, its home a folder that must stay absent."""
    return DsvCli(capsys, monkeypatch, {"DSV_HOME": str(tmp_path / "unused-home")})


def test_schema_diff_json_shape_and_exit_codes(tmp_path: Path, cli: DsvCli) -> None:
    old, new, ok = write(tmp_path, "old.yaml", OLD), write(tmp_path, "new.yaml", NEW), write(tmp_path, "ok.yaml", COMPATIBLE)
    result = cli("schema", "diff", old, new, "--json")
    assert result.code == 9, result.err
    doc = json.loads(result.out)
    assert set(doc) == {"verdict", "changes", "consumers"} and doc["verdict"] == "breaking" and doc["consumers"] == []
    assert all(set(c) == {"column", "kind", "old", "new", "breaking"} for c in doc["changes"])
    assert [(c["column"], c["kind"], c["breaking"]) for c in doc["changes"]] == [
        ("customer_id", "rename", True),
        ("qty", "widening", False),
        ("total", "unit_change", True),
        ("status", "semantic", True),
        ("coupon", "additive", False),
    ]
    compatible = cli("schema", "diff", old, ok, "--json")
    assert compatible.code == 0 and json.loads(compatible.out)["verdict"] == "compatible"
    text = cli("schema", "diff", old, new)
    assert text.code == 9 and "BREAKING" in text.out and "total: unit_change EUR -> USD (breaking)" in text.out
    assert not (tmp_path / "unused-home").exists()  # a diff without --definition touches no registry


def test_schema_diff_reads_source_and_dataset_files(tmp_path: Path, cli: DsvCli) -> None:
    config = Path(__file__).resolve().parents[2] / "dsv_platform" / "examples" / "fraud" / "config"
    v5, v6 = config / "datasets" / "fraud_training_set_v5.yaml", config / "datasets" / "fraud_training_set_v6.yaml"
    same = cli("schema", "diff", str(v5), str(v6), "--json")
    assert same.code == 0 and json.loads(same.out)["verdict"] == "compatible", same.out + same.err
    source = config / "sources" / "transactions.yaml"
    doc = yaml.safe_load(source.read_text())
    doc["columns"] = [c for c in doc["columns"] if c["name"] != "note"]
    trimmed = write(tmp_path, "transactions.yaml", yaml.safe_dump(doc))
    removed = cli("schema", "diff", str(source), trimmed, "--json")
    assert removed.code == 9 and json.loads(removed.out)["changes"] == [{"column": "note", "kind": "removal", "old": "string", "new": None, "breaking": True}]


def test_bad_files_are_one_line_typed_errors(tmp_path: Path, cli: DsvCli) -> None:
    old = write(tmp_path, "old.yaml", OLD)
    for bad, expected in [
        (write(tmp_path, "typo.yaml", OLD.replace("type: int32", "type: int33")), "typo.yaml: column 'qty': unknown type 'int33'"),
        (write(tmp_path, "rename.yaml", NEW.replace("renamed_from: customer_id", "renamed_from: client")), "names no column of"),
        (str(tmp_path / "missing.yaml"), "missing.yaml"),
    ]:
        result = cli("schema", "diff", old, bad, "--json")
        assert result.code == 2 and result.out == "", (result.code, result.out)
        assert result.err.count("\n") == 1 and result.err.startswith("dsv: error:") and expected in result.err, result.err


@pytest.mark.slow  # every consumer command as its own dsv process, per backend (~20 s each)
def test_consumers_cli_and_per_consumer_verdicts(backend_url: str, tmp_path: Path) -> None:
    old, new = write(tmp_path, "old.yaml", OLD), write(tmp_path, "new.yaml", NEW)
    with Registry.from_url(backend_url) as reg:
        reg.register_definition("orders", "v1", contract=load_contract(old).to_document(), recipe={"base": "x"}, owner="sales")
    env = cli_env(tmp_path, backend_url)
    added = dsv("consumers", "add", "orders", "--name", "fulfilment", "--columns", "order_id,qty", "--json", env=env)
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout) == {"definition": "orders", "checked_against": "orders:v1", "name": "fulfilment", "columns": ["order_id", "qty"]}
    assert dsv("consumers", "add", "orders", "--name", "billing", "--columns", "order_id,total", env=env).returncode == 0
    unknown = dsv("consumers", "add", "orders", "--name", "bi", "--columns", "order_id,discount", env=env)
    assert unknown.returncode == 2 and "column 'discount' is not a column of orders:v1" in unknown.stderr and unknown.stderr.count("\n") == 1
    listed = json.loads(dsv("consumers", "list", "orders", "--json", env=env).stdout)
    assert [(r["name"], r["columns"]) for r in listed] == [("billing", ["order_id", "total"]), ("fulfilment", ["order_id", "qty"])]

    result = dsv("schema", "diff", old, new, "--definition", "orders", "--json", env=env)
    assert result.returncode == 9
    assert json.loads(result.stdout)["consumers"] == [
        {"name": "billing", "verdict": "breaking", "columns": ["order_id", "total"]},
        {"name": "fulfilment", "verdict": "compatible", "columns": ["order_id", "qty"]},
    ]
    assert dsv("consumers", "remove", "orders", "--name", "billing", env=env).returncode == 0
    again = dsv("consumers", "remove", "orders", "--name", "billing", env=env)
    assert again.returncode == 3 and "no consumer 'billing'" in again.stderr
    assert "fulfilment" in dsv("consumers", "list", env=env).stdout
