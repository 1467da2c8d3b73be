"""Fuzz `dsv hash` and `dsv canonical` (issue 11): generated Parquet files and contracts never crash the CLI.

Every example ends in exit 0 with a hash, or a nonzero exit with exactly one line on stderr and no
traceback (and never the internal-error exit 70, which would be a bug caught at the boundary);
`dsv canonical` leaves nothing behind on failure: no ``--out`` file, no temporary file, empty stdout.
Most examples run in-process through ``main(argv)``; a few run the installed ``dsv`` entry point.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsv_platform.cli.main import main
from dsv_platform.core.errors import FailureKind
from dsv_platform.core.publication.failures import exit_code

DSV = str(Path(sys.executable).with_name("dsv"))
I64 = (-(2**63) + 1, 2**63 - 1)
KINDS = ("int32", "string", "bad_string", "decimal", "timestamp", "naive_timestamp", "date", "float64", "bool")


@dataclass
class Column:
    name: str
    array: pa.Array
    spec: dict[str, Any]


@dataclass
class Case:
    table: pa.Table
    contract: str
    partition_by: str | None


def _nullable(draw: st.DrawFn, values: list[Any]) -> list[Any]:
    return [None if draw(st.integers(0, 5)) == 0 else v for v in values]


def _decimal(draw: st.DrawFn, n: int) -> tuple[pa.Array, dict[str, Any]]:
    precision = draw(st.integers(1, 38))
    scale = draw(st.integers(0, precision))
    top = 10**precision - 1
    digits = draw(st.lists(st.one_of(st.sampled_from([top, -top, 0, 1, -1]), st.integers(-top, top)), min_size=n, max_size=n))
    values = [Decimal(f"{d}e-{scale}") for d in digits]  # exact: no context rounding at 28 digits
    declared = draw(st.sampled_from([(precision, scale), (precision, max(scale - 1, 0)), (38, scale)]))
    return pa.array(_nullable(draw, values), pa.decimal128(precision, scale)), {"type": "decimal", "precision": declared[0], "scale": declared[1]}


def _timestamp(draw: st.DrawFn, n: int, tz: str | None) -> tuple[pa.Array, dict[str, Any]]:
    unit = draw(st.sampled_from(["s", "ms", "us", "ns"]))
    lo, hi = I64 if unit != "s" else (I64[0] // 1000 + 1, I64[1] // 1000)  # Parquet stores seconds as milliseconds
    ints = draw(st.lists(st.one_of(st.sampled_from([lo, hi, 0, -1]), st.integers(lo, hi)), min_size=n, max_size=n))
    declared = draw(st.sampled_from([unit, "us", "ns"]))
    return pa.array(_nullable(draw, ints), pa.timestamp(unit, tz=tz)), {"type": "timestamp", "resolution": declared}


def _column(draw: st.DrawFn, kind: str, n: int) -> tuple[pa.Array, dict[str, Any]]:
    if kind == "decimal":
        return _decimal(draw, n)
    if kind in ("timestamp", "naive_timestamp"):
        return _timestamp(draw, n, "UTC" if kind == "timestamp" else None)
    if kind in ("string", "bad_string"):
        alphabet = st.binary(max_size=6) if kind == "bad_string" else st.text(max_size=6).map(lambda t: t.encode("utf-8", "surrogatepass"))
        raw = draw(st.lists(alphabet, min_size=n, max_size=n))
        return pa.array(_nullable(draw, raw), pa.binary()).view(pa.string()), {"type": "string"}
    if kind == "date":
        days = draw(st.lists(st.one_of(st.sampled_from([-(2**31) + 1, 2**31 - 1, 0]), st.integers(-(10**6), 10**6)), min_size=n, max_size=n))
        return pa.array(_nullable(draw, days), pa.date32()), {"type": "date"}
    if kind == "float64":
        floats = draw(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=n, max_size=n))
        return pa.array(_nullable(draw, floats), pa.float64()), {"type": "float64", "scale": draw(st.integers(0, 6))}
    if kind == "bool":
        return pa.array(_nullable(draw, draw(st.lists(st.booleans(), min_size=n, max_size=n))), pa.bool_()), {"type": "bool"}
    ints = draw(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=n, max_size=n))
    return pa.array(_nullable(draw, ints), pa.int32()), {"type": draw(st.sampled_from(["int32", "int64", "string"]))}


def _yaml(columns: list[Column], key: list[str], partition_by: str | None, duplicate_yaml_key: bool) -> str:
    lines = ["name: fuzz", f"key: [{', '.join(key)}]"]
    if duplicate_yaml_key:
        lines.append("name: again")
    if partition_by is not None:
        lines.append(f"partition_by: {partition_by}")
    lines.append("columns:")
    for c in columns:
        params = ", ".join(f"{k}: {v}" for k, v in c.spec.items())
        lines.append(f"  - {{name: {c.name}, {params}}}")
    return "\n".join(lines) + "\n"


@st.composite
def cases(draw: st.DrawFn) -> Case:
    n = draw(st.integers(0, 8))
    ids = draw(st.lists(st.integers(-5, 5), min_size=n, max_size=n))  # small range: duplicate keys happen
    columns = [Column("id", pa.array(_nullable(draw, ids) if draw(st.booleans()) else ids, pa.int64()), {"type": "int64"})]
    for i, kind in enumerate(draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=3))):
        array, spec = _column(draw, kind, n)
        columns.append(Column(f"c{i}_{kind}", array, {**spec, "nullable": draw(st.booleans())}))
    partition_by = draw(st.one_of(st.none(), st.sampled_from([c.name for c in columns])))
    table = pa.table({c.name: c.array for c in columns})
    return Case(table, _yaml(columns, ["id"], partition_by, draw(st.integers(0, 9)) == 0), partition_by)


def _write(case: Case, folder: Path) -> tuple[Path, Path]:
    data, contract = folder / "data.parquet", folder / "contract.yaml"
    pq.write_table(case.table, data)
    contract.write_text(case.contract, encoding="utf-8")
    return data, contract


def check_outcome(code: int, out: str, err: str, *, success_marker: str | None) -> bool:
    """Exit 0 (with the hash when ``success_marker``), or nonzero with one line on stderr; never a traceback or an internal error."""
    assert "Traceback" not in err and "Traceback" not in out, err
    if code == 0:
        if success_marker is not None:
            assert success_marker in out, out
        assert all(line.startswith("dsv: warning: ") for line in err.splitlines()), err
        return True
    assert code != exit_code(FailureKind.INTERNAL), err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dsv: error: "), err
    return False


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=cases())
def test_fuzz_hash_and_canonical_in_process(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="dsv-fuzz-") as tmp:
        folder = Path(tmp)
        data, contract = _write(case, folder)
        common = [str(data), "--contract", str(contract)]
        capsys.readouterr()
        ok = check_outcome(main(["hash", *common]), *capsys.readouterr(), success_marker="content_hash")
        out_file = folder / "canonical.txt"
        canonical_ok = check_outcome(main(["canonical", *common, "--out", str(out_file)]), *capsys.readouterr(), success_marker=None)
        assert canonical_ok == ok
        assert out_file.exists() == ok
        code = main(["canonical", *common])
        out, err = capsys.readouterr()
        assert check_outcome(code, out, err, success_marker=None) == ok
        if ok:
            assert out == out_file.read_text(encoding="utf-8")
        else:
            assert out == ""
        assert sorted(p.name for p in folder.iterdir()) == sorted(["data.parquet", "contract.yaml", *(["canonical.txt"] if ok else [])])


def _fixed_cases() -> list[Case]:
    ids = pa.array([1, 2, 3], pa.int64())
    bad = pa.array([b"a", b"\xc3", b"b"], pa.binary()).view(pa.string())
    contract = "name: f\nkey: [id]\n{p}columns:\n  - {{name: id, type: int64}}\n  - {{name: s, type: string}}\n"
    return [
        Case(pa.table({"id": ids, "s": pa.array(["x", "y", "z"])}), contract.format(p=""), None),
        Case(pa.table({"id": ids, "s": bad}), contract.format(p="partition_by: s\n"), "s"),
        Case(pa.table({"id": pa.array([1, 1, 2], pa.int64()), "s": pa.array(["x", "y", "z"])}), contract.format(p=""), None),
        Case(pa.table({"id": ids, "s": pa.array(["x", "y", "z"])}), contract.format(p="") + "name: twice\n", None),
    ]


@pytest.mark.parametrize("index", range(4))
def test_fuzz_cases_through_the_entry_point(index: int, tmp_path: Path) -> None:
    data, contract = _write(_fixed_cases()[index], tmp_path)
    hashed = subprocess.run([DSV, "hash", str(data), "--contract", str(contract)], capture_output=True, text=True, timeout=120)
    ok = check_outcome(hashed.returncode, hashed.stdout, hashed.stderr, success_marker="content_hash")
    assert ok == (index == 0)
    out_file = tmp_path / "c.txt"
    canon = subprocess.run([DSV, "canonical", str(data), "--contract", str(contract), "--out", str(out_file)], capture_output=True, text=True, timeout=120)
    assert check_outcome(canon.returncode, canon.stdout, canon.stderr, success_marker=None) == ok
    assert out_file.exists() == ok and canon.stdout == ""
