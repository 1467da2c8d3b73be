"""Issue 23 item 9: the "Your first source and dataset" walkthrough of docs/configuration.md runs as written.

Every fenced block after a ``<!-- walkthrough: WHAT -->`` comment is taken literally, in order: a file path
(written as is), ``shell`` (``mkdir -p``, ``export``, ``dsv ...`` through the real console script, ``python FILE``
with this venv's interpreter; any other command fails the test, so the doc stays executable), or ``output of CMD``
(what the command starting with CMD printed). It runs on a fresh home as written (CSV landings) and with ``format: parquet`` and the same
batches written as typed Parquet files, which must give the same content hash.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
import yaml

from dsv_platform_tests.fixtures.cli_runner import run_dsv

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
MARKED = re.compile(r"^<!-- walkthrough: ([^>\n]+) -->\n```\w*\n(.*?)^```$", re.S | re.M)
ARROW = {"string": pa.string(), "date": pa.date32(), "float64": pa.float64(), "int64": pa.int64()}


def _blocks() -> list[tuple[str, str]]:
    return [(m[1].strip(), m[2]) for m in MARKED.finditer(DOC.read_text(encoding="utf-8"))]


def _arrow(column: dict) -> pa.DataType:
    if column["type"] == "timestamp":
        return pa.timestamp(column.get("resolution", "us"), tz="UTC")
    if column["type"] == "decimal":
        return pa.decimal128(column["precision"], column["scale"])
    return ARROW[column["type"]]


def _as_parquet(csv_path: Path, root: Path) -> None:
    """The CSV batch as a typed Parquet file beside it (the schema of the source whose columns its header names)."""
    header = csv_path.read_text(encoding="utf-8").splitlines()[0].split(",")
    sources = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in (root / "my-config" / "sources").glob("*.yaml")]
    [source] = [s for s in sources if [c["name"] for c in s["columns"]] == header]
    schema = pa.schema([(c["name"], _arrow(c)) for c in source["columns"]])
    table = pacsv.read_csv(csv_path, convert_options=pacsv.ConvertOptions(column_types=dict(zip(schema.names, schema.types, strict=True))))
    pq.write_table(table.cast(schema), csv_path.with_suffix(".parquet"))


class Session:
    """The shell the walkthrough is pasted into: its folder, exported variables and each command's stdout."""

    def __init__(self, root: Path, landing: str) -> None:
        self.root, self.landing = root, landing
        self.env: dict[str, str] = {}
        self.printed: dict[str, str] = {}

    def write(self, rel: str, text: str) -> None:
        path = self.root / rel
        if self.landing == "parquet":
            text = text.replace("landing: {format: csv}", "landing: {format: parquet}")
        path.write_text(text, encoding="utf-8")
        if self.landing == "parquet" and path.suffix == ".csv":
            _as_parquet(path, self.root)

    def run(self, line: str) -> None:
        words = shlex.split(line, comments=True)
        if not words:
            return
        if words[:2] == ["mkdir", "-p"]:
            for folder in words[2:]:
                (self.root / folder).mkdir(parents=True, exist_ok=True)
        elif words[0] == "export":
            name, _, value = words[1].partition("=")
            self.env[name] = value.replace("$PWD", str(self.root))
        elif words[0] == "dsv":
            args = [w.replace(".csv", ".parquet") if self.landing == "parquet" else w for w in words[1:]]
            done = run_dsv(self.env, *args)
            assert done.returncode == 0, f"{line}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
            self.printed[line] = done.stdout
        elif words[0] == "python":
            env = {k: v for k, v in os.environ.items() if not k.startswith("DSV_")} | self.env
            done = subprocess.run([sys.executable, *words[1:]], cwd=self.root, env=env, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, f"{line}: exit {done.returncode}\n{done.stderr[-3000:]}"
            self.printed[line] = done.stdout
        else:
            pytest.fail(f"the walkthrough runs {words[0]!r}, which this test does not know how to run literally: {line}")


def test_the_walkthrough_is_marked_in_order() -> None:
    kinds = [what for what, _ in _blocks()]
    assert "output of python load.py" in kinds
    assert kinds[0] == "shell" and kinds.count("shell") == 3, kinds
    assert {"my-config/sources/readings.yaml", "my-config/datasets/calibrated_readings_v1.yaml", "load.py"} <= set(kinds)
    assert kinds.index("load.py") > kinds.index("output of dsv build calibrated_readings:v1") > kinds.index("batches/readings-2026-01.csv")
    dataset = yaml.safe_load(dict(_blocks())["my-config/datasets/calibrated_readings_v1.yaml"])
    assert dataset["as_of_joins"] and dataset["split_policy"]["policy"] == "group-split/1"


@pytest.mark.parametrize("landing", ["csv", "parquet"])
def test_the_walkthrough_runs_as_written(landing: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # relative paths in the commands are the session's folder, as in a terminal
    session = Session(tmp_path, landing)
    for what, text in _blocks():
        if what == "shell":
            for line in text.splitlines():
                session.run(line)
        elif what.startswith("output of "):
            [printed] = [out for line, out in session.printed.items() if line.startswith(what.removeprefix("output of "))]
            if what.startswith("output of dsv build "):
                _same_build(json.loads(printed), json.loads(text.replace("<manifest hash>", "0" * 64)))
            else:
                assert printed.strip() == text.strip(), printed
        else:
            session.write(what, text)
    ingested = session.printed["dsv ingest readings batches/readings-2026-01.csv"]
    assert "rows accepted 6, rejected 0" in ingested and f"readings-2026-01.{landing}" in ingested
    built = json.loads(session.printed["dsv build calibrated_readings:v1 --json"])
    resolved = session.printed["dsv resolve calibrated_readings:v1"]
    assert resolved.startswith(built["ref"]) and "state PUBLISHED" in resolved and built["content_hash"] in resolved
    status = session.printed["dsv status"]  # 3 meters cannot split 50:50: a warning gate, and the status says so
    assert f"usable: none passing every warning; newest readable {built['ref']} PUBLISHED, warn: proportions_within_tolerance" in status
    assert f"  resolves to {built['ref']} (PUBLISHED, warn: proportions_within_tolerance; `dsv resolve calibrated_readings:v1`" in status


def _same_build(printed: dict, documented: dict) -> None:
    """The build printed what the doc shows, but for the manifest hash, which records when the rows were recorded."""
    assert set(printed) == set(documented)
    assert printed["ref"] == f"calibrated_readings:v1@sha256:{printed['manifest_hash']}" and len(printed["manifest_hash"]) == 64
    same = ("content_hash", "rows", "split_counts")
    assert {k: printed[k] for k in same} == {k: documented[k] for k in same}
