"""(c) `dsv hash` wall time / `dvc add` wall time on the same Parquet files (target <= 2x).

DVC lives in its own venv (benchmarks/.data/dvc-venv, created on first use;
not a project dependency). `dvc add` runs in a scratch git repository with a
fresh cache, so it really hashes (MD5) and caches every file. Stage breakdown, same
files: a plain MD5 pass (dvc's hashing alone); for dsv, in this process, the Parquet
read into Arrow and the in-memory hash of that table.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

import pyarrow.parquet as pq

from benchmarks.common import Result, timed
from benchmarks.data import DATA_DIR, FILES, dataset, transactions_contract
from dsv_platform.core.identity import hashing

TARGET = 2.0
DVC_VENV = DATA_DIR / "dvc-venv"


def dvc_executable() -> Path:
    exe = DVC_VENV / "bin" / "dvc"
    if not exe.exists():
        venv.EnvBuilder(with_pip=True, clear=True).create(DVC_VENV)
        subprocess.run([str(DVC_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet", "dvc"], check=True)
    return exe


def dsv_executable() -> list[str]:
    exe = Path(sys.executable).parent / "dsv"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "dsv_platform.cli.main"]


def md5_pass(files: list[Path]) -> int:
    """Stream every file through MD5 in 1 MiB blocks (the hashing `dvc add` does); returns the bytes read."""
    total = 0
    for path in files:
        md5 = hashlib.md5()
        with path.open("rb") as f:
            while block := f.read(1 << 20):
                md5.update(block)
                total += len(block)
    return total


def dsv_stages(folder: Path) -> dict[str, float]:
    """In this process, over the same files: Parquet read into Arrow, then the in-memory hash of that table."""
    contract = transactions_contract()
    read_s, table = timed(lambda: pq.read_table(folder, columns=contract.column_names))
    hash_s, _ = timed(lambda: hashing.hash_table(table, contract))
    return {"read_parquet_s": round(read_s, 2), "hash_table_s": round(hash_s, 2)}


def run(rows: int) -> Result:
    folder, contract_file = dataset(rows)
    dvc = dvc_executable()
    identity = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "b@x"}
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", **identity}
    with tempfile.TemporaryDirectory(prefix="dsv-bench-dvc-", dir=DATA_DIR) as tmp:
        repo = Path(tmp)
        data = repo / "data"
        data.mkdir()
        for f in sorted(folder.glob("*.parquet")):
            shutil.copyfile(f, data / f.name)
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True, env=env)
        subprocess.run([str(dvc), "init", "-q"], cwd=repo, check=True, env=env)
        subprocess.run([str(dvc), "config", "core.analytics", "false"], cwd=repo, check=True, env=env)
        dvc_s, _ = timed(lambda: subprocess.run([str(dvc), "add", "-q", "data"], cwd=repo, check=True, env=env))
        dsv_s, _ = timed(
            lambda: subprocess.run([*dsv_executable(), "hash", str(data), "--contract", str(contract_file), "--json"], check=True, capture_output=True, env=env)
        )
        md5_s, total = timed(lambda: md5_pass(sorted(data.glob("*.parquet"))))
        stages = dsv_stages(data)
    ratio = dsv_s / dvc_s
    details = {
        "rows": rows,
        "files": FILES,
        "file_bytes": total,
        "dvc": {"dvc_add_s": round(dvc_s, 2), "md5_pass_s": round(md5_s, 2)},
        "dsv": {"dsv_hash_s": round(dsv_s, 2), **stages},
    }
    return Result("c) dsv hash / dvc add (wall)", ratio, f"<= {TARGET:g}x", ratio <= TARGET, details)
