"""`dsv schema diff` and `dsv consumers` through the real CLI on an orders contract: exit 0 compatible,
9 breaking, the exact JSON shape, typed one-line errors for bad files and unknown columns."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.contracts.contract import load_contract
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


def plain_env(tmp_path: Path) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("DSV_")} | {"DSV_HOME": str(tmp_path / "unused-home")}


def test_schema_diff_json_shape_and_exit_codes(tmp_path: Path) -> None:
    old, new, ok = write(tmp_path, "old.yaml", OLD), write(tmp_path, "new.yaml", NEW), write(tmp_path, "ok.yaml", COMPATIBLE)
    env = plain_env(tmp_path)
    result = dsv("schema", "diff", old, new, "--json", env=env)
    assert result.returncode == 9, result.stderr
    doc = json.loads(result.stdout)
    assert set(doc) == {"verdict", "changes", "consumers"} and doc["verdict"] == "breaking" and doc["consumers"] == []
    assert all(set(c) == {"column", "kind", "old", "new", "breaking"} for c in doc["changes"])
    assert [(c["column"], c["kind"], c["breaking"]) for c in doc["changes"]] == [
        ("customer_id", "rename", True),
        ("qty", "widening", False),
        ("total", "unit_change", True),
        ("status", "semantic", True),
        ("coupon", "additive", False),
    ]
    compatible = dsv("schema", "diff", old, ok, "--json", env=env)
    assert compatible.returncode == 0 and json.loads(compatible.stdout)["verdict"] == "compatible"
    text = dsv("schema", "diff", old, new, env=env)
    assert text.returncode == 9 and "BREAKING" in text.stdout and "total: unit_change EUR -> USD (breaking)" in text.stdout
    assert not (tmp_path / "unused-home").exists()  # a diff without --definition touches no registry


def test_schema_diff_reads_source_and_dataset_files(tmp_path: Path) -> None:
    config = Path(__file__).resolve().parents[2] / "dsv_platform" / "examples" / "fraud" / "config"
    v5, v6 = config / "datasets" / "fraud_training_set_v5.yaml", config / "datasets" / "fraud_training_set_v6.yaml"
    same = dsv("schema", "diff", str(v5), str(v6), "--json", env=plain_env(tmp_path))
    assert same.returncode == 0 and json.loads(same.stdout)["verdict"] == "compatible", same.stdout + same.stderr
    source = config / "sources" / "transactions.yaml"
    doc = yaml.safe_load(source.read_text())
    doc["columns"] = [c for c in doc["columns"] if c["name"] != "note"]
    trimmed = write(tmp_path, "transactions.yaml", yaml.safe_dump(doc))
    removed = dsv("schema", "diff", str(source), trimmed, "--json", env=plain_env(tmp_path))
    assert removed.returncode == 9 and json.loads(removed.stdout)["changes"] == [
        {"column": "note", "kind": "removal", "old": "string", "new": None, "breaking": True}
    ]


def test_bad_files_are_one_line_typed_errors(tmp_path: Path) -> None:
    old = write(tmp_path, "old.yaml", OLD)
    env = plain_env(tmp_path)
    for bad, expected in [
        (write(tmp_path, "typo.yaml", OLD.replace("type: int32", "type: int33")), "typo.yaml: column 'qty': unknown type 'int33'"),
        (write(tmp_path, "rename.yaml", NEW.replace("renamed_from: customer_id", "renamed_from: client")), "names no column of"),
        (str(tmp_path / "missing.yaml"), "missing.yaml"),
    ]:
        result = dsv("schema", "diff", old, bad, "--json", env=env)
        assert result.returncode == 2 and result.stdout == "", (result.returncode, result.stdout)
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("dsv: error:") and expected in result.stderr, result.stderr


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
